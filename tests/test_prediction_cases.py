"""Every case of the shared table (tests/prediction_cases.json) is read as it says, in Python.

The same table holds the web page's reader to the same cases (tests/browser/test_guesses.py), so
a typed guess gets one verdict in a notebook and in the page.
"""

import ast
import json
import re
from pathlib import Path

import pytest

from mha.gqa import block_lists_match
from mha.predictions import Unreadable, read

TABLE = Path(__file__).with_name("prediction_cases.json")
CASES = json.loads(TABLE.read_text(encoding="utf-8"))["cases"]
READERS = {"block_lists": block_lists_match, "block_lists_match": block_lists_match}


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


# --- The forms each chapter's own prompts suggest are read ------------------------------------

CHAPTERS = sorted(Path(__file__).parents[1].glob("chapters/[0-9][0-9]_*.ipynb"))
PREDICTION_CELL = re.compile(r"^(prediction_\w+) = None\s*#\s*(.*)$", re.M)
#: An option a prompt names: "A", 1_000_000, "spread", True (same output), `False` (worse).
OPTION = re.compile(r'`?("[^"]*"|True|False|-?\d[\d_]*)`?(\s*\([^)]*\))?')


def _source(cell):
    return "".join(cell["source"])


def _reveal_call(source):
    """The keywords of the ``reveal(...)`` call in a reveal cell, as values where literal."""
    tree = ast.parse(source)
    assigned = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    call = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "reveal"
    )
    keywords = {}
    for keyword in call.keywords:
        value = keyword.value
        if isinstance(value, ast.Name) and value.id in assigned:
            value = assigned[value.id]
        try:
            keywords[keyword.arg] = ast.literal_eval(value)
        except ValueError:
            keywords[keyword.arg] = ast.unparse(value)
    return keywords


def _answer_shown(cell):
    """The answer a reveal cell's committed output states ("The answer: (2, 6, 4)")."""
    for output in cell.get("outputs", []):
        text = "".join(output.get("data", {}).get("text/plain", ""))
        if text.startswith("The answer: "):
            said = text.split("\n")[0].removeprefix("The answer: ")
            try:
                return ast.literal_eval(said)
            except (ValueError, SyntaxError):
                return said
    raise AssertionError("a reveal cell with no answer in its output")


def _prompted_forms(comment, question):
    """What a prediction's comment and its question suggest writing: "A", (2, 6, 3), True
    (same output), `False` (worse), "yes" (faster)."""
    forms = []
    example = re.search(r"e\.g\.\s*(.+)$", comment)
    if example:
        forms.append(example.group(1).strip())
        comment = comment[: example.start()]
    else:
        forms += [m.group(0).strip("`").replace("`", "") for m in OPTION.finditer(comment)]
    for sentence in re.findall(r"(?:Record|Answer)[^.]*\.", question):
        forms += [
            (m.group(1) + (m.group(2) or "")).strip()
            for m in OPTION.finditer(sentence)
            if m.group(0).startswith("`") and m.group(2)
        ]
    return forms


def _predictions():
    for path in CHAPTERS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            found = cell["cell_type"] == "code" and PREDICTION_CELL.search(_source(cell))
            if not found:
                continue
            reveal_cell = next(
                c for c in cells[i + 1 :] if "reveal" in c.get("metadata", {}).get("tags", [])
            )
            question = "\n".join(
                _source(c) for c in cells[max(0, i - 3) : i] if c["cell_type"] == "markdown"
            )
            yield f"{path.stem}:{found.group(1)}", found.group(2), question, reveal_cell


PREDICTIONS = list(_predictions())


def test_every_chapter_has_its_predictions():
    # 21: chapter 5's "is the split still faster at the longest length?" depends on the
    # machine, so it is a measured finding there, not a prediction.
    assert len(PREDICTIONS) >= 21


@pytest.mark.parametrize(
    "comment, question, reveal_cell",
    [p[1:] for p in PREDICTIONS],
    ids=[p[0] for p in PREDICTIONS],
)
def test_the_forms_a_prompt_suggests_are_read(comment, question, reveal_cell):
    """Each form a prediction's own comment or question suggests reads as right or wrong,
    never as unreadable: the book never asks for a form its reader cannot read."""
    keywords = _reveal_call(_source(reveal_cell))
    answer = _answer_shown(reveal_cell)
    choices = keywords.get("choices")
    reader = READERS.get(keywords.get("matches"))
    if keywords.get("matches") and not reader:
        pytest.fail(f"a reveal with its own rule {keywords['matches']!r}: add it to READERS")
    forms = _prompted_forms(comment, question)
    unread = []
    for form in forms:
        case = {"prediction": form, "answer": answer}
        if choices is not None:
            case["choices"] = list(choices) if isinstance(choices, tuple) else choices
        if reader:
            case["reader"] = keywords["matches"]
        if reading(case) == "unreadable":
            unread.append(form)
    assert not unread, f"suggested {forms}, unreadable: {unread}"
