"""Every case of the shared table (tests/prediction_cases.json) is read as it says, in Python.

The same table holds the web page's reader to the same cases (tests/browser/test_guesses.py), so
a typed guess gets one verdict in a notebook and in the page.
"""

import json
from pathlib import Path

import pytest

from mha.gqa import block_lists_match
from mha.predictions import Unreadable, read

TABLE = Path(__file__).with_name("prediction_cases.json")
CASES = json.loads(TABLE.read_text(encoding="utf-8"))["cases"]
READERS = {"block_lists": block_lists_match}


def as_tuples(value):
    """A JSON answer as the reveal passes it: lists are the tuples the chapters compute."""
    if isinstance(value, list):
        return tuple(as_tuples(item) for item in value)
    return value


def reading(case):
    """How Python reads ``case``'s prediction: "right", "wrong" or "unreadable"."""
    answer = as_tuples(case["answer"])
    choices = case.get("choices")
    reader = READERS.get(case.get("reader"))
    try:
        right = (
            reader(case["prediction"], answer)
            if reader
            else read(
                case["prediction"],
                answer,
                as_tuples(choices) if isinstance(choices, list) else choices,
            )
        )
    except Unreadable:
        return "unreadable"
    return "right" if right else "wrong"


def test_the_table_covers_every_outcome_of_every_kind():
    kinds = {(type(c["answer"]).__name__, "choices" in c, c["read"]) for c in CASES}
    for kind in ("int", "list"):
        assert {(kind, False, r) for r in ("right", "wrong", "unreadable")} <= kinds
    assert {("str", True, r) for r in ("right", "wrong", "unreadable")} <= kinds


@pytest.mark.parametrize("case", CASES, ids=[f"{c['prediction']!r}->{c['read']}" for c in CASES])
def test_python_reads_each_case_as_the_table_says(case):
    assert reading(case) == case["read"]
