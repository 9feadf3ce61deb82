"""The project caps every module of the chapters' package at 600 lines.

A longer module is split by what its parts are for (as the grouped-query
check is into ``mha.checks.gqa`` and ``mha.checks.gqa_trial``), so that a
reader who follows a chapter's import into the package finds one idea per
file.
"""

from conftest import CHAPTERS

MAX_LINES = 600
PACKAGE = CHAPTERS / "mha"


def test_the_package_has_modules_to_measure():
    """A wrong path would make the size test below pass on nothing."""
    assert (PACKAGE / "checks" / "gqa.py").is_file()


def test_no_module_of_the_package_is_longer_than_600_lines():
    too_long = {
        str(path.relative_to(CHAPTERS)): count
        for path in sorted(PACKAGE.rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not too_long, "modules longer than {} lines (split them): {}".format(
        MAX_LINES, ", ".join(f"{name} has {count}" for name, count in too_long.items())
    )
