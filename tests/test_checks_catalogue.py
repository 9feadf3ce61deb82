"""The catalogue runner: right, each buggy reference, unknown, raising answers, garbage."""

import pytest
import torch

from mha.checks.catalogue import Buggy, Catalogue, run_catalogue
from mha.checks.reference import Recipe, attend

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
        (lambda x: None, False, "unknown: 4"),
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
