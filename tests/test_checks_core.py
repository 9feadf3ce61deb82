"""The check core every exercise shares: results, hints and solutions (mha.checks.core), and
the catalogue runner (right, each buggy reference, unknown, raising answers, garbage)."""

import html
import re
from importlib import import_module

import pytest
import torch
from torch import nn

from mha.checks.core import (
    CheckResult,
    Exercise,
    Mistake,
    Note,
    describe_error,
    evaluating,
    fill,
    first_mistake,
    highlighted_python,
    kind_of,
    never_raises,
)
from mha.checks.practice import Practice
from mha.checks.reference import Buggy, Catalogue, Recipe, attend, run_catalogue


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
    exercise = Exercise(
        lambda a: CheckResult(a == 42, "is it 42?"),
        ("Think of a number.", "Larger."),
        "answer = 42",
    )
    assert exercise.check(42).passed and not exercise.check(41).passed
    assert "Hint 2 of 2" in str(exercise.hint(2)) and "Larger." in str(exercise.hint(2))
    assert "hint(1) to hint(2)" in str(exercise.hint(5))
    assert "answer = 42" in str(exercise.solution())
    assert (
        '<div class="highlight"><pre><span class="n">answer</span> <span class="o">=</span> '
        '<span class="mi">42</span></pre></div>'
    ) in exercise.solution()._repr_html_()


def test_a_hint_asked_for_with_a_string_or_a_float_says_how_to_ask():
    exercise = Exercise(lambda a: CheckResult(True, ""), ("one", "two"), "x = 1")
    for wrong in ("1", 1.0, True, None):
        note = str(exercise.hint(wrong))
        assert "hint(1)" in note and "hint(2)" in note and repr(wrong) in note


def test_a_solution_given_as_a_class_shows_that_class_source():
    class Answer:
        def forward(self, x):
            return x

    exercise = Exercise(lambda a: CheckResult(True, ""), ("one",), Answer)
    assert exercise.solution_text.startswith("class Answer:")
    assert "return x" in str(exercise.solution())


def test_printed_feedback_and_notes_fold_long_lines_at_79_characters():
    long = "word " * 60 + "\nsecond paragraph"
    for shown in (str(CheckResult(False, long)), str(Note("Hint", long))):
        assert max(len(line) for line in shown.splitlines()) <= 79
        assert "second paragraph" in shown.splitlines()[-1]


def test_messages_are_filled_from_the_evidence_and_a_fact_that_fails_shows_a_question_mark():
    class Evidence:
        width = 4

        @property
        def broken(self):
            raise RuntimeError("no")

    assert fill("width {width}, broken {broken}", Evidence()) == "width 4, broken ?"
    assert fill("{missing}", Evidence()) == "?"


def test_kinds_read_as_words():
    assert kind_of(None) == "None"
    assert kind_of(3) == "an int" and kind_of(torch.Size([1])) == "a torch.Size"
    assert kind_of(test_kinds_read_as_words).startswith("the function")


def test_a_solution_is_highlighted_as_pygments_classes_and_keeps_its_text_exactly():
    code = 'class A(B):\n    def f(self, x):  # <why>\n        return len(x) > 1.5 and "s"\n'
    html_code = highlighted_python(code)
    assert html_code.startswith('<div class="highlight"><pre>')
    for css, token in [
        ("k", "class"),
        ("nc", "A"),
        ("nf", "f"),
        ("bp", "self"),
        ("nb", "len"),
        ("c1", "# &lt;why&gt;"),
        ("mf", "1.5"),
        ("ow", "and"),
        ("s2", '"s"'),
    ]:
        assert f'<span class="{css}">{token}</span>' in html_code, css
    assert html.unescape(re.sub(r"<[^>]+>", "", html_code)) == code


def test_code_that_does_not_parse_keeps_its_text_exactly_in_the_same_block():
    html_code = highlighted_python("x = (1 <")
    assert html_code.startswith('<div class="highlight"><pre>') and html_code.endswith(
        "</pre></div>"
    )
    assert html.unescape(re.sub(r"<[^>]+>", "", html_code)) == "x = (1 <"


X = torch.rand(2, 5, 4, generator=torch.Generator().manual_seed(0))  # (b, num_tokens, head_dim)
BUGS = {"no mask": dict(mask="none"), "not scaled": dict(scale="none")}
ONE_HEAD = Catalogue(
    configurations=(X, X[:, :3]),
    right=lambda x: attend(x, x, x),
    mistakes=tuple(
        Buggy(name, f"named: {name}", lambda x, c=change: attend(x, x, x, Recipe().but(**c)))
        for name, change in BUGS.items()
    ),
    praise="right",
    unknown="unknown: {width}",
    raised="raised {error}",
)


class Evidence:
    width = 4


@pytest.mark.parametrize(
    ("answer", "passed", "words"),
    [
        (lambda x: attend(x, x, x), True, "right"),
        (lambda x: attend(x.double(), x.double(), x.double()), True, "right"),
        (lambda x: attend(x, x, x, Recipe(mask="none")), False, "named: no mask"),
        (lambda x: attend(x, x, x, Recipe(scale="none")), False, "named: not scaled"),
        (lambda x: attend(x, x, x, Recipe(scale=3.0)), False, "unknown: 4"),
        (lambda x: 1 / 0, False, "raised ZeroDivisionError"),
        (lambda x: None, False, "returned None, not a tensor of shape (2, 5, 4)"),
        (lambda x: torch.full_like(x, torch.nan), False, "unknown: 4"),
    ],
)
def test_the_verdict_names_the_first_matching_reference(answer, passed, words):
    result = run_catalogue(ONE_HEAD, answer, Evidence())
    assert result.passed is passed and words in result.feedback


def test_a_buggy_reference_that_fails_matches_nothing_and_missing_facts_read_as_a_question_mark():
    broken = Catalogue((X,), lambda x: x, (Buggy("b", "never", lambda x: 1 / 0),), "ok", "? {nope}")
    result = run_catalogue(broken, lambda x: x + 1)
    assert (result.passed, result.feedback) == (False, "? ?")


def test_a_dropout_hook_is_applied_to_the_attention_weights():
    zeroed = attend(X, X, X, Recipe(dropout=torch.zeros_like))
    assert torch.equal(zeroed, torch.zeros_like(X))


@pytest.mark.parametrize("name", ["wrapper", "weight_split", "fused", "gqa"])
def test_every_class_practice_has_setups_that_can_tell(name):
    """An eval-mode module with dropout p > 0 (dropout left on in eval shows), an input shorter
    than context_length (an unsliced mask shows); every run's batch is 2 (runs.Run)."""
    practice = next(
        v for v in vars(import_module(f"mha.checks.{name}")).values() if isinstance(v, Practice)
    )
    rows = [dict(zip((*practice.keys, "bias", "tokens"), row)) for row in practice.rows]
    assert any(row["dropout"] > 0 for row in rows)
    assert any(row["tokens"] < row["context_length"] for row in rows)
