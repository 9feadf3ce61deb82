"""The self-check convention every exercise shares (mha.checks core)."""

import torch
from torch import nn

from mha.checks import CheckResult, Exercise, Mistake, describe_error, evaluating, first_mistake, never_raises


def test_a_result_reads_as_plain_text_and_as_an_escaped_coloured_box():
    result = CheckResult(False, "Your forward returned <list>")
    assert str(result) == "✗ Not yet. Your forward returned <list>"
    assert "&lt;list&gt;" in result._repr_html_() and "<list>" not in result._repr_html_()
    assert CheckResult(True, "ok")._repr_html_() != result._repr_html_()


def test_the_first_recognised_mistake_wins_and_a_failing_detector_recognises_nothing():
    def broken(_):
        raise RuntimeError("detector bug")

    catalogue = [
        Mistake("broken", "never shown", broken),
        Mistake("odd", "an odd number", lambda n: n % 2 == 1),
        Mistake("three", "three", lambda n: n == 3),
    ]
    assert first_mistake(catalogue, 3).name == "odd"
    assert first_mistake(catalogue, 4) is None


def test_describe_error_gives_type_and_message_without_a_traceback():
    assert describe_error(ValueError("bad shape")) == "ValueError: bad shape"
    assert describe_error(KeyError()) == "KeyError"


def test_evaluating_runs_in_eval_mode_without_gradients_and_restores_every_submodule():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    model.train()
    model[1].eval()  # a mixed state must come back exactly
    with evaluating(model):
        assert not any(m.training for m in model.modules())
        assert not torch.is_grad_enabled()
    assert [m.training for m in model.modules()] == [True, True, False]


def test_never_raises_turns_a_crash_inside_a_check_into_feedback():
    @never_raises
    def fragile(answer):
        return CheckResult(True, str(1 / answer))

    assert fragile(2).passed
    crashed = fragile(0)
    assert not crashed.passed and "ZeroDivisionError" in crashed.feedback


def test_an_exercise_offers_check_hints_and_solution():
    exercise = Exercise(lambda a: CheckResult(a == 42, "is it 42?"), ("Think of a number.", "Larger."), "answer = 42")
    assert exercise.check(42).passed and not exercise.check(41).passed
    assert "Hint 2 of 2" in str(exercise.hint(2)) and "Larger." in str(exercise.hint(2))
    assert "hint(1) to hint(2)" in str(exercise.hint(5))
    assert "answer = 42" in str(exercise.solution())
    assert "<pre>answer = 42</pre>" in exercise.solution()._repr_html_()
