"""check_lookback_model, as one table of cases: the configuration that gives each offset a head
of its own at the same width passes; the untouched starting code, the chapter's own model copied
from above and each wrong head count fail with a message that names the mistake."""

import textwrap

import pytest
import torch

from mha.attention import MultiHeadAttention
from mha.checks import lookback as lookback_check
from mha.checks.lookback import VARIANT, check_lookback_model
from mha.lookback_exercise import lookback_heads
from mha.tasks import LookbackModel, LookbackTask

CHAPTER_TASK = LookbackTask()  # the chapter's task, looking back (1, 2, 3, 4)


def build(task=VARIANT, d_model=24, num_heads=3):
    torch.manual_seed(0)
    return LookbackModel(task, d_model, num_heads)


def broken():
    model = build()
    del model.attention
    return model


#: (answer, passes, words its message must contain, line breaks undone).
CASES = [
    (build(), True, "3 heads of width 8, one per offset"),
    (build(), True, "looks 6 back"),
    (build(LookbackTask(offsets=(6, 3, 1))), True, "one per offset"),  # the offsets in any order
    (None, False, "my_model is still None. Build the model and pass it"),  # the starting code
    (LookbackModel, False, "but got the class LookbackModel. Build one"),
    (3, False, "but got a value of type int. Build one: my_model = LookbackModel(variant"),
    (MultiHeadAttention(24, 24, 10, 0.0, 3), False, "got a value of type MultiHeadAttention"),
    (
        "LookbackModel(variant, 24, 3)",
        False,
        "expects a LookbackModel, but got a value of type str",
    ),
    (build(CHAPTER_TASK, 32, 4), False, "looks back (1, 2, 3, 4)"),  # copied from above
    (build(CHAPTER_TASK, 24, 3), False, "pass variant as the first argument"),
    (build(LookbackTask(offsets=(1, 3, 5))), False, "a task that looks back (1, 3, 5)"),
    (build(LookbackTask(offsets=(1, 3, 6), vocab_size=6)), False, "differs from the variant"),
    (build(d_model=32, num_heads=4), False, "Your model is 32 wide. Keep d_model=24"),
    (build(d_model=30, num_heads=3), False, "Your model is 30 wide"),
    (build(num_heads=1), False, "1 head of width 24 for 3 offsets: a head has one attention"),
    (build(num_heads=1), False, "so a head has to serve several offsets"),
    (build(num_heads=2), False, "2 heads of width 12 for 3 offsets"),
    (build(num_heads=4), False, "How many patterns does the variant need"),
    (build(num_heads=6), False, "6 heads of width 4 for 3 offsets: more heads than offsets"),
    (build(num_heads=8), False, "more heads than offsets"),
    (build(num_heads=24), False, "24 heads of width 1"),
    (broken(), False, "could not run"),
]


@pytest.mark.parametrize("answer, passes, words", CASES)
def test_the_check(answer, passes, words):
    result = check_lookback_model(answer)
    assert result.passed == passes and words in " ".join(result.feedback.split()), result.feedback
    assert all(len(line) <= 79 for line in str(result).splitlines())
    assert "as many heads as there are offsets" not in result.feedback


def test_a_configuration_that_does_not_learn_is_not_passed(monkeypatch):
    monkeypatch.setattr(lookback_check, "STEPS", 1)
    result = check_lookback_model(build())
    assert not result.passed and "learned only 0 of 3" in " ".join(result.feedback.split())


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
    *statements, last = textwrap.dedent(lookback_heads.solution().text).strip().splitlines()
    exec("\n".join(statements), namespace)
    assert eval(last, namespace).passed
