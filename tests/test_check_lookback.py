"""check_lookback_model accepts the configuration that gives each offset a head
of its own at the same width, and names every other answer's mistake: the
untouched starting code, the chapter's own model copied from above, and each
wrong head count."""

import textwrap

import pytest
import torch

from mha.attention import MultiHeadAttention
from mha.checks import lookback as lookback_check
from mha.checks.core import CheckResult
from mha.checks.lookback import (
    CHAPTER_TASK,
    MODEL_MISTAKES,
    NOT_A_MODEL_MISTAKES,
    VARIANT,
    check_lookback_model,
    lookback_heads,
)
from mha.tasks import LookbackModel, LookbackTask

MESSAGES = {m.name: m.message for m in NOT_A_MODEL_MISTAKES + MODEL_MISTAKES}


def build(task=VARIANT, d_model=24, num_heads=3):
    torch.manual_seed(0)
    return LookbackModel(task, d_model, num_heads)


def text(result):
    """The feedback with its line breaks (wrapped for phones) undone."""
    return " ".join(result.feedback.split())


def starts_like(result, name):
    """Whether the feedback is the catalogue's message ``name`` (up to its first field)."""
    return text(result).startswith(" ".join(MESSAGES[name].split("{")[0].split()))


@pytest.fixture(scope="module")
def correct():
    return check_lookback_model(build())


def test_three_heads_of_width_8_pass_and_the_feedback_says_where_each_head_looks(correct):
    assert isinstance(correct, CheckResult)
    assert correct.passed, correct.feedback
    assert "3 heads of width 8" in text(correct)
    for k in VARIANT.offsets:
        assert f"looks {k} back" in text(correct)


WRONG = {
    "the untouched starting code (None)": (None, "nothing built"),
    "the class itself": (LookbackModel, "the class"),
    "a head count instead of a model": (3, "a number"),
    "the attention module alone": (
        MultiHeadAttention(24, 24, 10, 0.0, 3),
        "the attention module alone",
    ),
    "a string": ("LookbackModel(variant, 24, 3)", "not a LookbackModel"),
    "the chapter's model copied from above": (build(CHAPTER_TASK, 32, 4), "the chapter's task"),
    "the chapter's task with the right heads": (build(CHAPTER_TASK, 24, 3), "the chapter's task"),
    "a variant of the reader's own": (build(LookbackTask(offsets=(1, 3, 5))), "another task"),
    "the variant with other settings": (
        build(LookbackTask(offsets=(1, 3, 6), vocab_size=6)),
        "another task",
    ),
    "the chapter's width": (build(d_model=32, num_heads=4), "another width"),
    "a wider model with the right heads": (build(d_model=30, num_heads=3), "another width"),
    "one head": (build(num_heads=1), "one head"),
    "two heads": (build(num_heads=2), "fewer heads than offsets"),
    "the chapter's head count at width 24": (build(num_heads=4), "the chapter's head count"),
    "six heads": (build(num_heads=6), "more heads than offsets"),
    "eight heads": (build(num_heads=8), "more heads than offsets"),
    "a head per dimension": (build(num_heads=24), "more heads than offsets"),
}


@pytest.mark.parametrize("answer, mistake", WRONG.values(), ids=WRONG.keys())
def test_every_wrong_answer_fails_with_the_message_for_its_mistake(answer, mistake):
    result = check_lookback_model(answer)
    assert not result.passed
    assert starts_like(result, mistake), result.feedback
    assert all(len(line) <= 79 for line in str(result).splitlines())
    assert "{" not in result.feedback, "a field of the message was not filled in"


def test_every_catalogued_mistake_is_reached_by_some_wrong_answer():
    assert {mistake for _, mistake in WRONG.values()} == set(MESSAGES)


def test_the_messages_name_the_numbers_of_the_readers_model():
    assert "6 heads of width 4 for 3 offsets" in text(check_lookback_model(build(num_heads=6)))
    assert "30 wide" in text(check_lookback_model(build(d_model=30, num_heads=3)))
    assert "(1, 3, 5)" in text(check_lookback_model(build(LookbackTask(offsets=(1, 3, 5)))))


def test_a_broken_model_gets_feedback_instead_of_a_traceback():
    model = build()
    del model.attention
    result = check_lookback_model(model)
    assert not result.passed and "could not run" in result.feedback


def test_a_configuration_that_does_not_learn_is_not_passed(monkeypatch):
    monkeypatch.setattr(lookback_check, "STEPS", 1)
    result = check_lookback_model(build())
    assert not result.passed and "learned only 0 of 3" in text(result)


def test_the_check_leaves_the_readers_model_and_random_state_alone():
    model = build()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    check_lookback_model(model)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_the_hints_do_not_give_the_number_and_the_solution_passes():
    for n in (1, 2):
        hint = str(lookback_heads.hint(n))
        assert "num_heads=3" not in hint and "three heads" not in hint
    assert "2 hints" in str(lookback_heads.hint(3))
    namespace = {  # a fresh kernel's names after the chapter's imports: no variant yet
        "torch": torch,
        "LookbackModel": LookbackModel,
        "LookbackTask": LookbackTask,
        "lookback_heads": lookback_heads,
    }
    code = textwrap.dedent(lookback_heads.solution().text)
    *statements, last = code.strip().splitlines()
    exec("\n".join(statements), namespace)
    assert eval(last, namespace).passed


def test_the_four_head_message_points_at_the_reasoning_without_the_answer():
    result = check_lookback_model(build(num_heads=4))
    assert not result.passed and "How many patterns does the variant need" in result.feedback
    assert "as many heads as there are offsets" not in result.feedback
