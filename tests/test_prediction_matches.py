"""Predictions are read as a person writes them, and one that cannot be read gets its format.

The rows of issue 18's table each have a test: "B.", "(B)", "b)", "option B" for a letter;
"yes" and "no" for True and False; "no." and the text of a choice ("slower") for a yes/no
question; "8,388,608" and "8 388 608"; number words up to twenty; the text of a choice for its
label; every answer a question offers. Next to each, the near misses a human grader marks wrong.
"""

from collections import namedtuple

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mha.predictions import NUMBER_WORDS, format_of
from mha.reveal import _verdict, prediction_matches, reveal

#: The choices of chapter 2's first prediction (the width of the wrapper's output).
WIDTH = {"A": "d_out", "B": "num_heads + d_out", "C": "num_heads × d_out"}
#: The choices of chapter 6's cache prediction.
CACHE = {"A": "128 MiB", "B": "1 GiB", "C": "4 GiB", "D": "32 GiB"}
#: Chapter 5's question "is the split still faster at the longest length?".
FASTER = {"yes": "faster", "no": "slower", "inconclusive": "within the noise"}
#: Chapter 3's question "what if .contiguous() is left out?".
CONTIGUOUS = {
    "A": "Nothing: view works the same either way",
    "B": "view raises an error",
    "C": "view runs but silently mixes up the numbers",
}
#: Chapter 4's question "where does head 1 look?".
OFFSETS = (1, 2, 3, 4, "spread")
Pair = namedtuple("Pair", "first second")


def verdict_of(capsys, answer, prediction, **options):
    """The verdict line ``reveal`` prints, on one line."""
    reveal(answer, prediction, **options)
    return " ".join(capsys.readouterr().out.split("The answer:", 1)[1].split())


@pytest.mark.parametrize(
    "prediction, answer",
    [
        # letters, written as people write them
        ("b", "B"),
        ("  B ", "B"),
        ("B.", "B"),
        ("(B)", "B"),
        ("b)", "B"),
        ("option B", "B"),
        ("Option (b)", "B"),
        ("[B]", "B"),
        ("(b", "B"),
        ("**B**", "B"),
        ("answer: B", "B"),
        ('"B"', "B"),
        ("B and C", "B and C"),
        ("C and B", "B and C"),
        ("B, C", "B and C"),
        ("both B and C", "B and C"),
        ("BC", "B and C"),
        # yes and no, for a True/False question and for a yes/no one
        ("yes", True),
        ("Yes!", True),
        ("no", False),
        ("No.", False),
        ("no, it differs", False),
        ("True", True),
        ("false", False),
        (False, False),
        ("no.", "no"),
        ("Nope", "no"),
        ("y", "yes"),
        (True, "yes"),
        ("No", "no"),
        ("YES", "yes"),
        # numbers
        ("4", 4),
        (4.0, 4),
        (4, 4.0),
        (" 12 ", 12),
        ("4.", 4),
        (4, "4"),
        ("8,388,608", 8388608),
        ("8 388 608", 8388608),
        ("8\u202f388\u202f608", 8388608),
        ("8'388'608", 8388608),
        ("8_388_608", 8388608),
        ("8.388.608", 8388608),
        ("8388608.0", 8388608),
        ("2**23", 8388608),
        ("2^23", 8388608),
        ("4096 * 2048", 8388608),
        ("4096 × 2048", 8388608),
        ("four", 4),
        ("Four.", 4),
        ("twenty", 20),
        ("zero", 0),
        # sequences
        ([2, 6, 4], (2, 6, 4)),
        ("(2, 6, 4)", (2, 6, 4)),
        ("2, 6, 4", (2, 6, 4)),
        ("[2 6 4]", (2, 6, 4)),
        ("2 x 6 x 4", (2, 6, 4)),
        ("torch.Size([2, 6, 4])", (2, 6, 4)),
        (torch.Size([2, 6, 4]), (2, 6, 4)),
        (torch.tensor([2, 6, 4]), (2, 6, 4)),
        (torch.tensor(4), 4),
        ("(two, six, four)", (2, 6, 4)),
        ([[2, 6, 3, 2], [2, 3, 6, 2]], ((2, 6, 3, 2), (2, 3, 6, 2))),
        ("(2, 6, 3, 2), (2, 3, 6, 2)", ((2, 6, 3, 2), (2, 3, 6, 2))),
        ("((2, 6, 3, 2) (2, 3, 6, 2))", ((2, 6, 3, 2), (2, 3, 6, 2))),
        ("[1, 1, 2, 2], [1, 2, 1, 2]", ([1, 1, 2, 2], [1, 2, 1, 2])),
        (((1, 1, 2, 2), (1, 2, 1, 2)), ([1, 1, 2, 2], [1, 2, 1, 2])),
        ((15, 6.0), (15, 6)),
        # text
        ("spread.", "spread"),
        ("'Spread'", "spread"),
    ],
)
def test_a_prediction_that_means_the_answer_matches(prediction, answer):
    assert prediction_matches(prediction, answer)


@pytest.mark.parametrize(
    "prediction, answer",
    [
        ("A", "B"),
        ("BC", "B"),
        ("bc", "B"),
        ("not B", "B"),
        ("B or C", "B"),
        ("B and C", "B"),
        ("option C", "B"),
        ("(A)", "B"),
        ("C", "B and C"),
        ("B, C, D", "B and C"),
        ("B or C", "B and C"),
        (5, 4),
        ("5", 4),
        ("4.5", 4),
        ("4,5", 4),
        ("fourteen", 4),
        ("forty", 4),
        ("four or five", 4),
        ("about 4", 4),
        ("8,388,609", 8388608),
        ("838,8608", 8388608),
        ("8.388", 8388),
        ("8,388.608", 8388608),
        ("8,38,8608", 8388608),
        ("8 million", 8388608),
        ("2**24", 8388608),
        ("2**1000", 4),
        ("nine", 19),
        (0, False),
        (1, True),
        (True, 1),
        ("1", True),
        ("yes", False),
        ("no", True),
        ("not really", True),
        ("maybe", True),
        ("yes and no", True),
        ("no", "yes"),
        (False, "yes"),
        ("yes", "inconclusive"),
        ([2, 6], (2, 6, 4)),
        ([2, 6, 5], (2, 6, 4)),
        ("(2, 6, 5)", (2, 6, 4)),
        ("2 x 6", (2, 6, 4)),
        ("(2, 6, 4) or (2, 4, 6)", (2, 6, 4)),
        ("[1, 2, 1, 2], [1, 1, 2, 2]", ([1, 1, 2, 2], [1, 2, 1, 2])),
        ((2, 6, 4), "B"),
        ("spreads out", "spread"),
        (object(), 4),
        (float("nan"), 4),
        ("", 4),
        ("", "B"),
        ("", True),
        ("", (2, 6, 4)),
    ],
)
def test_a_prediction_that_says_something_else_does_not_match(prediction, answer):
    assert not prediction_matches(prediction, answer)


@pytest.mark.parametrize(
    "prediction, answer, choices",
    [
        ("num_heads × d_out", "C", WIDTH),
        ("num_heads * d_out", "C", WIDTH),
        ("Num_heads*d_out.", "C", WIDTH),
        ("`num_heads × d_out`", "C", WIDTH),
        ("C. num_heads * d_out", "C", WIDTH),
        ("(c) num_heads * d_out", "C", WIDTH),
        ("(C)", "C", WIDTH),
        ("1 GiB", "B", CACHE),
        ("1GiB", "B", CACHE),
        ("b)", "B", CACHE),
        ("slower", "no", FASTER),
        ("Slower.", "no", FASTER),
        ("no.", "no", FASTER),
        ("No, slower", "no", FASTER),
        (False, "no", FASTER),
        ("within the noise", "inconclusive", FASTER),
        ("spread", "spread", OFFSETS),
        ("Spread.", "spread", OFFSETS),
        ("one", 1, OFFSETS),
        ("1", 1, OFFSETS),
        (1.0, 1, OFFSETS),
        ("(B)", "B", ("A", "B", "C")),
        ("A and C", "A and C", WIDTH),
        ("View raises an error.", "B", CONTIGUOUS),
        ("nothing", "A", CONTIGUOUS),
        ("Nothing: view works the same either way.", "A", CONTIGUOUS),
        ("yes", True, (True, False)),
        ("No.", False, (True, False)),
        ("4: four heads", 4, {4: "four heads", 5: "five heads"}),
        ("Five heads.", 5, {4: "four heads", 5: "five heads"}),
        ("no - slower", "no", FASTER),
        ("C, A", "A and C", WIDTH),
    ],
)
def test_a_choice_named_by_its_text_or_label_means_that_choice(prediction, answer, choices):
    assert prediction_matches(prediction, answer, choices=choices)


@pytest.mark.parametrize(
    "prediction, answer, choices",
    [
        ("num_heads + d_out", "C", WIDTH),
        ("d_out", "C", WIDTH),
        ("num_heads", "C", WIDTH),
        ("B. num_heads × d_out", "C", WIDTH),
        ("C. num_heads + d_out", "C", WIDTH),
        ("4 GiB", "B", CACHE),
        ("1 MiB", "B", CACHE),
        ("E", "B", CACHE),
        ("faster", "no", FASTER),
        ("yes", "no", FASTER),
        ("slower", "inconclusive", FASTER),
        ("no", "inconclusive", FASTER),
        ("spread", 1, OFFSETS),
        ("2", 1, OFFSETS),
        ("five", 1, OFFSETS),
        (1, "spread", OFFSETS),
        ("one", "spread", OFFSETS),
        ("everywhere", "spread", OFFSETS),
        ("A", "A and C", WIDTH),
        ("nothing", "B", CONTIGUOUS),
        ("view", "B", CONTIGUOUS),
        ("yes", False, (True, False)),
        (1, True, (True, False)),
        ("4.5", 4, {4: "four heads", 5: "five heads"}),
        ("d_out", "A and C", WIDTH),
    ],
)
def test_a_wrong_choice_stays_wrong_whichever_way_it_is_named(prediction, answer, choices):
    assert not prediction_matches(prediction, answer, choices=choices)


def test_an_answer_the_question_offers_is_readable_whatever_the_right_ones_type(capsys):
    verdict = verdict_of(capsys, 2, "spread", choices=OFFSETS)
    assert "is not what the code computes" in verdict and "cannot be read" not in verdict
    verdict = verdict_of(capsys, "spread", 2, choices=OFFSETS)
    assert "is not what the code computes" in verdict


@pytest.mark.parametrize(
    "prediction, answer, shown",
    [
        ("a few", 4, "a whole number, such as 7"),
        (1, True, "True or False"),
        (7, (2, 6, 4), "a tuple of 3 whole numbers, such as (1, 2, 3)"),
        ((2, 6, 4), "B", 'a letter in quotes, such as "A"'),
        ((2, 6, 4), "B and C", 'letters in quotes, joined by "and", such as "A and D"'),
        ("not B", "B", 'a letter in quotes, such as "A"'),
        ((1, 2), "no", '"yes" or "no"'),
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
        ("yes", (1, "spread"), "a tuple of 2: a whole number and text in quotes"),
        ("big", torch.Size([2, 6, 4]), "a tuple of 3 whole numbers, such as (1, 2, 3)"),
        ("big", Pair(1, 2), "a pair of whole numbers, such as (2, 3)"),
    ],
)
def test_reveal_shows_the_format_of_a_prediction_it_cannot_read(prediction, answer, shown, capsys):
    verdict = verdict_of(capsys, answer, prediction)
    assert f"cannot be read as this answer: write it as {shown}." in verdict
    assert "matches the answer" not in verdict
    assert "not what the code computes" not in verdict


@pytest.mark.parametrize(
    "answer, choices, shown",
    [
        ("B", CACHE, 'one of "A", "B", "C" or "D" (or the text of a choice)'),
        (1, OFFSETS, 'one of 1, 2, 3, 4 or "spread"'),
        ("no", FASTER, 'one of "yes", "no" or "inconclusive" (or the text of a choice)'),
    ],
)
def test_a_question_with_choices_lists_them_in_the_format(answer, choices, shown, capsys):
    verdict = verdict_of(capsys, answer, "I am not sure", choices=choices)
    assert f"cannot be read as this answer: write it as {shown}." in verdict


@pytest.mark.parametrize("choices", [(), {}, None, iter(OFFSETS), [1, 2, 3, 4, "spread"]])
def test_choices_may_be_any_sequence_and_empty_ones_offer_nothing(choices, capsys):
    assert prediction_matches("Spread.", "spread", choices=choices)
    assert "cannot be read" in verdict_of(capsys, 1, "x", choices=choices)


def test_a_nested_format_is_said_once_and_in_order():
    """The hint of issue 18: "a tuple of 2: (a tuple of 4: (a whole number..." is gone."""
    for answer in (((2, 6, 3, 2), (2, 3, 6, 2)), ([1, 1, 2, 2], [1, 2, 1, 2])):
        shown = format_of(answer)
        assert "a tuple of 2" not in shown and "a tuple of 4" not in shown
        assert shown.count("(") == shown.count(")") and shown.count("[") == shown.count("]")


def test_reveal_judges_with_prediction_matches_and_still_takes_its_own_rule(capsys):
    assert "matches the answer" in verdict_of(capsys, (2, 6, 4), [2, 6, 4])
    assert "is not what the code computes" in verdict_of(capsys, "B", "c")
    rule = verdict_of(capsys, 3, 4, matches=lambda p, a: abs(p - a) <= 1)
    assert "matches the answer" in rule
    assert "matches the answer" in verdict_of(capsys, "C", "num_heads * d_out", choices=WIDTH)


def test_the_format_shown_never_quotes_the_answer_as_its_example(capsys):
    verdict = verdict_of(capsys, 7, "seven-ish")
    assert "cannot be read" in verdict and "7" not in verdict.split("Your prediction", 1)[1]
    verdict = verdict_of(capsys, "A", 3)
    assert '"A"' not in verdict
    verdict = verdict_of(capsys, (1, 2, 3), "x")
    assert "(1, 2, 3)" not in verdict.split("Your prediction", 1)[1]


# Properties: every way of writing a value is read as that value, and as nothing else.

LETTER_FORMS = ("{}", "{}.", "({})", "{})", "[{}]", "option {}", "Option ({})", "answer: {}")
NOT_A_LETTER = ("not {}", "{} or {other}", "{}{other}", "{} and {other}", "{other}")


@settings(deadline=None)  # a busy machine must not fail a test of meaning
@given(
    st.sampled_from("ABCDEFGH"),
    st.sampled_from("ABCDEFGH"),
    st.sampled_from(LETTER_FORMS),
    st.booleans(),
)
def test_every_form_of_a_letter_means_that_letter_and_no_other(letter, other, form, lower):
    written = form.format(letter.lower() if lower else letter)
    assert prediction_matches(written, letter)
    if other != letter:
        assert not prediction_matches(written, other)


@settings(deadline=None)  # a busy machine must not fail a test of meaning
@given(st.sampled_from("ABCDEFGH"), st.sampled_from("ABCDEFGH"), st.sampled_from(NOT_A_LETTER))
def test_a_hedge_a_negation_or_another_letter_never_matches(letter, other, form):
    if other != letter:
        assert not prediction_matches(form.format(letter, other=other), letter)


@settings(deadline=None)  # a busy machine must not fail a test of meaning
@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from((",", " ", "'", "_")))
def test_digits_grouped_in_threes_mean_the_number(n, separator):
    written = f"{n:,}".replace(",", separator)
    assert prediction_matches(written, n)
    assert prediction_matches(str(n), n)
    assert not prediction_matches(written, n + 1)
    assert not prediction_matches(f"{n}.5", n)


def test_number_words_up_to_twenty_mean_their_number_and_no_other():
    assert list(NUMBER_WORDS) == [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen", "twenty",
    ]  # fmt: skip
    for word, value in NUMBER_WORDS.items():
        for n in range(21):
            assert prediction_matches(word, n) == (n == value)
            assert prediction_matches(word.capitalize() + ".", n) == (n == value)


@settings(deadline=None)  # a busy machine must not fail a test of meaning
@given(
    st.lists(st.integers(0, 99), min_size=1, max_size=5),
    st.sampled_from(("({})", "[{}]", "{}")),
    st.sampled_from((", ", ",", " ")),
    st.integers(0, 4),
)
def test_a_sequence_written_as_text_matches_item_by_item(items, brackets, separator, changed):
    answer = tuple(items)
    written = brackets.format(separator.join(map(str, items)))
    assert prediction_matches(written, answer)
    assert prediction_matches(list(items), answer)
    wrong = list(items)
    wrong[changed % len(wrong)] += 1
    assert not prediction_matches(brackets.format(separator.join(map(str, wrong))), answer)
    assert not prediction_matches(written, (*answer, 0))


@settings(deadline=None)  # a busy machine must not fail a test of meaning
@given(st.sampled_from(sorted(CACHE)), st.sampled_from(sorted(CACHE)), st.booleans())
def test_the_text_of_a_choice_means_its_label_and_no_other(said, right, padded):
    text = f"  {CACHE[said].lower()} " if padded else CACHE[said]
    assert prediction_matches(text, right, choices=CACHE) == (said == right)
    assert prediction_matches(f"{said}. {CACHE[said]}", right, choices=CACHE) == (said == right)


ANSWERS = (4, 8388608, 0.5, True, False, "B", "B and C", "no", "spread", (2, 6, 4), ([1, 2], [2]))


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=30),
        st.integers(),
        st.floats(),
        st.booleans(),
        st.lists(st.integers(), max_size=4),
        st.none(),
    ),
    st.sampled_from(ANSWERS),
    st.sampled_from((None, CACHE, FASTER, OFFSETS)),
)
def test_reading_never_raises_and_always_gives_a_verdict(prediction, answer, choices):
    assert prediction_matches(prediction, answer, choices=choices) in (True, False)
    if prediction is not None:
        verdict = _verdict(prediction, answer, None, choices)
        assert verdict.startswith("Your prediction") and verdict.endswith(".")
