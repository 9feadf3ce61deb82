"""The verdict a reveal gives, for what the case table (tests/prediction_cases.json) cannot
hold: values only Python has (tensors, torch.Size, a named tuple), a question's own rule,
choices that must hold the answer; and that reading never raises, on any input.
"""

from collections import namedtuple

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mha.predictions import Unreadable
from mha.reveal import _verdict, reveal

CACHE = {"A": "128 MiB", "B": "1 GiB", "C": "4 GiB", "D": "32 GiB"}  # chapter 6's choices
OFFSETS = (1, 2, 3, 4, "spread")  # chapter 4's
SAME = {True: "the same output", False: "a different output"}
RIGHT, WRONG = "matches the answer.", "is not what the code computes."


def never(prediction, answer):
    raise Unreadable


# fmt: off
@pytest.mark.parametrize("prediction, answer, options, said", [
    (torch.Size([2, 6, 4]), (2, 6, 4), {}, RIGHT),
    (torch.tensor([2, 6, 4]), (2, 6, 4), {}, RIGHT),
    (torch.tensor(4), 4, {}, RIGHT),
    (4, torch.tensor(4), {}, RIGHT),
    (torch.tensor(True), True, {"choices": SAME}, RIGHT),
    ((15, 6.0), (15, 6), {}, RIGHT),
    (((1, 1, 2, 2), (1, 2, 1, 2)), ([1, 1, 2, 2], [1, 2, 1, 2]), {}, RIGHT),
    ("B: 1 GiB", "B", {"choices": CACHE}, RIGHT),
    ("x", (2, 6, 4), {"choices": iter(())}, "write it as a tuple of 3 whole numbers"),
    (4, 3, {"matches": lambda p, a: abs(p - a) <= 1}, RIGHT),
    (4, 3, {"matches": never}, "write it as a whole number, such as 7."),
    ("(2 6 4)", (2, 6, 4), {}, RIGHT),
    ("[2, 6, 5]", (2, 6, 4), {}, WRONG),
    ("big", torch.Size([2, 6, 4]), {}, "a tuple of 3 whole numbers, such as (1, 2, 3)."),
    ("big", namedtuple("Pair", "a b")(1, 2), {}, "a pair of whole numbers, such as (2, 3)."),
    ("[1, 2, 3]", ([1, 1, 2, 2], [1, 2, 1, 2]), {},
     "write it as a pair of lists of 4 whole numbers, such as ([1, 2, 3, 4], [1, 2, 3, 4])."),
])
# fmt: on
def test_the_verdict_says_right_wrong_or_how_to_write_it(prediction, answer, options, said, capsys):
    reveal(answer, prediction, **options)
    verdict = " ".join(capsys.readouterr().out.split("The answer:", 1)[1].split())
    assert f"Your prediction, {prediction!r}, " in verdict and said in verdict


def test_an_answer_that_is_none_of_the_choices_is_the_authors_mistake():
    with pytest.raises(ValueError, match="none of the choices"):
        reveal("E", "A", choices=CACHE)
    with pytest.raises(ValueError, match="none of the choices"):
        reveal(1, 1, choices=(True, False))  # 1 is not True


ANSWERS = (4, 8388608, 0.5, True, False, "B", (2, 6, 4), ([1, 2], [2]))
ITEMS = st.one_of(st.integers(), st.floats(), st.text(max_size=5))
ANY = st.one_of(st.text(max_size=30), st.integers(), st.floats(), st.booleans(), st.none(),
                st.lists(ITEMS, max_size=4))  # fmt: skip


@settings(max_examples=300, deadline=None)  # a busy machine must not fail a test of meaning
@given(ANY, st.sampled_from(ANSWERS), st.sampled_from((None, CACHE, OFFSETS, SAME)))
def test_reading_never_raises_and_always_gives_a_verdict(prediction, answer, choices):
    if choices is not None and not any(answer is c or answer == c for c in choices):
        choices = None  # a question offers its own answer
    verdict = _verdict(prediction, answer, None, choices)
    assert verdict.startswith("Your prediction") and verdict.endswith(".")


@settings(deadline=None)  # a busy machine must not fail a test of meaning
@given(st.integers(min_value=0, max_value=10**12), st.sampled_from((",", " ", "'", "_")),
       st.sampled_from(("", " blocks", " bytes per token")))  # fmt: skip
def test_digits_grouped_in_threes_mean_the_number_with_or_without_a_unit(n, separator, unit):
    written = f"{n:,}".replace(",", separator) + unit
    assert _verdict(written, n, None).endswith(RIGHT)
    assert _verdict(written, n + 1, None).endswith(WRONG)
    assert not _verdict(f"{n}.5{unit}", n, None).endswith(RIGHT)
