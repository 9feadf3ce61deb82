"""Hygiene of the committed chapters.

What strict nbval and the HTML build rely on but cannot see.
"""

import ast
import builtins
import copy
import json
import re
import subprocess
import sys
import textwrap

import nbformat
import pytest
import yaml

from conftest import CHAPTERS, ROOT, load_normaliser

NOTEBOOKS = sorted(CHAPTERS.glob("[0-9]*.ipynb"))
HIDDEN_KINDS = {"reveal": "Reveal the answer", "solution": "Show the solution"}
# JupyterLab shows a collapsed cell's first line: it should say what the cell is, not give code
# away.
# The book shows it too, atop the code: it speaks to both readers (no "run this cell").
FIRST_LINES = {
    "reveal": "# The answer: this cell computes it.",
    "solution": "# The solution: one way to do it.",
}
#: Code lines and printed lines fit a desktop column (about 80 characters) without being cut off.
MAX_LINE = 79
#: Words for notebook users only; the book's readers cannot follow them.
NOTEBOOK_ONLY = ("none recorded", "click its •••", "re-run", "run this cell")


def load(path):
    return json.loads(path.read_text())


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def source(cell):
    return "".join(cell["source"])


@pytest.fixture(params=NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def notebook(request):
    return request.param, load(request.param)


def test_there_are_chapters_and_the_table_of_contents_lists_each_one():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = {e["file"] for e in toc["chapters"] if e["file"].startswith("chapters/")}
    assert NOTEBOOKS
    assert listed == {f"chapters/{p.stem}" for p in NOTEBOOKS}


def test_every_code_cell_was_executed_top_to_bottom_in_one_kernel(notebook):
    path, nb = notebook
    counts = [c["execution_count"] for c in code_cells(nb) if source(c).strip()]
    assert None not in counts, (
        f"{path.name} has unexecuted code cells: strict nbval would compare nothing"
    )
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name} was not run top to bottom once: {counts}"
    )


def test_no_cell_shows_an_error_or_a_warning(notebook):
    path, nb = notebook
    for cell in code_cells(nb):
        for out in cell["outputs"]:
            assert out["output_type"] != "error", f"{path.name}: {source(cell)[:60]!r} raised"
            assert out.get("name") != "stderr", (
                f"{path.name}: {source(cell)[:60]!r} wrote to stderr"
            )


def test_metadata_is_normalised(notebook):
    path, nb = notebook
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        assert "execution" not in cell.get("metadata", {}), (
            f"{path.name} keeps timing metadata; run make execute"
        )


def test_reveals_and_solutions_are_hidden_in_html_and_collapsed_in_jupyterlab(notebook):
    path, nb = notebook
    for cell in code_cells(nb):
        tags = cell["metadata"].get("tags", [])
        calls_reveal = re.search(r"^\s*reveal\(", source(cell), re.M)
        kinds = [k for k in HIDDEN_KINDS if k in tags]
        if calls_reveal:
            assert "reveal" in tags, f"{path.name}: a cell calls reveal() without the 'reveal' tag"
        for kind in kinds:
            where = f"{path.name}: {kind} cell {source(cell)[:50]!r}"
            assert "hide-cell" in tags, (
                f"{where} is not hidden in the HTML book (needs the hide-cell tag)"
            )
            assert cell["metadata"].get("jupyter") == {
                "source_hidden": True,
                "outputs_hidden": True,
            }, (
                f"{where} is not collapsed in JupyterLab "
                "(needs jupyter.source_hidden/outputs_hidden)"
            )
            assert cell["metadata"]["mystnb"]["code_prompt_show"] == HIDDEN_KINDS[kind]
            assert source(cell).startswith(FIRST_LINES[kind] + "\n"), (
                f"{where} does not start with {FIRST_LINES[kind]!r}"
            )
            assert cell["outputs"], f"{where} has no computed answer"
            if kind == "reveal":
                html = "".join(
                    "".join(o.get("data", {}).get("text/html", "")) for o in cell["outputs"]
                )
                assert 'class="mha-box mha-reveal"' in html, (
                    f"{where} shows no answer box: call reveal()"
                )


def test_hints_show_their_call_and_hide_the_hint_behind_one_toggle(notebook):
    path, nb = notebook
    for cell in code_cells(nb):
        if "hint" not in cell["metadata"].get("tags", []):
            assert not re.fullmatch(r"\s*[\w.]+\.hint\(\s*\d*\s*\)\s*", source(cell)), (
                f"{path.name}: {source(cell)!r} is a hint without the 'hint' tag; run make execute"
            )
            continue
        where = f"{path.name}: hint cell {source(cell)[:40]!r}"
        assert "hide-output" in cell["metadata"]["tags"], f"{where} shows its hint without a toggle"
        assert cell["metadata"].get("jupyter") == {"outputs_hidden": True}, (
            f"{where} is not collapsed"
        )
        assert cell["metadata"]["mystnb"]["code_prompt_show"].startswith("Show "), where
        html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in cell["outputs"])
        assert 'class="mha-box mha-hint"' in html, f"{where} shows no hint box from mha.checks"


def test_a_mistakes_gallery_keeps_each_feedback_collapsed_until_the_reader_opens_it(notebook):
    """A gallery asks readers to spot each mistake first: its feedback is hidden on the web
    (hide-output) and in JupyterLab (outputs_hidden), and only its feedback is."""
    path, nb = notebook
    in_gallery = False
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown" and re.search(r"^## ", source(cell), re.M):
            in_gallery = bool(re.search(r"^## Mistakes gallery", source(cell), re.M))
        tags = cell["metadata"].get("tags", [])
        calls_check = cell["cell_type"] == "code" and re.search(r"^check_\w+\(", source(cell), re.M)
        if in_gallery and calls_check:
            assert "feedback" in tags, f"{path.name}: gallery cell {source(cell)[:50]!r} untagged"
        if "feedback" in tags:
            where = f"{path.name}: feedback cell {source(cell)[:50]!r}"
            assert "hide-output" in tags and "hide-cell" not in tags, f"{where} is not collapsed"
            assert cell["metadata"].get("jupyter") == {"outputs_hidden": True}, where
            assert cell["metadata"]["mystnb"]["code_prompt_show"] == "Show the check's feedback"
            html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in cell["outputs"])
            assert 'class="mha-box mha-failed"' in html, f"{where} shows no feedback box"


def test_hints_come_from_mha_checks_not_from_markdown(notebook):
    """One presentation and one source for hints.

    Hints are an exercise's hint(n), never a <details> in prose.
    """
    path, nb = notebook
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            assert "<details" not in source(cell), (
                f"{path.name}: a markdown <details> ({source(cell)[:60]!r}); "
                "show hints with exercise.hint(n)"
            )


def printed_lines(cell):
    """The lines a reader sees as text: printed output, and plain results with no richer form."""
    for out in cell["outputs"]:
        if out["output_type"] == "stream":
            yield from "".join(out["text"]).splitlines()
        elif out["output_type"] in ("execute_result", "display_data"):
            data = out.get("data", {})
            if not any(mime.startswith("image/") or mime == "text/html" for mime in data):
                yield from "".join(data.get("text/plain", "")).splitlines()


def test_no_code_line_or_printed_line_is_longer_than_a_desktop_column(notebook):
    """The book's column shows about 80 characters.

    Beyond that, a line is cut off or scrolls away.
    """
    path, nb = notebook
    long = []
    for cell in code_cells(nb):
        first = source(cell).splitlines()[0] if source(cell).strip() else ""
        for line in source(cell).splitlines():
            if len(line) > MAX_LINE:
                long.append(f"code ({len(line)}) in {first[:40]!r}: {line[:60]}…")
        for line in printed_lines(cell):
            if len(line) > MAX_LINE:
                long.append(f"output ({len(line)}) of {first[:40]!r}: {line[:60]}…")
    assert not long, f"{path.name} has lines over {MAX_LINE} characters:\n" + "\n".join(long)


def test_no_output_speaks_only_to_notebook_users(notebook):
    """The book shows every output: none may tell the reader to run a cell or set a variable."""
    path, nb = notebook
    for cell in code_cells(nb):
        text = json.dumps(cell["outputs"], ensure_ascii=False)
        found = [words for words in NOTEBOOK_ONLY if words in text]
        assert not found, f"{path.name}: {source(cell)[:50]!r} prints {found}"


def fake_notebook(code, printed):
    cell = {
        "cell_type": "code",
        "source": [code],
        "metadata": {},
        "execution_count": 1,
        "outputs": [{"output_type": "stream", "name": "stdout", "text": [printed]}],
    }
    return ROOT / "fake.ipynb", {"cells": [cell]}


@pytest.mark.parametrize(
    "code, printed",
    [("x = 1  # " + "y" * 71, "ok\n"), ("x = 1", "z" * 80 + "\n")],
    ids=["code line", "printed line"],
)
def test_the_line_check_fails_on_one_line_of_80_characters(code, printed):
    test_no_code_line_or_printed_line_is_longer_than_a_desktop_column(
        fake_notebook("x = 1  # " + "y" * 70, "ok")
    )
    with pytest.raises(AssertionError, match="over 79 characters"):
        test_no_code_line_or_printed_line_is_longer_than_a_desktop_column(
            fake_notebook(code, printed)
        )


def test_the_audience_check_fails_on_the_old_reveal_text():
    old = "Your prediction: none recorded (set the prediction variable above and re-run).\n"
    with pytest.raises(AssertionError, match="none recorded"):
        test_no_output_speaks_only_to_notebook_users(fake_notebook("reveal(1)", old))


def first_change_normalising_makes(nb):
    """None, or where ``make execute``'s normaliser would change ``nb``: every convention it
    applies (tags, first lines, toggles, route paragraphs) is then in place."""
    once = load_normaliser().normalise(copy.deepcopy(nb))
    if once.metadata != nb.metadata:
        return "the notebook's metadata"
    before = [(c.get("id"), c) for c in nb.cells]
    after = [(c.get("id"), c) for c in once.cells]
    for (id_before, cell), (id_after, normalised) in zip(before, after):
        if cell != normalised:
            return f"cell {id_before!r}" if id_before == id_after else f"a new cell {id_after!r}"
    return None if len(before) == len(after) else "the cells at the end"


def test_every_chapter_is_as_make_execute_leaves_it(notebook):
    path, _ = notebook
    change = first_change_normalising_makes(nbformat.read(path, as_version=4))
    assert change is None, (
        f"{path.name}: make execute would change {change}: "
        f"run make execute CHAPTER=chapters/{path.name}"
    )


def test_the_normalised_check_fails_on_a_prediction_without_its_route():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("## Predict: x?"),
            nbformat.v4.new_code_cell("prediction_x = None"),
        ]
    )
    assert first_change_normalising_makes(nb) is not None


def test_make_execute_routes_each_prediction_and_practice_and_keeps_the_routes_current():
    """The route paragraph goes right before the cell, with an id made from the cell's; a second
    run changes nothing; a route whose cell has gone goes too, and a stale text is replaced."""
    normaliser = load_normaliser()
    routes = normaliser.ROUTES
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("## Predict: x?"),
            nbformat.v4.new_code_cell("prediction_x = None  # an integer", id="guess"),
            nbformat.v4.new_code_cell("reveal(1, prediction_x)", metadata={"tags": ["reveal"]}),
            nbformat.v4.new_markdown_cell("## Practice: y\n\nWrite it."),
            nbformat.v4.new_markdown_cell("Stale words.", id="route-gone"),
            nbformat.v4.new_code_cell("class My(Start): ...", id="try"),
            nbformat.v4.new_code_cell("check(My)"),
            nbformat.v4.new_code_cell("practice.hint(1)"),
            nbformat.v4.new_markdown_cell("## Predict: z?"),
            nbformat.v4.new_code_cell("prediction_z = None  # an integer", id="again"),
        ]
    )
    once = normaliser.normalise(nb)
    ids = [c.get("id") for c in once.cells]
    assert ids[1:3] == ["route-guess", "guess"] and "route-gone" not in ids
    assert once.cells[1].source == routes["prediction"]
    assert once.cells[2].metadata.tags == ["prediction"]
    assert "prediction" not in once.cells[3].metadata.tags  # the reveal, hidden
    assert ids[5:7] == ["route-try", "try"] and once.cells[5].source == routes["practice"]
    assert once.cells[6].metadata.tags == ["practice"]
    assert "tags" not in once.cells[7].metadata  # the check: not the practice's first cell
    # The chapter's second prediction: the short route (the full one was said once)
    assert ids[10:12] == ["route-again", "again"]
    assert once.cells[10].source == normaliser.SHORT_ROUTES["prediction"]
    assert normaliser.normalise(copy.deepcopy(once)) == once
    once.cells[2].source = "answer = 1"  # no longer a prediction: its tag and route go
    twice = normaliser.normalise(copy.deepcopy(once))
    assert "route-guess" not in [c.get("id") for c in twice.cells]
    assert "tags" not in twice.cells[1].metadata


def test_a_route_paragraph_an_author_pasted_is_not_doubled():
    """Chapter 8 was written with its route paragraphs pasted in as ordinary cells: the
    normaliser keeps one, its own, before each prediction."""
    normaliser = load_normaliser()
    route = normaliser.ROUTES["prediction"]
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("## Predict: x?"),
            nbformat.v4.new_markdown_cell(route, id="pasted"),
            nbformat.v4.new_code_cell("prediction_x = None  # an integer", id="guess"),
        ]
    )
    cells = normaliser.normalise(nb).cells
    assert [c.source for c in cells].count(route) == 1
    assert [c.get("id") for c in cells] == [cells[0].get("id"), "route-guess", "guess"]


def test_make_execute_gives_a_tagged_cell_the_current_convention_and_a_second_run_changes_nothing():
    normalise = load_normaliser().normalise
    old_first_line = "# The answer: run this cell, then click its ••• to expand it."
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                f"{old_first_line}\nreveal(1)", metadata={"tags": ["reveal", "hide-input"]}
            ),
            nbformat.v4.new_code_cell("answer = 2\ncheck(answer)", metadata={"tags": ["solution"]}),
            nbformat.v4.new_code_cell("practice.hint(2)"),
            nbformat.v4.new_code_cell("x = 1"),
        ]
    )
    once = normalise(nb)
    reveal_cell, solution_cell, hint_cell, plain_cell = once.cells
    assert reveal_cell.source == f"{FIRST_LINES['reveal']}\nreveal(1)"
    assert reveal_cell.metadata.tags == ["reveal", "hide-cell"]
    assert reveal_cell.metadata.jupyter == {"source_hidden": True, "outputs_hidden": True}
    assert reveal_cell.metadata.mystnb["code_prompt_show"] == HIDDEN_KINDS["reveal"]
    assert solution_cell.source == f"{FIRST_LINES['solution']}\nanswer = 2\ncheck(answer)"
    assert solution_cell.metadata.mystnb["code_prompt_show"] == HIDDEN_KINDS["solution"]
    assert hint_cell.metadata.tags == ["hint", "hide-output"]
    assert hint_cell.metadata.mystnb["code_prompt_show"] == "Show hint 2"
    assert "tags" not in plain_cell.metadata
    assert normalise(copy.deepcopy(once)) == once


def test_make_execute_collapses_the_feedback_of_a_cell_tagged_feedback():
    normalise = load_normaliser().normalise
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("check(wrong)", metadata={"tags": ["feedback"]})]
    )
    once = normalise(nb)
    cell = once.cells[0]
    assert cell.metadata.tags == ["feedback", "hide-output"]
    assert cell.metadata.jupyter == {"outputs_hidden": True}
    assert cell.metadata.mystnb["code_prompt_show"] == "Show the check's feedback"
    assert normalise(copy.deepcopy(once)) == once


def test_every_figure_has_alt_text_that_describes_it(notebook):
    path, nb = notebook
    for cell in code_cells(nb):
        if any("image/png" in out.get("data", {}) for out in cell["outputs"]):
            alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt.split()) >= 12, (
                f"{path.name}: figure cell {source(cell)[:50]!r} lacks descriptive alt text"
            )


def test_alt_text_is_only_given_to_cells_that_draw_a_figure(notebook):
    path, nb = notebook
    for cell in code_cells(nb):
        if cell["metadata"].get("mystnb", {}).get("image", {}).get("alt"):
            assert any("image/png" in out.get("data", {}) for out in cell["outputs"]), (
                f"{path.name}: {source(cell)[:50]!r} has alt text but shows no figure "
                "(missing %matplotlib inline?)"
            )


def test_markdown_never_shows_hand_typed_tensor_output(notebook):
    path, nb = notebook
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            assert not re.search(r"tensor\(\[|torch\.Size\(", source(cell)), (
                f"{path.name}: typed output in markdown"
            )


def python_blocks(nb):
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            yield from re.findall(r"```python\n(.*?)```", source(cell), re.S)


def lines_of(code):
    return [line.rstrip() for line in textwrap.dedent(code).strip("\n").splitlines()]


def is_excerpt(block, text):
    """Whether ``block``'s lines appear in ``text`` consecutively, all at one extra indentation."""
    excerpt, lines = lines_of(block), [line.rstrip() for line in text.splitlines()]
    for start, first in enumerate(lines):
        indent = first[: len(first) - len(first.lstrip())]
        if first.lstrip() != excerpt[0].lstrip() or not first.startswith(indent):
            continue
        window = lines[start : start + len(excerpt)]
        if len(window) == len(excerpt) and all(
            got == (indent + want if want else "") for got, want in zip(window, excerpt)
        ):
            return True
    return False


def test_code_shown_in_markdown_is_an_excerpt_of_the_mha_package(notebook):
    path, nb = notebook
    package = [p.read_text() for p in (CHAPTERS / "mha").glob("*.py")]
    for block in python_blocks(nb):
        if re.search(r"^\s*(class|def) ", block, re.M):
            ast.parse(textwrap.dedent(block))
            assert any(is_excerpt(block, text) for text in package), (
                f"{path.name} shows code that is not in mha/ verbatim:\n{block[:200]}"
            )


#: Functions that return timings. Their results, and whatever is computed from them, differ from
#: run to run.
TIMING_CALLS = {
    "run_sweep",
    "time_in_rounds",
    "allocator_experiment",
    "time_causal_attention",
    "check_targets",
    "matmul_ceiling",
    "blocked_autorange",
    "timeit",
    "measure_lengths",
}
#: The one other output that varies by machine: the exact float32 rounding residue chapter 3 prints
#: (its prose says why the tests do not compare it). ``(notebook, cell source)``.
ROUNDING_RESIDUE_CELLS = {
    ("03_weight_splits.ipynb", 'print(f"largest absolute difference: {difference:.2e}")')
}


def python_of(cell):
    """A code cell's source without IPython magics and shell escapes, so ``ast`` can parse it."""
    return "\n".join(
        line for line in source(cell).splitlines() if not line.lstrip().startswith(("%", "!"))
    )


def mentions(node, names):
    """Whether ``node`` uses one of ``names``.

    It may use the name as a variable, or call a function or method by that name.
    """
    return any(
        isinstance(n, ast.Name)
        and n.id in names
        or isinstance(n, ast.Attribute)
        and n.attr in names
        for n in ast.walk(node)
    )


def bound_names(target):
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def timing_names(cells):
    """The names the cells bind, in order, to timings or to values computed from them.

    A function whose body uses a timing counts too.
    """
    found = set(TIMING_CALLS)
    for cell in cells:
        nodes = list(ast.walk(ast.parse(python_of(cell))))
        before = None
        while (
            before != found
        ):  # until nothing new turns up: a loop can carry a value back to its top
            before = set(found)
            for node in nodes:
                if (
                    isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr))
                    and node.value
                ):
                    if mentions(node.value, found):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        found |= set().union(*(bound_names(t) for t in targets))
                elif isinstance(node, (ast.For, ast.comprehension)) and mentions(node.iter, found):
                    found |= bound_names(node.target)
                elif isinstance(node, ast.FunctionDef) and any(
                    mentions(statement, found) for statement in node.body
                ):
                    found.add(node.name)
    return found


def test_the_timing_tracker_follows_values_from_cell_to_cell_and_no_further():
    cells = [
        {"source": s}
        for s in (
            "rows = run_sweep(sweep)\nx = 3",
            "def growth(n):\n    return rows[n]",
            "g = growth(2)\nfor r in rows:\n    y = r",
            "z = x + 1",
        )
    ]
    assert timing_names(cells) - TIMING_CALLS == {"rows", "growth", "g", "r", "y"}


def test_only_cells_that_show_timings_skip_the_output_comparison(notebook):
    path, nb = notebook
    cells = code_cells(nb)
    for i, cell in enumerate(cells):
        if "nbval-ignore-output" in cell["metadata"].get("tags", []):
            if (path.name, source(cell)) in ROUNDING_RESIDUE_CELLS:
                continue
            timings = timing_names(cells[: i + 1])
            assert mentions(ast.parse(python_of(cell)), timings), (
                f"{path.name}: {source(cell)[:60]!r} is excluded from nbval's comparison "
                "but uses no timing"
            )


def test_changing_one_stored_output_makes_strict_nbval_fail(tmp_path):
    """nbval in strict mode must notice a single edited output: here, one digit of chapter 1, run
    up to that cell (the cells after it would only make the test longer)."""
    original = NOTEBOOKS[0]
    nb = load(original)
    cell = next(
        c
        for c in code_cells(nb)
        if any(o.get("name") == "stdout" and "0.222" in "".join(o["text"]) for o in c["outputs"])
    )
    nb["cells"] = nb["cells"][: nb["cells"].index(cell) + 1]
    for out in cell["outputs"]:
        if out.get("name") == "stdout":
            out["text"] = [line.replace("0.222", "0.223") for line in out["text"]]
    tampered = tmp_path / original.name
    tampered.write_text(json.dumps(nb))
    (tmp_path / "mha").symlink_to(CHAPTERS / "mha")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            "--nbval-current-env",
            "-p",
            "no:cacheprovider",
            "-q",
            str(tampered),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "0.223" in result.stdout


HIDDEN_TAGS = ("reveal", "solution")


def binds_and_loads(cell):
    """The names a cell binds (assignments, loops, imports, definitions) and the names it reads."""
    bound, loaded = set(), set()
    for node in ast.walk(ast.parse(python_of(cell))):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, loaded


def test_no_reveal_or_solution_defines_a_name_a_later_visible_cell_needs(notebook):
    """A reader who never opens a hidden cell must still be able to run the rest.

    The same holds for a reader who opens it but skips running it.
    """
    path, nb = notebook
    visible, hidden_only = set(dir(builtins)) | {"get_ipython", "display"}, {}
    for cell in code_cells(nb):
        bound, loaded = binds_and_loads(cell)
        if any(tag in cell["metadata"].get("tags", []) for tag in HIDDEN_TAGS):
            for name in bound - visible:
                hidden_only.setdefault(name, source(cell).splitlines()[1][:50])
            continue
        needed = sorted((loaded - bound - visible) & set(hidden_only))
        assert not needed, (
            f"{path.name}: {source(cell)[:50]!r} uses {needed}, defined only in a hidden cell "
            f"({[hidden_only[n] for n in needed]})"
        )
        visible |= bound


def test_the_hidden_name_check_catches_a_name_defined_only_in_a_reveal(tmp_path):
    cells = [
        {
            "cell_type": "code",
            "metadata": {"tags": ["reveal", "hide-cell"]},
            "source": "# The answer\ncounts = {1: 5}",
        },
        {"cell_type": "code", "metadata": {}, "source": "print(counts[1])"},
    ]
    path = tmp_path / "99_fake.ipynb"
    with pytest.raises(AssertionError, match="counts"):
        test_no_reveal_or_solution_defines_a_name_a_later_visible_cell_needs(
            (path, {"cells": cells})
        )


def test_make_execute_stores_consecutive_printing_as_one_output_and_keeps_the_rest_apart():
    merged_streams = load_normaliser().merged_streams
    out, err, shown = (
        nbformat.v4.new_output("stream", name="stdout", text="a\n"),
        nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>"}),
    )
    outputs = [
        out,
        nbformat.v4.new_output("stream", name="stdout", text="b\n"),
        err,
        shown,
        nbformat.v4.new_output("stream", name="stdout", text="c\n"),
    ]
    merged = merged_streams(copy.deepcopy(outputs))
    assert [o.get("text") for o in merged] == ["a\nb\n", "warning\n", None, "c\n"]
