"""Answers, hints, solutions and a gallery's feedback stay closed in any renderer of HTML.

Colab (and VS Code) ignore a notebook's ``outputs_hidden`` metadata and its cell tags, so a box
the reader must ask for hides its own content: it sits inside a closed ``<details>``, and only
the ``<summary>`` ("Show the answer") is on screen until the reader clicks it. A check's verdict
on the reader's own answer is not hidden. The text form, which a terminal shows and nbval
compares, is unchanged. tests/browser/test_hidden_boxes.py clicks them in Chromium.
"""

import copy
import importlib.util
import re
from html.parser import HTMLParser

import nbformat
import pytest

from conftest import CHAPTERS, ROOT
from mha.checks import CheckResult
from mha.exercise import Note
from mha.reveal import Finding, Revealed, box_html, collapsed, reveal
from mha.two_dim_exercise import two_dim_output

ANSWER = "(2, 6, 4)"
EXPLANATION = "Batch and tokens pass through; the heads sit side by side."
GALLERY_PROMPT = "Show the check's feedback"


class Texts(HTMLParser):
    """Every piece of text in a fragment of HTML, with the elements it sits in (outermost first)."""

    VOID = {"br", "img", "hr", "input", "meta", "link"}

    def __init__(self, fragment):
        super().__init__()
        self.stack, self.pieces = [], []
        self.feed(fragment)
        self.close()
        assert not self.stack, f"unclosed elements: {self.stack}"

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1][0] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data):
        if data.strip():
            self.pieces.append((data, list(self.stack)))

    def around(self, text):
        """The elements around the first piece of text that contains ``text``."""
        found = [stack for data, stack in self.pieces if text in data]
        assert found, f"{text!r} is not in the HTML"
        return [tag for tag, _ in found[0]], [attrs for _, attrs in found[0]]

    @property
    def text(self):
        return " ".join(data for data, _ in self.pieces)


def hidden_until_clicked(fragment, text, summary=""):
    """Whether ``text`` sits inside a closed <details>, outside its <summary>, which reads
    ``summary`` (or anything, if not given): what a renderer shows of it before the reader
    clicks is the summary alone."""
    page = Texts(fragment)
    tags, attrs = page.around(text)
    if "details" not in tags or "summary" in tags:
        return False
    details = attrs[tags.index("details")]
    summaries = [data for data, stack in page.pieces if stack and stack[-1][0] == "summary"]
    return "open" not in details and any(summary in words for words in summaries)


HIDDEN = {
    "reveal": (Revealed(ANSWER, "", EXPLANATION), ANSWER, "Show the answer"),
    "reveal's explanation": (Revealed(ANSWER, "", EXPLANATION), "side by side", "Show the answer"),
    "hint": (Note("Hint 2 of 3", "Look at d_out."), "Look at d_out.", "Show hint 2 of 3"),
    "solution": (Note("Solution", "answer = 1", code=True), "answer", "Show the solution"),
    "the book's hint": (two_dim_output.hint(1), two_dim_output.hints[0][:30], "Show hint 1 of"),
}


@pytest.mark.parametrize("kind", HIDDEN)
def test_the_content_of_an_answer_hint_or_solution_box_waits_in_a_closed_details(kind):
    box, secret, summary = HIDDEN[kind]
    fragment = box._repr_html_()
    assert hidden_until_clicked(fragment, secret, summary), fragment


@pytest.mark.parametrize("kind", HIDDEN)
def test_the_box_keeps_its_class_and_colours_so_its_summary_reads_in_both_themes(kind):
    """The summary is drawn in the box's own text colour on its background (boxes.css and the
    inline fallback, both checked by tests/test_feedback_box_colours.py)."""
    box, _, summary = HIDDEN[kind]
    tags, attrs = Texts(box._repr_html_()).around(summary)
    assert tags[0] == "div" and "mha-box" in attrs[0]["class"].split()
    assert "color:" in attrs[0]["style"] and "color" not in attrs[-1].get("style", "")


def test_the_text_form_is_unchanged_and_shows_no_summary():
    revealed = Revealed(ANSWER, "", EXPLANATION)
    assert str(revealed).startswith(f"The answer: {ANSWER}\n")
    assert "Show" not in str(revealed) and "Show" not in str(two_dim_output.hint(1))
    assert str(Note("Solution", "answer = 1", code=True)) == "Solution:\n    answer = 1"


def test_a_checks_verdict_and_a_finding_are_shown_open():
    for shown in (CheckResult(False, "Not this."), CheckResult(True, "Right."), Finding("3x.")):
        assert "<details" not in shown._repr_html_()


def test_collapsed_keeps_a_box_whole_and_changes_nothing_twice():
    box = box_html("failed", "✗ Not yet.", "The output is 4 wide &amp; needs 2.")
    once = collapsed(box, GALLERY_PROMPT)
    assert hidden_until_clicked(once, "needs 2", GALLERY_PROMPT)
    assert "✗ Not yet." in Texts(once).text and "&amp;" in once
    assert collapsed(once, GALLERY_PROMPT) == once
    for other in ("<p>not a box</p>", box + box):
        assert collapsed(other, GALLERY_PROMPT) == other


def test_the_summary_is_escaped():
    fragment = collapsed(box_html("hint", "Hint.", "x"), "Show <b>")
    assert "<b>" not in fragment and "Show &lt;b&gt;" in fragment


def load_execute_chapters():
    spec = importlib.util.spec_from_file_location(
        "execute_chapters", ROOT / ".ci" / "execute_chapters.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_execute_stores_a_gallerys_feedback_closed_and_a_readers_verdict_open():
    normalise = load_execute_chapters().normalise
    verdict = CheckResult(False, "The output is 4 values wide.")
    cells = []
    for tags in (["feedback"], [], ["solution"]):
        cell = nbformat.v4.new_code_cell("check(wrong)", metadata={"tags": tags})
        cell.outputs = [
            nbformat.v4.new_output(
                "execute_result",
                {"text/html": verdict._repr_html_(), "text/plain": str(verdict)},
                execution_count=1,
            )
        ]
        cells.append(cell)
    once = normalise(nbformat.v4.new_notebook(cells=cells))
    gallery, readers, solutions = (cell.outputs[0].data for cell in once.cells)
    assert hidden_until_clicked(gallery["text/html"], "4 values wide", GALLERY_PROMPT)
    assert gallery["text/plain"] == str(verdict)
    assert readers["text/html"] == verdict._repr_html_()
    assert hidden_until_clicked(solutions["text/html"], "4 values wide", "Show the check on")
    assert normalise(copy.deepcopy(once)) == once


#: The cells whose boxes the reader must ask for, by tag.
HIDDEN_CELLS = ("reveal", "solution", "hint", "feedback")


@pytest.mark.parametrize("path", sorted(CHAPTERS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_stored_answer_hint_solution_and_gallery_feedback_is_closed(path):
    """What Colab shows when it opens a chapter: the committed outputs, tags ignored. A box
    stored open here means the chapter was executed with an older package: `make execute`."""
    notebook = nbformat.read(path, as_version=4)
    opened = []
    for number, cell in enumerate(notebook.cells, start=1):
        tags = cell.metadata.get("tags", [])
        kind = next((k for k in HIDDEN_CELLS if k in tags), None)
        if cell.cell_type != "code" or kind is None:
            continue
        boxes = [
            output.data["text/html"]
            for output in cell.outputs
            if 'class="mha-box' in output.get("data", {}).get("text/html", "")
        ]
        if not boxes and kind != "reveal":
            opened.append(f"cell {number} ({kind}) shows no box")
        for box in boxes:
            body = Texts(box).pieces[-1][0]  # the box's last words
            if not hidden_until_clicked(box, body):
                opened.append(f"cell {number} ({kind}): {body[:50]!r} shows before a click")
    assert not opened, f"{path.name}: " + "\n".join(opened)


def test_nbval_compares_a_gallerys_feedback_whether_closed_or_not_and_every_word_of_it():
    """The stored feedback of a gallery is closed (make execute), the kernel's is open: strict
    nbval compares the two without the wrapper (.ci/nbval-sanitize.cfg, wired in pyproject)."""
    from nbval.plugin import get_sanitize_patterns

    assert "--nbval-sanitize-with=.ci/nbval-sanitize.cfg" in (ROOT / "pyproject.toml").read_text()
    patterns = get_sanitize_patterns((ROOT / ".ci" / "nbval-sanitize.cfg").read_text())
    assert patterns

    def compared(text):
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    kernel = CheckResult(False, "The output is 4 values wide.")._repr_html_()
    stored = collapsed(kernel, GALLERY_PROMPT)
    other = CheckResult(False, "The output is 5 values wide.")._repr_html_()
    assert stored != kernel and compared(stored) == compared(kernel)
    assert compared(collapsed(other, GALLERY_PROMPT)) != compared(kernel)
    hints = [compared(two_dim_output.hint(n)._repr_html_()) for n in (1, 2)]
    assert hints[0] != hints[1]


EVIDENCE = "strides before: (36, 2, 12, 1)\n  <b> & 'quoted'  12"


def test_evidence_waits_inside_the_closed_answer_box_escaped_and_preformatted():
    fragment = Revealed(ANSWER, "", EXPLANATION, EVIDENCE)._repr_html_()
    assert hidden_until_clicked(fragment, "strides before", "Show the answer"), fragment
    tags, _ = Texts(fragment).around("strides before")
    assert tags[-1] == "pre"
    assert "<b>" not in fragment and "&lt;b&gt; &amp;" in fragment
    page = Texts(fragment)
    assert page.text.index(ANSWER) < page.text.index("strides") < page.text.index(EXPLANATION)


def test_the_text_form_shows_the_evidence_line_for_line_after_the_answer():
    text = str(Revealed(ANSWER, "Your prediction, 4, matches the answer.", EXPLANATION, EVIDENCE))
    assert text.startswith(f"The answer: {ANSWER}\n{EVIDENCE}\nYour prediction")
    assert text.endswith(EXPLANATION)
    assert str(Revealed(ANSWER, "", EXPLANATION, "")) == f"The answer: {ANSWER}\n{EXPLANATION}"


def shown_by_reveal(capsys, *args, **kwargs):
    """What ``reveal`` prints outside IPython: its text form."""
    reveal(*args, **kwargs)
    return capsys.readouterr().out


def test_reveal_takes_evidence_and_rejects_lines_too_wide_for_any_screen(capsys):
    out = shown_by_reveal(capsys, 4, None, "Why.", evidence="a  b\nc")
    assert out == "The answer: 4\na  b\nc\nWhy.\n"
    with pytest.raises(ValueError, match="81 characters, over 79"):
        reveal(4, evidence="ok\n" + "x" * 81)
    with pytest.raises(ValueError, match=r"\(a str\), not list"):
        reveal(4, evidence=["a", "b"])


def small_figure():
    from matplotlib.figure import Figure

    from mha.plots import FIGURE_DPI

    figure = Figure(figsize=(2, 1), dpi=FIGURE_DPI)
    figure.add_subplot().plot([0, 1], [1, 0])
    return figure


def test_a_figure_in_a_reveal_waits_in_the_closed_box_at_twice_its_pixels(capsys):
    from mha.plots import FIGURE_DENSITY
    from mha.reveal import _figure_png

    figure = small_figure()
    png = _figure_png(figure)
    alt = "A line falling from 1 to 0 <left to right>."
    box = Revealed(ANSWER, "", EXPLANATION, "", (png, alt))
    fragment = box._repr_html_()
    details = fragment.index('<details class="mha-hidden">')
    image = re.search(
        r'<img src="data:image/png;base64,[^"]+" alt="([^"]*)" width="(\d+)"', fragment
    )
    assert image and details < image.start() < fragment.index("</details>")
    assert image.group(1) == "A line falling from 1 to 0 &lt;left to right&gt;."
    pixels = int.from_bytes(png[16:20], "big")
    assert int(image.group(2)) == pixels // FIGURE_DENSITY  # shown as Jupyter shows "retina"
    assert pixels > 1.5 * figure.get_figwidth() * figure.dpi  # sharp on a dense screen
    assert str(box).endswith(f"Figure: {alt}")
    assert "Figure: A line" in shown_by_reveal(capsys, 1, figure=figure, figure_alt=alt)
    with pytest.raises(ValueError, match="figure_alt"):
        reveal(1, figure=figure)


def reveal_cell_problems(notebook):
    """What a reveal cell of ``notebook`` shows outside its closed answer box: printed output,
    a figure of its own, any other output, an image outside the box."""
    problems = []
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code" or "reveal" not in cell.metadata.get("tags", []):
            continue
        for output in cell.outputs:
            data = output.get("data", {})
            page = data.get("text/html", "")
            if output.output_type == "stream":
                problems.append(f"cell {number} prints {output.text[:40]!r}: pass evidence=")
            elif any(kind.startswith("image/") for kind in data):
                problems.append(f"cell {number} shows a figure: pass figure= to reveal")
            elif 'class="mha-box mha-reveal"' not in page:
                problems.append(f"cell {number} shows {str(data)[:60]!r} beside its answer box")
            elif "<img" in re.sub(r"<details.*</details>", "", page, flags=re.S):
                problems.append(f"cell {number} shows an image outside the closed box")
    return problems


@pytest.mark.parametrize("path", sorted(CHAPTERS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_reveal_cell_shows_nothing_but_its_closed_answer_box(path):
    """Colab shows every output a cell stored: what a reveal cell prints or draws beside its
    answer box gives the answer away before the reader asks. It belongs in the box (reveal's
    evidence= and figure=)."""
    problems = reveal_cell_problems(nbformat.read(path, as_version=4))
    assert not problems, f"{path.name}: " + "\n".join(problems)


def test_the_reveal_cell_check_catches_a_print_a_figure_and_an_image_outside_the_box():
    box = Revealed(ANSWER, "", EXPLANATION)._repr_html_()
    outputs = {
        "prints": nbformat.v4.new_output("stream", name="stdout", text="4 wide\n"),
        "shows a figure": nbformat.v4.new_output(
            "execute_result", {"image/png": "iVBOR", "text/plain": "<Figure>"}, execution_count=1
        ),
        "beside its answer box": nbformat.v4.new_output("display_data", {"text/plain": "4"}),
        "outside the closed box": nbformat.v4.new_output(
            "display_data", {"text/html": box + '<img src="x.png" alt="x">', "text/plain": "4"}
        ),
    }
    answer = nbformat.v4.new_output("display_data", {"text/html": box, "text/plain": ANSWER})
    for mistake, output in outputs.items():
        cell = nbformat.v4.new_code_cell("reveal(4)", metadata={"tags": ["reveal"]})
        cell.outputs = [output, answer]
        problems = reveal_cell_problems(nbformat.v4.new_notebook(cells=[cell]))
        assert len(problems) == 1 and mistake in problems[0], problems
    cell.outputs = [answer]
    assert not reveal_cell_problems(nbformat.v4.new_notebook(cells=[cell]))


def test_nbval_compares_the_words_of_an_answer_box_with_a_figure_but_not_its_pixels():
    """nbval skips image/png outputs (their pixels differ across CPUs and library versions), and
    .ci/nbval-sanitize.cfg skips the pixels of a figure inside an answer box the same way."""
    from nbval.plugin import get_sanitize_patterns

    patterns = get_sanitize_patterns((ROOT / ".ci" / "nbval-sanitize.cfg").read_text())

    def compared(box):
        text = box._repr_html_()
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    png = (b"\x89PNG" * 8, b"\x89PNG" * 9)
    one, other = (Revealed(ANSWER, "", EXPLANATION, "1", (p, "Alt.")) for p in png)
    assert one._repr_html_() != other._repr_html_() and compared(one) == compared(other)
    assert compared(one) != compared(Revealed(ANSWER, "", EXPLANATION, "2", (png[0], "Alt.")))
