"""The checks' size budgets (AUTHORING.md, "Budgets"): small modules, one short table an
exercise, and a package that grows only by the mistakes it names.

The package's budget is per name: ``MACHINERY`` lines for everything that is not a message, plus
at most ``PER_NAME`` lines a named mistake. A learner probe that finds a mistake then always has
room for its entry, and the machinery cannot grow unnoticed: a new helper that names nothing must
find its lines in the machinery it replaces.
"""

import dataclasses
import importlib
import pkgutil
import re
import types
from pathlib import Path

import mha.checks
from mha.checks.core import Mistake

TESTS = Path(__file__).parent
CHECKS = Path(mha.checks.__file__).parent
MACHINERY, PER_NAME = 1700, 3  # 2,575 lines, 303 names: 1,666 + 3 × 303, and 34 lines for fixes


def lines(path):
    return len(path.read_text().splitlines())


def messages(value, found, seen):
    """Add to ``found`` the message of every catalogue entry in ``value``: a :class:`Mistake`
    (a ``Buggy`` too) or a ``(detect or changes, message)`` pair, in tuples, lists, dicts and
    dataclasses (a ``Practice``, a ``Catalogue``), at any depth."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, Mistake):
        found.add(value.message)
    elif isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[1], str):
        found.add(value[1]) if not isinstance(value[0], str) else None
    elif isinstance(value, (tuple, list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            messages(item, found, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            messages(getattr(value, field.name), found, seen)


def named(*modules):
    """The named mistakes of ``modules``: their entries' distinct messages, a number in a message
    counted as any other (``HARD`` for 1 to 12 heads is one name)."""
    found = set()
    for module in modules:
        for value in vars(module).values():
            messages(value, found, set())
    # a message that only passes on another's words ("{after}") names nothing itself
    return {re.sub(r"\d+", "#", m) for m in found if not re.fullmatch(r"\{\w+\}", m)}


def test_the_count_of_names_finds_entries_at_any_depth_and_each_message_once():
    fake = types.SimpleNamespace(
        TABLE=(Mistake("a", "Told once.", bool), [({"scale": 2}, "Scaled by 2.")]),
        AGAIN={"same": ({"scale": 3}, "Scaled by 3.")},  # one name: only its number differs
        PASSED_ON=(Mistake("gradient", "{after}", bool),),  # another's words: no name
        WORDS=("not", "an entry"),  # a pair of strings is text, not an entry
    )
    assert named(fake) == {"Told once.", "Scaled by #."}


def test_the_check_package_grows_only_by_the_mistakes_it_names():
    modules = [importlib.import_module(f"mha.checks.{m.name}") for m in pkgutil.iter_modules(
        mha.checks.__path__)]  # fmt: skip
    total, names = sum(lines(p) for p in CHECKS.glob("*.py")), len(named(*modules))
    budget = MACHINERY + PER_NAME * names
    assert total <= budget, f"checks/ has {total} lines for {names} named mistakes: {budget}"


def test_no_check_module_but_the_core_is_over_150_lines():
    long = {p.name: lines(p) for p in CHECKS.glob("*.py") if lines(p) > 150}
    assert set(long) <= {"core.py"}, long


def test_each_exercise_has_one_table_of_at_most_150_lines_and_all_check_tests_fit_in_2500():
    tests = [p for p in TESTS.glob("*") if re.search("check|prediction", p.name)]
    tests = [p for p in tests if p.name != "test_checks_runner.py"]  # the runner's, not a check's
    tables = {p.name: lines(p) for p in tests if p.name.startswith("test_check_")}
    shared = {"test_check_dropout.py"}  # dropout read alike in five chapters: not one exercise's
    assert all(n <= 150 for name, n in tables.items() if name not in shared), tables
    assert sum(map(lines, tests)) <= 2500
