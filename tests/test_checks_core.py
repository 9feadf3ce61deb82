"""The check core every exercise shares: results (mha.checks.core), what it
tells of a result that is no output, and the catalogue runner, as one table of answers."""

import contextlib
from importlib import import_module
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha.checks import core
from mha.checks.catalogue import Buggy, Catalogue, run_catalogue
from mha.checks.practice import Practice
from mha.checks.reference import Recipe, attend
from mha.exercise import Exercise


def test_a_result_reads_as_plain_text_folded_at_79_and_as_an_escaped_coloured_box():
    result = core.CheckResult(False, "Your forward returned <list>")
    assert str(result) == "✗ Not yet. Your forward returned <list>"
    assert "&lt;list&gt;" in result._repr_html_() and "<list>" not in result._repr_html_()
    assert core.CheckResult(True, "ok")._repr_html_() != result._repr_html_()
    long = "word " * 60 + "\nsecond paragraph"
    shown = str(core.CheckResult(False, long))
    assert max(map(len, shown.splitlines())) <= 79 and shown.endswith("second paragraph")


def test_words_for_mistakes_errors_kinds_and_facts():
    catalogue = [
        core.Mistake("broken", "never shown", lambda n: 1 / 0),  # a failing detector finds nothing
        core.Mistake("odd", "an odd number", lambda n: n % 2 == 1),
        core.Mistake("three", "three", lambda n: n == 3),
    ]
    assert (
        core.first_mistake(catalogue, 3).name == "odd" and core.first_mistake(catalogue, 4) is None
    )
    assert core.describe_error(ValueError("bad shape")) == "ValueError: bad shape"
    assert core.describe_error(KeyError()) == "KeyError"
    assert (core.kind_of(None), core.kind_of(3), core.kind_of(torch.Size([1]))) == (
        "None",
        "an int",
        "a torch.Size",
    )

    class Evidence:
        width = 4
        broken = property(lambda self: 1 / 0)

    assert (
        core.fill("width {width}, broken {broken}, {missing}", Evidence()) == "width 4, broken ?, ?"
    )


def test_evaluating_runs_in_eval_mode_without_gradients_and_restores_every_submodule():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    model.train()
    model[1].eval()  # a mixed state must come back exactly
    with core.evaluating(model):
        assert not any(m.training for m in model.modules()) and not torch.is_grad_enabled()
    assert [m.training for m in model.modules()] == [True, True, False]


def test_never_raises_turns_a_crash_inside_a_check_into_feedback():
    fragile = core.never_raises(lambda answer: core.CheckResult(True, str(1 / answer)))
    assert fragile(2).passed and "ZeroDivisionError" in fragile(0).feedback


X = torch.rand(2, 5, 4, generator=torch.Generator().manual_seed(0))  # (b, num_tokens, head_dim)
BUGS = {"no mask": dict(mask="none"), "not scaled": dict(scale="none")}


def step(name):
    """Step ``name`` of the right pass: attend's own record of it."""

    def right(x):
        attend(x, x, x, steps=(found := {}))
        return found[name]

    return right


STEPS = (core.Step("the scores", 1, step("scores")), core.Step("the weights", 2, step("weights")))
STEPS += (core.Step("the output", 3, step("context")),)
ONE_HEAD = Catalogue(
    configurations=(X, X[:, :3]),
    right=lambda x: attend(x, x, x),
    mistakes=tuple(
        Buggy(name, f"named: {name}", lambda x, c=change: attend(x, x, x, Recipe().but(**c)))
        for name, change in BUGS.items()
    ),
    praise="right",
    unknown="unknown: {width}.",
    raised="raised {error}",
    steps=STEPS,
)


class Evidence:
    width = 4


@pytest.mark.parametrize(
    ("answer", "passed", "words"),
    [
        (lambda x: attend(x, x, x), True, "right"),
        (lambda x: attend(x.double(), x.double(), x.double()), False, "float64 numbers; the"),
        (lambda x: attend(x, x, x, Recipe(mask="none")), False, "named: no mask"),
        (lambda x: attend(x, x, x, Recipe(scale="none")), False, "named: not scaled"),
        (lambda x: attend(x, x, x, Recipe(scale=3)), False, "first differ at the weights"),
        (lambda x: attend(x, x, x + 1), False, "weights and first differ at the output"),
        (lambda x: attend(x + 1, x, x), False, "unknown: 4. Your tensors differ from"),
        (lambda x: 1 / 0, False, "raised ZeroDivisionError"),
        (lambda x: None, False, "returned None, not a tensor of shape (2, 5, 4)."),
        (lambda x: (attend(x, x, x),), False, "a tuple, not a tensor of shape (2, 5, 4)."),
        (lambda x: attend(x, x, x).long(), False, "a tensor of torch.int64, not of floating"),
        (lambda x: attend(x, x, x)[0], False, "shape (5, 4); the output is (2, 5, 4)."),
        (lambda x: torch.full_like(x, torch.nan), False, "returned nan everywhere"),
        (lambda x: attend(x, x, x).mT.mT.transpose(0, 1), False, "4). Its first two axes are"),
    ],
)  # fmt: skip
def test_the_verdict_names_the_first_matching_reference_else_what_the_core_can_tell(
    answer, passed, words
):
    result = run_catalogue(ONE_HEAD, answer, Evidence())
    assert result.passed is passed and words in result.feedback, result.feedback


def test_a_buggy_reference_that_fails_matches_nothing_and_missing_facts_read_as_a_question_mark():
    broken = Catalogue((X,), lambda x: x, (Buggy("b", "never", lambda x: 1 / 0),), "ok", "? {nope}")
    assert run_catalogue(broken, lambda x: x + 1).feedback == "? ?"
    assert torch.equal(attend(X, X, X, Recipe(dropout=torch.zeros_like)), torch.zeros_like(X))


@pytest.mark.parametrize("name", ["wrapper", "weight_split", "fused", "gqa"])
def test_every_class_practice_has_setups_that_can_tell(name):
    """An eval-mode module with dropout p > 0 (dropout left on in eval shows), an input shorter
    than context_length (an unsliced mask shows); the last row runs on a batch of 3, the rest 2
    (practice.check_practice): a batch size fixed in the code shows."""
    found = vars(import_module(f"mha.checks.{name}")).values()
    practice = next(v for v in found if isinstance(v, Practice))
    rows = [dict(zip((*practice.keys, "bias", "tokens"), row)) for row in practice.rows]
    assert any(row["dropout"] > 0 for row in rows)
    assert any(row["tokens"] < row["context_length"] for row in rows)


LINEAR = F.linear


def spoiled(cls, how):
    """``cls`` with a forward whose outputs are right but which the probes of chapters 1 and 6
    spoiled ``how``: gradients cut, or state kept between calls."""

    def forward(self, x):
        if how == "shrunk":  # the mask cut to this input for good
            self.mask = self.mask[: x.shape[1], : x.shape[1]]
        if how == "written":  # into the mask itself, in place
            self.mask[0, 0] = True
        if how == "data":  # the layers' weights through .data: no gradient reaches them
            linear = lambda x, w, b=None: LINEAR(x, w.data, b if b is None else b.data)  # noqa: E731
            with mock.patch.object(F, "linear", linear):
                return cls.forward(self, x)
        x = x.view(2, *x.shape[1:]) if how == "batch" else x  # b = 2, in the code
        if how == "inplace":  # exp's saved output changed: the backward pass raises
            (y := x.exp()).mul_(1.0)
            x = y.log()
        if how == "kept" and not (self.training or torch.is_grad_enabled()):  # each shape's first
            return self.__dict__.setdefault("kept", {}).setdefault(x.shape, cls.forward(self, x))
        with torch.no_grad() if how == "no_grad" else contextlib.nullcontext():
            out = cls.forward(self, x.detach() if how == "input" else x)
        return out.detach() if how == "output" else out

    return type(cls.__name__, (cls,), {"forward": forward})


@pytest.mark.parametrize(
    ("name", "how", "words"),
    [
        ("wrapper", "no_grad", "it carries no gradient"), ("wrapper", "output", "carries no grad"),
        ("wrapper", "input", "no gradient flows from it back to x"),
        ("wrapper", "kept", "gave x's output again"), ("gqa", "kept", "output again for x + 1"),
        ("gqa", "shrunk", "changed self.mask (a slice assigned"), ("gqa", "input", "back to x"),
        ("gqa", "written", "changed self.mask"), ("wrapper", "batch", "batch size is in the code"),
        ("gqa", "data", "no gradient reaches W_query.weight"), ("gqa", "inplace", "backward pass"),
        ("wrapper", "data", "no gradient reaches heads.0.W_query.weight"),
    ],
)  # fmt: skip
def test_every_class_practice_needs_gradients_and_no_state_kept_between_calls(name, how, words):
    exercise = import_module(f"mha.{name}_exercise")
    right = next(v for v in vars(exercise).values() if isinstance(v, Exercise))
    namespace = {**vars(import_module("mha")), **vars(exercise), "torch": torch}
    code = right.solution_code
    cls = code if isinstance(code, type) else exec(code, namespace) or namespace[
        next(n for n in namespace if n.startswith("My"))]  # fmt: skip
    with torch.no_grad():  # a reader's cell may switch gradients off: a right answer still passes
        assert right.check(cls).passed
    result = right.check(spoiled(cls, how))
    assert not result.passed and words in result.feedback, result.feedback
