"""The one table of cases (tests/prediction_cases.json), read by Python (mha.predictions) and
by the page (_static/guess.js, here under node) in Python's words, each rule with rows that fail
without it; and the forms the chapters' own prompts suggest, never unreadable.
"""

import ast
import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mha.gqa import block_lists_match
from mha.prediction_sequences import _leaves
from mha.reveal import _verdict

ROOT = Path(__file__).parents[1]
TABLE = json.loads((ROOT / "tests" / "prediction_cases.json").read_text(encoding="utf-8"))
CASES = [{**c, "choices": TABLE["choices"][c["choices"]]} if "choices" in c else c
         for c in TABLE["cases"]]  # fmt: skip
READERS = {"block_lists": block_lists_match}
OUTCOMES = {"right": ", matches the answer.", "wrong": ", is not what the code computes."}
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node runs guess.js")


def as_python(value):
    """A JSON answer or choices as the reveal passes them: lists are tuples, a list of
    [label, text] pairs a dict."""
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        if all(len(v) == 2 and isinstance(v[1], str) for v in value):
            return dict(map(tuple, value))
    return tuple(as_python(item) for item in value) if isinstance(value, list) else value


def verdict(case, format_shown=None):
    """Python's verdict on ``case``, with the format it asks for as ``format_shown`` if given."""
    answer, choices = as_python(case["answer"]), as_python(case.get("choices"))
    said = _verdict(case["prediction"], answer, READERS.get(case.get("reader")), choices)
    return re.sub(r"write it as .*", f"write it as {format_shown}.", said) if format_shown else said


def reading(case):
    """How Python reads ``case``'s prediction: "right", "wrong" or "unreadable"."""
    said = verdict(case)
    return next((r for r, end in OUTCOMES.items() if said.endswith(end)), "unreadable")


#: Runs guess.js's reader on cases given as JSON on stdin, outside any page.
NODE_READER = """
globalThis.window = {};
globalThis.location = { pathname: "/" };
globalThis.document = { readyState: "complete", querySelector: () => null };
require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const said = (c) => window.mhaGuess.verdictOf(c.prediction, { ...c, format: "FORMAT" });
console.log(JSON.stringify(cases.map((c) => [said(c).outcome, said(c).verdict])));
"""


def read_in_node(cases):
    """How guess.js reads each of ``cases`` under node: (right/wrong/unreadable, verdict)."""
    done = subprocess.run(
        ["node", "-e", NODE_READER, str(ROOT / "_static" / "guess.js")],
        input=json.dumps(cases), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['prediction']!r}->{c['read']}" for c in CASES])
def test_python_reads_each_case_as_the_table_says(case):
    assert reading(case) == case["read"]
    if "format" in case:  # the verdict asks for the format, without quoting the answer
        assert verdict(case).endswith(f"write it as {case['format']}.")


@needs_node
def test_the_page_reads_each_text_case_as_the_table_says_in_pythons_words():
    cases = [c for c in CASES if isinstance(c["prediction"], str)]
    got = read_in_node(cases)
    differ = [f"{c['prediction']!r} for {c['answer']}: page {g}, table {c['read']}"
              for c, (g, _) in zip(cases, got, strict=True) if g != c["read"]]  # fmt: skip
    assert not differ, "\n".join(differ)
    assert [said for _, said in got] == [verdict(c, "FORMAT") for c in cases]


@pytest.mark.parametrize(
    "rule, undone, row",
    [  # a rule of the reader undone (where the reader looks it up), and a row that then fails
        ("mha.prediction_labels._BEFORE", r"^", {"prediction": "(B)", "choices": "second_head"}),
        (
            "mha.prediction_labels._AFTER",
            r"$()",
            {"prediction": "B (the same x)", "choices": "second_head"},
        ),
        (
            "mha.prediction_labels._spellings",
            lambda label: [str(label)],
            {"prediction": "no", "choices": "true_false"},
        ),
        (
            "mha.prediction_labels._own_text",
            lambda *_: False,
            {"prediction": "the same output", "answer": True},
        ),
        ("mha.prediction_numbers._UNIT", re.compile("(?!)"), {"prediction": "136 blocks"}),
        (
            "mha.prediction_numbers._NOT_A_UNIT",
            re.compile("(?!)"),
            {"prediction": "8 million values"},
        ),
        ("mha.prediction_labels._HEDGE", re.compile("(?!)"), {"prediction": "B (or C)"}),
    ],
)
def test_a_row_fails_on_a_reader_without_its_rule(rule, undone, row, monkeypatch):
    case = next(c for c in TABLE["cases"] if c.items() >= row.items())
    case = CASES[TABLE["cases"].index(case)]
    assert reading(case) == case["read"]
    monkeypatch.setattr(rule, undone)
    assert reading(case) != case["read"]


def test_the_table_has_every_outcome_for_every_kind_of_question():
    kinds = {(type(c["answer"]).__name__, "choices" in c, c["read"]) for c in CASES}
    assert {(k, c, r) for k in ("int", "list", "str", "bool") for c in (False, True)
            for r in ("right", "wrong", "unreadable") if k != "list" or not c} <= kinds  # fmt: skip


# --- The forms each chapter's own prompts suggest are read ------------------------------------

PREDICTION_CELL = re.compile(r"^(prediction_\w+) = None\s*#\s*(.*)$", re.M)
#: A value a prediction's comment offers, with its gloss: "A", 4, "spread", True (same output).
OPTION = re.compile(r'("[^"]*"|True|False|-?\d[\d_]*)(\s*\([^)]*\))?')


def prompted():
    """(name, case) for each form a prediction's comment suggests, as text and as the Python
    value it writes: its example after "e.g.", else each value it offers, "True (same output)"."""
    for path in sorted(ROOT.glob("chapters/[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            found = cell["cell_type"] == "code" and PREDICTION_CELL.search("".join(cell["source"]))
            if not found:
                continue
            shown = next(c for c in cells[i:] if "reveal" in c["metadata"].get("tags", []))
            source, output = "".join(shown["source"]), shown["outputs"][0]["data"]["text/plain"]
            said = "".join(output).split("\n")[0].removeprefix("The answer: ")
            said = re.sub(r"^(True|False) \(.*\)$", r"\1", said)  # "True (the same output)"
            case = {"answer": said if said.isalpha() and said not in ("True", "False") else
                    ast.literal_eval(said)}  # fmt: skip
            if "choices=" in source:  # the labels the comment offers
                case["choices"] = [ast.literal_eval(m[1]) for m in OPTION.finditer(found[2])]
            if "matches=" in source:
                case["reader"] = re.search(r"matches=(\w+)_match", source)[1]
            example = re.search(r"e\.g\.\s*(.+)$", found[2])
            forms = [(example[1], example[1])] if example else OPTION.finditer(found[2])
            for form in forms:
                case = {**case, "prediction": form[0], "value": ast.literal_eval(form[1])}
                yield f"{path.stem}:{found[1]}:{form[0]}", case


PROMPTED = list(prompted())


def test_every_chapter_has_its_predictions():  # 21: chapter 5's fastest is a measurement
    assert len({name.rsplit(":", 1)[0] for name, _ in PROMPTED}) >= 21


@pytest.mark.parametrize("case", [c for _, c in PROMPTED], ids=[n for n, _ in PROMPTED])
def test_the_forms_a_prompt_suggests_are_read_in_python(case):
    """As text and as the Python value it writes, each form reads right or wrong, never
    unreadable: the book never asks for a form its reader cannot read."""
    assert case.get("reader") in (None, *READERS), "a reveal with its own rule: add it to READERS"
    assert reading({**case, "prediction": case["value"]}) != "unreadable"
    assert reading(case) != "unreadable"


@needs_node
def test_the_forms_a_prompt_suggests_are_read_by_the_page():
    got = read_in_node([c for _, c in PROMPTED])
    unread = [name for (name, _), (g, _) in zip(PROMPTED, got, strict=True) if g == "unreadable"]
    assert not unread and len(got) >= 40, unread


#: What random guesses are made of: the rules' own pieces, and a few they do not know.
PIECES = [*"0123456789()[]x×*^/;.-+=:'`", *"12|0011|8,388,608|4_096| |, |,| x |**| and |by|d_out|"
          "torch.Size(|\u202f|\u00a0|four|e| blocks| million| per| MiB| or so|A|b|True|yes|no|"
          "spread| or |option |the same output".split("|")]  # fmt: skip
ANSWERS = [(4, None), (136, None), (8388608, None), ((2, 6, 4), None), ((15, 6), None),
           (((2, 6, 3, 2), (2, 3, 6, 2)), None), (([1, 1, 2, 2], [1, 2, 1, 2]), None),
           ("B", "second_head"), (False, "true_false"), (True, "same_output"), (4, "offsets"),
           ("spread", "offsets")]  # fmt: skip


@needs_node
def test_both_readers_agree_on_random_guesses():
    """Beyond the table: 4,000 guesses assembled from the rules' pieces (seeded), each read by
    both readers, give the same verdict."""
    draw, cases = random.Random(35), []
    for _ in range(4000):
        answer, choices = draw.choice(ANSWERS)
        if draw.random() < 0.5:  # mostly well-formed: the answer, written with noise
            text = draw.choice(["{}", "({})", "[{}]", "torch.Size([{}])", "{} blocks"]).format(
                draw.choice([", ", " ", " x ", ","]).join(map(str, _leaves(answer)))
            )
            at = draw.randrange(len(text) + 1)
            text = text[:at] + draw.choice(PIECES) * draw.randrange(2) + text[at:]
        else:
            text = "".join(draw.choices(PIECES, k=draw.randrange(1, 8)))
        blocks = isinstance(answer, tuple) and isinstance(answer[0], list)
        case = {"prediction": text, "answer": answer}
        if choices:
            case["choices"] = TABLE["choices"][choices]
        elif blocks and draw.random() < 0.5:
            case["reader"] = "block_lists"
        cases.append(case)
    got = read_in_node(cases)
    differ = [f"{c['prediction']!r} for {c['answer']}: page {g}, Python {reading(c)}"
              for c, (g, _) in zip(cases, got, strict=True) if g != reading(c)]  # fmt: skip
    assert not differ, "\n".join(differ[:20])
    assert {g for g, _ in got} == {"right", "wrong", "unreadable"}
