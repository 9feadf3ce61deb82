"""Every exercise of the book shows a solution that fits the column on a desktop."""

import importlib
import pkgutil

import pytest

import mha.checks
from mha.checks import Exercise

#: The book's column shows about 80 characters of code (tests/test_notebooks.py's MAX_LINE).
MAX_LINE = 79


def all_exercises():
    found = {}
    for info in pkgutil.iter_modules(mha.checks.__path__, "mha.checks."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, Exercise):
                found[f"{info.name}.{name}"] = value
    return found


EXERCISES = all_exercises()


def test_every_chapter_module_with_practice_is_found():
    assert len(EXERCISES) >= 6, sorted(EXERCISES)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_solution_code_fits_the_column(name):
    solution = EXERCISES[name].solution()
    long = [line for line in solution.text.splitlines() if len(line) > MAX_LINE]
    assert not long, f"{name}'s solution has lines over {MAX_LINE} characters: {long}"
