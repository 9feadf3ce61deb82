"""Re-execute chapters in place, top to bottom in one kernel, and normalise their metadata.

Usage: python .ci/execute_chapters.py [--normalise-only] chapters/01_*.ipynb ...

Each notebook runs in its own folder (as Binder and nbval run it). Afterwards the notebook keeps
only stable metadata: the standard ``python3`` kernelspec, no per-cell timing, no widget state,
so re-running produces small diffs.

Normalising also applies the book's conventions (AUTHORING.md), so an author writes a cell and
this script does the rest:

- a prediction cell (``prediction_x = None``) and a practice (the first code cell under a
  "## Practice" heading): tagged ``prediction`` or ``practice``, and right before it the
  paragraph that tells a web reader how to answer or do it (``ROUTES`` in full for a chapter's
  first prediction and first practice, ``SHORT_ROUTES`` after), a markdown cell with the
  id ``route-<the cell's id>``. A route paragraph whose cell has gone is dropped; a changed
  ``ROUTES`` text replaces every copy.

- ``reveal`` and ``solution`` cells: hidden behind one toggle in the book (``hide-cell``, with
  the prompts in ``HIDDEN_KINDS``), collapsed in JupyterLab, and a first line saying what the
  cell is (JupyterLab shows it on the collapsed cell; the book shows it atop the code);
- ``hint`` cells (a cell that is just ``exercise.hint(n)`` gets the tag too): the call stays
  visible, its output (the hint) sits behind "Show hint n".
- ``feedback`` cells (a mistakes gallery's entries): the code stays visible, the check's
  feedback sits behind "Show the check's feedback".

Colab ignores tags and ``outputs_hidden``, so a box the reader must ask for also hides its own
content (``mha.reveal.collapsed``). Answers, hints and solutions draw themselves that way; the
kernel cannot see tags, so any other box in these cells (a gallery's feedback, the check run on
a solution) is stored closed here, behind ``STORED_CLOSED``'s words. nbval compares the words
inside, not the wrapper (``.ci/nbval-sanitize.cfg``).

Running it again changes nothing. ``--normalise-only`` normalises without running anything
(after editing only markdown, or tags).
"""

import re
import sys
import textwrap
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from mha.reveal import collapsed

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")

#: tag -> (first line, toggle prompt to show, toggle prompt to hide)
HIDDEN_KINDS = {
    "reveal": ("# The answer: this cell computes it.", "Reveal the answer", "Hide the answer"),
    "solution": ("# The solution: one way to do it.", "Show the solution", "Hide the solution"),
}
#: tag -> what a box in such a cell says while it is closed, when it does not close itself
STORED_CLOSED = {
    "reveal": "Show the answer",
    "solution": "Show the check on the solution",
    "feedback": "Show the check's feedback",
}
#: A first line an earlier convention wrote, replaced by the current one.
OLD_FIRST_LINE = re.compile(r"# The (answer|solution)\b.*")
#: A cell that records a reader's guess, and the heading of an exercise's section.
PREDICTION = re.compile(r"^\s*prediction_\w+\s*=", re.M)
PRACTICE_HEADING = re.compile(r"^#{2,3} Practice\b", re.M)


def paragraph(text):
    """``text`` as a markdown paragraph of lines of at most 79 characters."""
    return textwrap.fill(text, 79, break_long_words=False, break_on_hyphens=False)


#: tag -> the paragraph right before the chapter's first cell so tagged: how to do it from the
#: web page (a "Run this page" button in its header runs the chapter in the page itself).
ROUTES = {
    "prediction": paragraph(
        '**Your guess.** Choose or type your answer under "Your guess" below: the page says if '
        'you were right and opens the answer ("Reveal the answer" opens it without a guess). '
        'When the chapter runs ("Run this page" at the top runs it in this page; the launch '
        "buttons beside it, elsewhere), write it in the next cell in place of `None`, then run "
        "the answer's cell: it says if you were right."
    ),
    "practice": paragraph(
        "**Doing the exercise.** The check runs your code, so it needs the chapter running: "
        '"Run this page" at the top ("Run" on a phone) runs it in this page, its kernel ready '
        "in a minute or two; the launch buttons beside it run it in Binder or Colab, or "
        "download it. Then write your answer in the code below and run it and its check. "
        "Without running it, you can still open the hints and the solution."
    ),
}
#: The route paragraph after the first of its kind in a chapter: at most 25 words, the first
#: says the rest.
SHORT_ROUTES = {
    "prediction": paragraph(
        '**Your guess:** choose or type it under "Your guess" below; when the chapter runs, '
        "write it in place of `None` and run the answer's cell."
    ),
    "practice": paragraph(
        '**Doing the exercise:** run the chapter ("Run this page" at the top, or a launch '
        "button), then write your answer below and run its check."
    ),
}
ROUTE_ID_PREFIX = "route-"
HINT_CALL = re.compile(r"\s*[\w.]+\.hint\(\s*(\d*)\s*\)\s*")
#: Tags that would hide a cell some other way than the convention says.
OTHER_HIDING = (
    "hide-cell",
    "hide-input",
    "hide-output",
    "remove-cell",
    "remove-input",
    "remove-output",
)


def with_tags(cell, required, dropped=()):
    tags = [t for t in cell.metadata.get("tags", []) if t not in dropped]
    cell.metadata["tags"] = tags + [t for t in required if t not in tags]


def hide_behind_toggle(cell, kind):
    """A reveal or solution cell: one toggle in the book, collapsed in JupyterLab, and a first
    line that says what the cell is."""
    first_line, show, hide = HIDDEN_KINDS[kind]
    with_tags(cell, [kind, "hide-cell"], dropped=OTHER_HIDING)
    cell.metadata["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
    cell.metadata.setdefault("mystnb", {}).update(code_prompt_show=show, code_prompt_hide=hide)
    lines = cell.source.split("\n")
    if OLD_FIRST_LINE.fullmatch(lines[0]):
        lines = lines[1:]
    cell.source = "\n".join([first_line, *lines])


def hint_behind_toggle(cell):
    """A hint cell: the call stays in view, the hint it prints waits behind "Show hint n"."""
    call = HINT_CALL.fullmatch(cell.source)
    name = f"hint {call.group(1) or 1}" if call else "the hint"
    with_tags(cell, ["hint", "hide-output"], dropped=OTHER_HIDING)
    cell.metadata["jupyter"] = {"outputs_hidden": True}
    cell.metadata.setdefault("mystnb", {}).update(
        code_prompt_show=f"Show {name}", code_prompt_hide=f"Hide {name}"
    )


def feedback_behind_toggle(cell):
    """A mistakes-gallery cell: the code stays in view, the check's feedback waits behind
    "Show the check's feedback", so the reader can look for the mistake first."""
    with_tags(cell, ["feedback", "hide-output"], dropped=OTHER_HIDING)
    cell.metadata["jupyter"] = {"outputs_hidden": True}
    cell.metadata.setdefault("mystnb", {}).update(
        code_prompt_show=STORED_CLOSED["feedback"], code_prompt_hide="Hide the feedback"
    )


def boxes_stored_closed(cell, summary):
    """Every box among ``cell``'s outputs closed behind ``summary`` (a box already closed keeps
    its own words)."""
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "text/html" in data:
            data["text/html"] = collapsed(data["text/html"], summary)


def merged_streams(outputs):
    """``outputs`` with each run of consecutive same-stream text joined into one output.

    How the kernel chunks a cell's printing varies from run to run; joined, the same text is
    stored the same way every time, and re-running a chapter changes only what changed.
    """
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            output.output_type == "stream"
            and previous is not None
            and previous.output_type == "stream"
            and previous.name == output.name
        ):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def route_kind(cell, under_practice_heading):
    """``"prediction"``, ``"practice"`` or None: which route paragraph ``cell`` needs."""
    if cell.cell_type != "code":
        return None
    if set(cell.metadata.get("tags", [])) & {*HIDDEN_KINDS, "hint", "feedback"}:
        return None
    if PREDICTION.search(cell.source):
        return "prediction"
    return "practice" if under_practice_heading else None


def is_route_text(cell):
    """A markdown cell holding a route paragraph an author wrote or pasted by hand."""
    routes = {text.strip() for text in [*ROUTES.values(), *SHORT_ROUTES.values()]}
    return cell.cell_type == "markdown" and cell.source.strip() in routes


def with_routes(cells):
    """``cells`` with each prediction and practice tagged, and its route paragraph right before
    it (the old route cells dropped and made anew, with the same ids): the first of each kind
    gets ``ROUTES``' paragraph, the later ones ``SHORT_ROUTES``'."""
    routed, under_practice_heading, seen = [], False, set()
    for cell in cells:
        if cell.get("id", "").startswith(ROUTE_ID_PREFIX) or is_route_text(cell):
            continue  # made anew below; a pasted copy would otherwise stand twice
        kind = route_kind(cell, under_practice_heading)
        if cell.cell_type == "markdown" and PRACTICE_HEADING.search(cell.source):
            under_practice_heading = True
        elif cell.cell_type == "code":
            under_practice_heading = False
        tags = [t for t in cell.metadata.get("tags", []) if t not in ROUTES]
        if kind is not None:
            tags.append(kind)
            route = SHORT_ROUTES[kind] if kind in seen else ROUTES[kind]
            seen.add(kind)
            routed.append(nbformat.v4.new_markdown_cell(route, id=ROUTE_ID_PREFIX + cell.id))
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
        routed.append(cell)
    return routed


def normalise(nb):
    nb.metadata = {
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
    }
    nb.cells = with_routes(nb.cells)
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type != "code":
            continue
        cell.outputs = merged_streams(cell.outputs)
        tags = cell.metadata.get("tags", [])
        kinds = [kind for kind in HIDDEN_KINDS if kind in tags]
        if kinds:
            hide_behind_toggle(cell, kinds[0])
        elif "hint" in tags or HINT_CALL.fullmatch(cell.source):
            hint_behind_toggle(cell)
        elif "feedback" in tags:
            feedback_behind_toggle(cell)
        kind = next((k for k in STORED_CLOSED if k in cell.metadata.get("tags", [])), None)
        if kind is not None:
            boxes_stored_closed(cell, STORED_CLOSED[kind])
    return nb


def execute(path):
    nb = normalise(nbformat.read(path, as_version=4))
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    nbformat.write(normalise(nb), path)
    print(f"executed {path}")


def normalise_only(path):
    nbformat.write(normalise(nbformat.read(path, as_version=4)), path)
    print(f"normalised {path}")


if __name__ == "__main__":
    only = "--normalise-only" in sys.argv[1:]
    for arg in sys.argv[1:]:
        if arg != "--normalise-only":
            (normalise_only if only else execute)(Path(arg))
