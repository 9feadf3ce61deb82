"""An exercise offers its check, hints and solution (mha.exercise); every exercise of the book shows
a solution that fits the column on a desktop."""

import html
import importlib
import json
import pkgutil
import re

import pytest

import mha
import mha.checks
from conftest import CHAPTERS
from mha.checks import CheckResult
from mha.exercise import Exercise, Note, highlighted_python

#: The book's column shows about 80 characters of code (tests/test_notebooks.py's MAX_LINE).
MAX_LINE = 79


def test_an_exercise_offers_check_hints_and_a_solution_as_text_or_a_class_source():
    exercise = Exercise(lambda a: CheckResult(a == 42, "42?"), ("Think.", "Larger."), "answer = 42")
    assert exercise.check(42).passed and not exercise.check(41).passed
    assert "Hint 2 of 2" in str(exercise.hint(2)) and "Larger." in str(exercise.hint(2))
    for wrong in (5, "1", 1.0, True, None):
        assert "hint(1) to hint(2)" in str(exercise.hint(wrong)) and repr(wrong) in str(
            exercise.hint(wrong)
        )
    assert '<span class="mi">42</span></pre></div>' in exercise.solution()._repr_html_()

    class Answer:
        def forward(self, x):
            return x

    shown = Exercise(exercise.checker, ("one",), Answer)
    assert shown.solution_text.startswith("class Answer:") and "return x" in str(shown.solution())


@pytest.mark.parametrize(
    "code, spans",
    [
        ('class A(B):\n    def f(self, x):  # <why>\n        return len(x) > 1.5 and "s"\n',
         [("k", "class"), ("nc", "A"), ("nf", "f"), ("bp", "self"), ("nb", "len"),
          ("c1", "# &lt;why&gt;"), ("mf", "1.5"), ("ow", "and"), ("s2", '"s"')]),
        ("x = (1 <", []),  # code that does not parse keeps its text in the same block
    ],
)  # fmt: skip
def test_a_solution_is_highlighted_as_pygments_classes_and_keeps_its_text_exactly(code, spans):
    shown = highlighted_python(code)
    assert shown.startswith('<div class="highlight"><pre>') and shown.endswith("</pre></div>")
    assert all(f'<span class="{css}">{token}</span>' in shown for css, token in spans)
    assert html.unescape(re.sub(r"<[^>]+>", "", shown)) == code


def test_a_hint_reads_as_plain_text_folded_at_79():
    shown = str(Note("Hint", "word " * 60 + "\nsecond paragraph"))
    assert max(map(len, shown.splitlines())) <= 79 and shown.endswith("second paragraph")


def all_exercises():
    """Every exercise in the package's modules and in ``mha.checks``."""
    found = {}
    modules = [*pkgutil.iter_modules(mha.__path__, "mha."),
               *pkgutil.iter_modules(mha.checks.__path__, "mha.checks.")]  # fmt: skip
    for info in modules:
        if info.ispkg:
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, Exercise):
                found[f"{info.name}.{name}"] = value
    return found


EXERCISES = all_exercises()


def test_every_chapter_module_with_practice_is_found():
    """Ten exercises, each in its chapter's ``mha.<topic>_exercise`` and none in ``mha.checks``,
    which holds what judges them."""
    assert len(EXERCISES) == 10, sorted(EXERCISES)
    assert all(name.rsplit(".", 2)[-2].endswith("_exercise") for name in EXERCISES), EXERCISES


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_help_on_a_check_shows_its_own_name_and_docstring(name):
    """The reader's ``help(check_…)`` or ``check_…?``: not ``guarded``, not partial's docstring."""
    check = EXERCISES[name].checker
    module = importlib.import_module(name.rsplit(".", 1)[0])
    assert getattr(module, check.__name__, None) is check, check.__name__
    assert check.__doc__ and "partial" not in check.__doc__, check.__doc__


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_solution_code_fits_the_column(name):
    solution = EXERCISES[name].solution()
    long = [line for line in solution.text.splitlines() if len(line) > MAX_LINE]
    assert not long, f"{name}'s solution has lines over {MAX_LINE} characters: {long}"


@pytest.mark.parametrize("path", sorted(CHAPTERS.glob("[0-9]*.ipynb")), ids=lambda p: p.stem)
def test_every_solution_cell_shows_the_exercises_one_copy(path):
    """A solution typed into a cell would be a second copy that can drift from the tested one."""
    cells = json.loads(path.read_text())["cells"]
    solutions = [c for c in cells if "solution" in c["metadata"].get("tags", [])]
    assert solutions, f"{path.name} has no solution cell"
    for cell in solutions:
        code = "".join(cell["source"]).splitlines()[1:]  # after the first line, a comment
        first, *rest = code
        assert re.fullmatch(r"\w+\.solution\(\)|display\(\w+\.solution\(\)\)", first), code
        # Optionally, the book's own code to compare, read from the package (inspect), not typed.
        listing = next(
            (i for i, line in enumerate(rest) if line.startswith("# Then the book")), None
        )
        if listing is not None:
            shown = "\n".join(rest[listing:])
            assert "inspect.getsource(" in shown and "def " not in shown, shown
            rest = rest[:listing]
        # Optionally, what a passed check looks like: the check run on that same one copy.
        for line in rest:
            assert line.startswith("#") or re.fullmatch(r"check_\w+\(\w+\.solution_code\)", line)


def test_chapter_6s_hints_lead_to_the_solution_without_its_code():
    from mha.gqa_exercise import gqa_forward

    hints = [gqa_forward.hint(n).text for n in (1, 2, 3)]
    assert "num_kv_groups" in hints[0] and not any("repeat_interleave" in h for h in hints)
