"""Predictions are read as a reader means them, and one that cannot be read gets its format."""

import pytest

from mha.reveal import prediction_matches, reveal


@pytest.mark.parametrize(
    "prediction, answer",
    [
        ("b", "B"),
        ("  B ", "B"),
        ("No", "no"),
        ("YES", "yes"),
        ("4", 4),
        (4.0, 4),
        (4, 4.0),
        (" 12 ", 12),
        (4, "4"),
        ("True", True),
        ("false", False),
        (False, False),
        ([2, 6, 4], (2, 6, 4)),
        ("(2, 6, 4)", (2, 6, 4)),
        ([[2, 6, 3, 2], [2, 3, 6, 2]], ((2, 6, 3, 2), (2, 3, 6, 2))),
        ((15, 6.0), (15, 6)),
    ],
)
def test_a_prediction_that_means_the_answer_matches(prediction, answer):
    assert prediction_matches(prediction, answer)


@pytest.mark.parametrize(
    "prediction, answer",
    [
        ("A", "B"),
        ("C", "B and C"),
        (5, 4),
        ("5", 4),
        (0, False),
        (1, True),
        (True, 1),
        ("1", True),
        ("yes", True),
        ([2, 6], (2, 6, 4)),
        ([2, 6, 5], (2, 6, 4)),
        ("four", 4),
        ((2, 6, 4), "B"),
        (object(), 4),
    ],
)
def test_a_prediction_that_says_something_else_does_not_match(prediction, answer):
    assert not prediction_matches(prediction, answer)


@pytest.mark.parametrize(
    "prediction, answer, shown",
    [
        ("four", 4, "a whole number"),
        (1, True, "True or False"),
        (7, (2, 6, 4), "a tuple of 3"),
        ((2, 6, 4), "B", "text in quotes"),
    ],
)
def test_reveal_shows_the_format_of_a_prediction_it_cannot_read(prediction, answer, shown, capsys):
    reveal(answer, prediction)
    verdict = " ".join(capsys.readouterr().out.split())
    assert "cannot be read" in verdict and shown in verdict
    assert "matches the answer" not in verdict
    assert "not what the code computes" not in verdict


def test_reveal_judges_with_prediction_matches_and_still_takes_its_own_rule(capsys):
    reveal((2, 6, 4), [2, 6, 4])
    reveal("B", "c")
    reveal(3, 4, matches=lambda p, a: abs(p - a) <= 1)
    verdicts = [
        " ".join(answer.split()) for answer in capsys.readouterr().out.split("The answer:")[1:]
    ]
    assert "matches the answer" in verdicts[0]
    assert "is not what the code computes" in verdicts[1]
    assert "matches the answer" in verdicts[2]


def test_the_format_shown_never_gives_the_answer_away(capsys):
    reveal(7, "seven")
    verdict = capsys.readouterr().out.split("The answer: 7", 1)[1]
    assert "cannot be read" in verdict and "7" not in verdict.replace("'seven'", "")
    reveal("A", 3)
    verdict = capsys.readouterr().out.split("The answer: A", 1)[1]
    assert '"A"' not in verdict
