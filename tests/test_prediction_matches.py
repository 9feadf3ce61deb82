"""The verdict a reveal gives a prediction, and the format it shows for one it cannot read.

How each form of a prediction is read is the case table's job (tests/prediction_cases.json);
here: the verdict's words, the format (never quoting the answer), values only Python has
(tensors, torch.Size), choices that must hold the answer, and that reading never raises.
"""

from collections import namedtuple

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mha.predictions import format_of
from mha.reveal import _verdict, prediction_matches, reveal

#: The choices of chapter 6's cache prediction.
CACHE = {"A": "128 MiB", "B": "1 GiB", "C": "4 GiB", "D": "32 GiB"}
#: Chapter 4's question "how many offsets do the four heads cover?".
OFFSETS = (1, 2, 3, 4, "spread")
Pair = namedtuple("Pair", "first second")


def verdict_of(capsys, answer, prediction, **options):
    """The verdict line ``reveal`` prints, on one line."""
    reveal(answer, prediction, **options)
    return " ".join(capsys.readouterr().out.split("The answer:", 1)[1].split())


def test_reveal_says_right_wrong_or_how_to_write_it(capsys):
    assert "(2, 6, 4)" in verdict_of(capsys, (2, 6, 4), "(2, 6, 4)")
    assert "matches the answer" in verdict_of(capsys, (2, 6, 4), [2, 6, 4])
    assert "is not what the code computes" in verdict_of(capsys, "B", "c", choices=CACHE)
    assert "matches the answer" in verdict_of(capsys, "B", "b", choices=CACHE)
    unread = verdict_of(capsys, "B", "1 GiB", choices=CACHE)
    assert 'cannot be read as this answer: write it as one of "A", "B", "C" or "D".' in unread
    rule = verdict_of(capsys, 3, 4, matches=lambda p, a: abs(p - a) <= 1)
    assert "matches the answer" in rule


@pytest.mark.parametrize(
    "prediction, answer",
    [
        (torch.Size([2, 6, 4]), (2, 6, 4)),
        (torch.tensor([2, 6, 4]), (2, 6, 4)),
        (torch.tensor(4), 4),
        (torch.tensor(True), True),
        ((15, 6.0), (15, 6)),
        (((1, 1, 2, 2), (1, 2, 1, 2)), ([1, 1, 2, 2], [1, 2, 1, 2])),
        (4, torch.tensor(4)),
    ],
)
def test_python_values_are_read_as_the_numbers_they_hold(prediction, answer):
    assert prediction_matches(prediction, answer)


@pytest.mark.parametrize(
    "prediction, answer, shown",
    [
        ("a few", 4, "a whole number, such as 7"),
        ("seven", 7, "a whole number, such as 8"),
        (1, True, "True or False"),
        (7, (2, 6, 4), "a tuple of 3 whole numbers, such as (1, 2, 3)"),
        ("x", (1, 2, 3), "a tuple of 3 whole numbers, such as (2, 3, 4)"),
        ((1, 2), "spread", "text in quotes"),
        ("some", 0.5, "a number, such as 0.25"),
        (
            "dunno",
            ((2, 6, 3, 2), (2, 3, 6, 2)),
            "a pair of tuples of 4 whole numbers, such as ((1, 2, 3, 4), (1, 2, 3, 4))",
        ),
        (
            "[1, 2, 3]",
            ([1, 1, 2, 2], [1, 2, 1, 2]),
            "a pair of lists of 4 whole numbers, such as ([1, 2, 3, 4], [1, 2, 3, 4])",
        ),
        ("lots", (15, 6), "a pair of whole numbers, such as (1, 2)"),
        ("yes", (1, "spread"), "a tuple of 2"),
        ("big", torch.Size([2, 6, 4]), "a tuple of 3 whole numbers, such as (1, 2, 3)"),
        ("big", Pair(1, 2), "a pair of whole numbers, such as (2, 3)"),
    ],
)
def test_reveal_shows_the_format_of_a_prediction_it_cannot_read(prediction, answer, shown, capsys):
    verdict = verdict_of(capsys, answer, prediction)
    assert f"cannot be read as this answer: write it as {shown}" in verdict
    assert "matches the answer" not in verdict and "not what the code computes" not in verdict


@pytest.mark.parametrize(
    "answer, choices, shown",
    [
        ("B", CACHE, 'one of "A", "B", "C" or "D"'),
        (1, OFFSETS, 'one of 1, 2, 3, 4 or "spread"'),
        (False, (True, False), "one of True or False"),
    ],
)
def test_a_question_with_choices_lists_their_labels_as_the_format(answer, choices, shown, capsys):
    verdict = verdict_of(capsys, answer, "I am not sure", choices=choices)
    assert verdict.endswith(f"cannot be read as this answer: write it as {shown}.")


@pytest.mark.parametrize("choices", [(), {}, None, iter(OFFSETS), [1, 2, 3, 4, "spread"]])
def test_choices_may_be_any_sequence_and_empty_ones_offer_nothing(choices, capsys):
    assert prediction_matches("Spread.", "spread", choices=choices)
    assert "cannot be read" in verdict_of(capsys, 1, "x", choices=choices)


def test_an_answer_that_is_none_of_the_choices_is_the_authors_mistake():
    with pytest.raises(ValueError, match="none of the choices"):
        reveal("E", "A", choices=CACHE)
    with pytest.raises(ValueError, match="none of the choices"):
        reveal(1, 1, choices=(True, False))  # 1 is not True


def test_the_format_shown_never_quotes_the_answer_as_its_example():
    for answer in (7, 1, 0.5, (1, 2, 3), (2, 3, 4), ([1, 2], [1, 2])):
        assert repr(answer) not in format_of(answer).split("such as", 1)[-1]


ANSWERS = (4, 8388608, 0.5, True, False, "B", (2, 6, 4), ([1, 2], [2]))


@settings(max_examples=300, deadline=None)  # a busy machine must not fail a test of meaning
@given(
    st.one_of(
        st.text(max_size=30),
        st.integers(),
        st.floats(),
        st.booleans(),
        st.lists(st.one_of(st.integers(), st.floats(), st.text(max_size=5)), max_size=4),
        st.none(),
    ),
    st.sampled_from(ANSWERS),
    st.sampled_from((None, CACHE, OFFSETS)),
)
def test_reading_never_raises_and_always_gives_a_verdict(prediction, answer, choices):
    if choices is not None and not any(answer is c or answer == c for c in choices):
        choices = None  # a question offers its own answer
    assert prediction_matches(prediction, answer, choices=choices) in (True, False)
    if prediction is not None:
        verdict = _verdict(prediction, answer, None, choices)
        assert verdict.startswith("Your prediction") and verdict.endswith(".")


@settings(deadline=None)  # a busy machine must not fail a test of meaning
@given(st.integers(min_value=0, max_value=10**12), st.sampled_from((",", " ", "'", "_")))
def test_digits_grouped_in_threes_mean_the_number(n, separator):
    written = f"{n:,}".replace(",", separator)
    assert prediction_matches(written, n) and prediction_matches(str(n), n)
    assert not prediction_matches(written, n + 1)
    assert not prediction_matches(f"{n}.5", n)


@settings(deadline=None)  # a busy machine must not fail a test of meaning
@given(
    st.lists(st.integers(0, 99), min_size=1, max_size=5),
    st.sampled_from(("({})", "[{}]", "{}")),
    st.sampled_from((", ", ",", " ", " x ")),
    st.integers(0, 4),
)
def test_a_sequence_written_as_text_matches_number_by_number(items, brackets, separator, changed):
    answer = tuple(items)
    assert prediction_matches(brackets.format(separator.join(map(str, items))), answer)
    wrong = list(items)
    wrong[changed % len(wrong)] += 1
    assert not prediction_matches(brackets.format(separator.join(map(str, wrong))), answer)
