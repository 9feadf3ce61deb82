"""Chapters for the reader who is not in a clone: on the web, in Colab or Kaggle, or downloaded.

- Each chapter's first code cell installs ``mha`` where it is missing (from the book's repository,
  or from ``$MHA_PACKAGE``) and does nothing, printing nothing, where it is importable.
  ``make standalone-check`` (``.ci/standalone_check.py``) runs a chapter alone in a fresh
  environment to prove it; these are the cheap rules it relies on.
- Every prediction and every exercise says how to do it from the web page: launch the chapter in
  Binder or Colab, or download it.
- No prose speaks only to notebook users.

The rules are generic: they hold every chapters/[0-9]*.ipynb, whatever its number.
"""

import importlib.util
import json
import re
import subprocess
import sys

import pytest
import yaml

from conftest import CHAPTERS, ROOT, load_normaliser

NOTEBOOKS = sorted(CHAPTERS.glob("[0-9]*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())

#: tag -> the markdown cell ``make execute`` puts right before the chapter's first cell so tagged
#: (a ``prediction_x = None`` cell, a practice's first code cell), and before every later one
#: (at most 25 words): AUTHORING.md, "What `make execute` does".
ROUTES = load_normaliser().ROUTES
SHORT_ROUTES = load_normaliser().SHORT_ROUTES
#: The most words a route paragraph after the first of its kind may have (issue 46: the full one,
#: about 70 words, stood before every prediction).
SHORT_ROUTE_WORDS = 25
#: Prose that only makes sense inside a running notebook (issue 19's examples, and their kin).
NOTEBOOK_ONLY_PROSE = (
    r"run\s+the\s+collapsed\s+cell",
    r"open\s+its\s+output",
    r"in\s+the\s+cell\s+below\s+and\s+run\s+it",
    r"Replace\s+`None`\s+with",
    r"numbers\s+are\s+yours",
    r"\bexpand\s+it\b",
    r"in\s+the\s+first\s+code\s+cell",  # the first code cell installs mha
)
PRACTICE_HEADING = re.compile(r"^#{2,3} Practice\b.*", re.M)
HEADING = re.compile(r"^#{1,3} .*", re.M)
HIDDEN = {"reveal", "solution", "hint"}


def source(cell):
    return "".join(cell["source"])


def load(path):
    return json.loads(path.read_text())


@pytest.fixture(params=NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def notebook(request):
    return request.param, load(request.param)


def install_cell(nb):
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


def setting(cell, name):
    found = re.search(rf'^{name} = "([^"]*)"', source(cell), re.M)
    return found and found.group(1)


# The install cell


def test_the_first_code_cell_installs_mha_only_where_it_is_missing(notebook):
    path, nb = notebook
    cell = install_cell(nb)
    text = source(cell)
    where = f"{path.name}: the first code cell"
    assert 'if importlib.util.find_spec("mha") is None:' in text, (
        f"{where} does not install mha where it is missing (README: A chapter on its own)"
    )
    assert 'os.environ.get("MHA_PACKAGE", package)' in text, f"{where} ignores $MHA_PACKAGE"
    # Colab's and Kaggle's own PyTorch stays: the pins would download gigabytes of CUDA torch.
    assert '"pip", "install", "--quiet", "--no-deps"' in text, where
    compile(text, path.name, "exec")  # plain Python: any tool that reads the chapter can parse it
    assert cell["outputs"] == [], f"{where} printed something where mha is importable"
    # Collapsed behind a one-line summary in the book (hide-input) is fine: the cell still runs
    # and shows its code when opened. Any other tag would hide or skip it.
    tags = set(cell["metadata"].get("tags", [])) - {"hide-input"}
    assert not tags, f"{where} is hidden or skipped by a tag: {sorted(tags)}"
    assert len(text.splitlines()) <= 16, f"{where} is no longer one short, readable cell"


def test_the_install_cell_installs_from_the_books_repository_and_branch(notebook):
    path, nb = notebook
    cell = install_cell(nb)
    assert setting(cell, "BOOK_REPOSITORY") == CONFIG["repository"]["url"].rstrip("/"), (
        f"{path.name}: after changing repository.url, run .ci/point_install_cells.py URL main"
    )
    assert setting(cell, "BOOK_VERSION") == CONFIG["repository"]["branch"]


def test_every_chapter_has_the_same_install_cell():
    """The behaviour tests below run the first chapter's cell: it speaks for every chapter."""
    cells = {p.name: source(install_cell(load(p))) for p in NOTEBOOKS}
    assert len(set(cells.values())) == 1, sorted(cells)


def test_no_other_cell_installs_anything(notebook):
    path, nb = notebook
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"][1:]
    assert not [source(c)[:60] for c in cells if re.search(r"pip\s+install", source(c))], path.name


def run_install_cell(monkeypatch, mha_importable, package=None):
    """Run the first chapter's install cell; return the commands it ran (none really run)."""
    commands = []
    monkeypatch.setattr(subprocess, "run", lambda command, **kw: commands.append((command, kw)))
    if package is None:
        monkeypatch.delenv("MHA_PACKAGE", raising=False)
    else:
        monkeypatch.setenv("MHA_PACKAGE", package)
    if not mha_importable:
        real = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda name, *a: None if name == "mha" else real(name, *a)
        )
    exec(source(install_cell(load(NOTEBOOKS[0]))), {})  # the chapter's own cell
    return commands


def test_the_install_cell_does_nothing_where_mha_is_importable(monkeypatch):
    assert run_install_cell(monkeypatch, mha_importable=True) == []


def test_the_install_cell_installs_the_books_archive_without_dependencies(monkeypatch):
    ((command, options),) = run_install_cell(monkeypatch, mha_importable=False)
    url, branch = CONFIG["repository"]["url"].rstrip("/"), CONFIG["repository"]["branch"]
    package = f"{url}/archive/{branch}.zip"
    assert command == [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", package]
    assert options == {"check": True}  # a failed install stops the chapter there


def test_the_install_cell_installs_what_mha_package_names(monkeypatch, tmp_path):
    wheel = str(tmp_path / "mha-1.0.0-py3-none-any.whl")
    ((command, _),) = run_install_cell(monkeypatch, mha_importable=False, package=wheel)
    assert command[-1] == wheel


def test_point_install_cells_changes_two_lines_and_nothing_else(tmp_path):
    chapter = tmp_path / NOTEBOOKS[0].name
    chapter.write_text(NOTEBOOKS[0].read_text())
    commit = "0123456789abcdef0123456789abcdef01234567"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / ".ci" / "point_install_cells.py"),
            "https://github.com/someone/fork",
            commit,
            str(chapter),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    before, after = load(NOTEBOOKS[0]), load(chapter)
    cell = install_cell(after)
    assert setting(cell, "BOOK_REPOSITORY") == "https://github.com/someone/fork"
    assert setting(cell, "BOOK_VERSION") == commit
    install_cell(before)["source"] = cell["source"]
    assert before == after


def test_point_install_cells_fails_on_a_chapter_without_an_install_cell(tmp_path):
    chapter = tmp_path / "99_fake.ipynb"
    chapter.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4}))
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / ".ci" / "point_install_cells.py"),
            "https://github.com/someone/fork",
            "main",
            str(chapter),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "BOOK_REPOSITORY" in result.stderr


# The web route to every prediction and exercise


def test_every_prediction_and_exercise_says_how_to_do_it_from_the_web(notebook):
    """Each cell ``make execute`` tagged ``prediction`` or ``practice`` has its route paragraph
    right before it: in full before the chapter's first of its kind, in short before the others
    (and tests/test_notebooks.py holds every chapter to what ``make execute`` leaves, so every
    prediction and practice is tagged)."""
    path, nb = notebook
    cells, seen = nb["cells"], set()
    for i, cell in enumerate(cells):
        for kind in set(cell["metadata"].get("tags", [])) & set(ROUTES):
            route = SHORT_ROUTES[kind] if kind in seen else ROUTES[kind]
            seen.add(kind)
            before = cells[i - 1] if i else {"cell_type": None}
            assert before["cell_type"] == "markdown" and source(before) == route, (
                f"{path.name}: the {kind} {source(cell)[:50]!r} has no web route right before "
                f"it: run make execute CHAPTER=chapters/{path.name}"
            )


def test_a_route_after_the_first_is_short_and_the_first_names_the_pages_run_button():
    """The full route is read once a chapter; the others take at most 25 words. A route that
    sends the reader to a running chapter says the page's own "Run this page" is one."""
    for kind in ROUTES:
        assert len(SHORT_ROUTES[kind].split()) <= SHORT_ROUTE_WORDS, SHORT_ROUTES[kind]
        assert len(ROUTES[kind].split()) > SHORT_ROUTE_WORDS, f"the full {kind} route is short"
        assert '"Run this page"' in ROUTES[kind], f"the {kind} route does not name the Run button"


def test_every_practice_heading_has_its_exercise(notebook):
    """The first code cell after a "## Practice" heading is the exercise, tagged ``practice``."""
    path, nb = notebook
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown" or not PRACTICE_HEADING.search(source(cell)):
            continue
        first_code = next((c for c in cells[i + 1 :] if c["cell_type"] == "code"), None)
        assert first_code and "practice" in first_code["metadata"].get("tags", []), (
            f"{path.name}: {source(cell)[:50]!r} has no exercise tagged practice after it"
        )


def test_every_exercise_sits_under_a_practice_heading(notebook):
    """A hint or a solution belongs to an exercise, and the exercise to a "## Practice" section,
    where the route text is."""
    path, nb = notebook
    heading = None
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            headings = HEADING.findall(source(cell))
            heading = headings[-1] if headings else heading
        elif set(cell["metadata"].get("tags", [])) & {"hint", "solution"}:
            assert heading and PRACTICE_HEADING.match(heading), (
                f"{path.name}: {source(cell)[:50]!r} is an exercise's, under {heading!r}, "
                "not under a '## Practice' heading"
            )


def test_no_prose_speaks_only_to_notebook_users(notebook):
    path, nb = notebook
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            found = [p for p in NOTEBOOK_ONLY_PROSE if re.search(p, source(cell))]
            assert not found, f"{path.name}: {source(cell)[:60]!r} says {found}"


# Each rule can fail


def markdown(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text, tags=()):
    metadata = {"tags": list(tags)} if tags else {}
    return {"cell_type": "code", "metadata": metadata, "source": text, "outputs": []}


FAKE = ROOT / "chapters" / "99_fake.ipynb"


@pytest.mark.parametrize(
    "rule, cells, message",
    [
        (
            test_every_prediction_and_exercise_says_how_to_do_it_from_the_web,
            [markdown("## Predict: x?"), code("prediction_x = None", tags=["prediction"])],
            "no web route",
        ),
        (
            test_every_prediction_and_exercise_says_how_to_do_it_from_the_web,
            [
                markdown("## Practice: y\n\nWrite it."),
                markdown(ROUTES["prediction"]),
                code("class My(Skeleton): ...", tags=["practice"]),
            ],
            "no web route",
        ),
        (
            test_every_prediction_and_exercise_says_how_to_do_it_from_the_web,
            [
                markdown(ROUTES["prediction"]),
                code("prediction_x = None", tags=["prediction"]),
                markdown(ROUTES["prediction"]),  # the full route again: the short one is due
                code("prediction_y = None", tags=["prediction"]),
            ],
            "no web route",
        ),
        (
            test_every_practice_heading_has_its_exercise,
            [markdown("## Practice: y\n\nWrite it."), markdown("## Key takeaways")],
            "no exercise tagged practice",
        ),
        (
            test_every_exercise_sits_under_a_practice_heading,
            [markdown("## Mistakes gallery"), code("practice.hint(1)", tags=["hint"])],
            "not under a '## Practice' heading",
        ),
        (
            test_no_prose_speaks_only_to_notebook_users,
            [markdown("Each cell below shows one hint (open its output).")],
            "open",
        ),
        (
            test_the_first_code_cell_installs_mha_only_where_it_is_missing,
            [markdown("# 9. Fake"), code("import torch\nfrom mha import reveal")],
            "does not install mha",
        ),
    ],
    ids=[
        "prediction",
        "exercise",
        "the full route twice",
        "practice without exercise",
        "practice heading",
        "notebook-only prose",
        "install cell",
    ],
)
def test_each_rule_fails_on_a_chapter_that_breaks_it(rule, cells, message):
    with pytest.raises(AssertionError, match=re.escape(message)):
        rule((FAKE, {"cells": cells}))


def test_the_route_rules_pass_on_a_chapter_that_keeps_them():
    cells = [
        markdown("## Predict: x?"),
        markdown(ROUTES["prediction"]),
        code("prediction_x = None", tags=["prediction"]),
        markdown("## Practice: y"),
        markdown(ROUTES["practice"]),
        code("class My(Skeleton): ...", tags=["practice"]),
        code("practice.hint(1)", tags=["hint"]),
    ]
    for rule in (
        test_every_prediction_and_exercise_says_how_to_do_it_from_the_web,
        test_every_practice_heading_has_its_exercise,
        test_every_exercise_sits_under_a_practice_heading,
        test_no_prose_speaks_only_to_notebook_users,
    ):
        rule((FAKE, {"cells": cells}))
