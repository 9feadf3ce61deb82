"""Hygiene of the committed chapters: what strict nbval and the HTML build rely on but cannot see."""

import ast
import json
import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from conftest import CHAPTERS, ROOT

NOTEBOOKS = sorted(CHAPTERS.glob("[0-9]*.ipynb"))
HIDDEN_KINDS = {"reveal": "Reveal the answer", "solution": "Show the solution"}
# JupyterLab shows a collapsed cell's first line: it should say what the cell is, not give code away.
FIRST_LINES = {
    "reveal": "# The answer: run this cell, then click its ••• to expand it.",
    "solution": "# The solution: run this cell, then click its ••• to expand it.",
}


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
    listed = {entry["file"] for entry in toc["chapters"]}
    assert NOTEBOOKS
    assert listed == {f"chapters/{p.stem}" for p in NOTEBOOKS}


def test_every_code_cell_was_executed_top_to_bottom_in_one_kernel(notebook):
    path, nb = notebook
    counts = [c["execution_count"] for c in code_cells(nb) if source(c).strip()]
    assert None not in counts, f"{path.name} has unexecuted code cells: strict nbval would compare nothing"
    assert counts == list(range(1, len(counts) + 1)), f"{path.name} was not run top to bottom once: {counts}"


def test_no_cell_shows_an_error_or_a_warning(notebook):
    path, nb = notebook
    for cell in code_cells(nb):
        for out in cell["outputs"]:
            assert out["output_type"] != "error", f"{path.name}: {source(cell)[:60]!r} raised"
            assert out.get("name") != "stderr", f"{path.name}: {source(cell)[:60]!r} wrote to stderr"


def test_metadata_is_normalised(notebook):
    path, nb = notebook
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        assert "execution" not in cell.get("metadata", {}), f"{path.name} keeps timing metadata; run make execute"


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
            assert "hide-cell" in tags, f"{where} is not hidden in the HTML book (needs the hide-cell tag)"
            assert cell["metadata"].get("jupyter") == {"source_hidden": True, "outputs_hidden": True}, (
                f"{where} is not collapsed in JupyterLab (needs jupyter.source_hidden/outputs_hidden)"
            )
            assert cell["metadata"]["mystnb"]["code_prompt_show"] == HIDDEN_KINDS[kind]
            assert source(cell).startswith(FIRST_LINES[kind] + "\n"), f"{where} does not start with {FIRST_LINES[kind]!r}"
            assert cell["outputs"], f"{where} has no computed answer"


def test_every_figure_has_alt_text_that_describes_it(notebook):
    path, nb = notebook
    for cell in code_cells(nb):
        if any("image/png" in out.get("data", {}) for out in cell["outputs"]):
            alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt.split()) >= 12, f"{path.name}: figure cell {source(cell)[:50]!r} lacks descriptive alt text"


def test_alt_text_is_only_given_to_cells_that_draw_a_figure(notebook):
    path, nb = notebook
    for cell in code_cells(nb):
        if cell["metadata"].get("mystnb", {}).get("image", {}).get("alt"):
            assert any("image/png" in out.get("data", {}) for out in cell["outputs"]), (
                f"{path.name}: {source(cell)[:50]!r} has alt text but shows no figure (missing %matplotlib inline?)"
            )


def test_markdown_never_shows_hand_typed_tensor_output(notebook):
    path, nb = notebook
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            assert not re.search(r"tensor\(\[|torch\.Size\(", source(cell)), f"{path.name}: typed output in markdown"


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


def test_changing_one_stored_output_makes_strict_nbval_fail(tmp_path):
    """nbval in strict mode must notice a single edited output: here, one digit of chapter 1."""
    original = NOTEBOOKS[0]
    nb = load(original)
    cell = next(c for c in code_cells(nb) if any(o.get("name") == "stdout" and "0.2216" in "".join(o["text"])
                                                  for o in c["outputs"]))
    for out in cell["outputs"]:
        if out.get("name") == "stdout":
            out["text"] = [line.replace("0.2216", "0.2217") for line in out["text"]]
    tampered = tmp_path / original.name
    tampered.write_text(json.dumps(nb))
    (tmp_path / "mha").symlink_to(CHAPTERS / "mha")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider", "-q", str(tampered)],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert result.returncode != 0 and "0.2217" in result.stdout
