"""Predict-then-reveal: the reader records a prediction, the reveal cell computes the answer.

The answer is shown as a box that leads with the computed answer, then the verdict on the
reader's prediction (only if one was recorded), then the explanation. In Jupyter and in the
book it is HTML that wraps to any width; in a terminal, or wherever HTML is not shown, it is
plain text wrapped at ``TEXT_WIDTH`` characters.

The verdict reads the prediction with :mod:`mha.predictions`: a choice by its label ("B",
"(B)", True, "yes"), a number or numbers as a Python value or as text in one small grammar
("8,388,608", "136 blocks", "(2, 6, 4)"). A prediction it cannot read is neither right nor
wrong: the verdict says how to write it, naming the answer's type (or the choices the question
offers) without quoting the answer.

Every coloured box the book shows (this answer, a measured finding, a check's verdict, a hint,
a solution) is
drawn by :func:`box_html`: one CSS class per kind, styled for the light and the dark theme by
``_static/boxes.css``, and an inline light style as the fallback where that stylesheet is not
loaded (JupyterLab, Binder). ``BOX_COLOURS`` holds that fallback and must match the
stylesheet's light variant (``tests/test_feedback_box_colours.py`` checks both themes).

A box whose content the reader must ask for (an answer, a hint, a solution, a mistakes
gallery's feedback) hides that content itself: :func:`collapsed` puts it inside a closed
``<details>`` whose ``<summary>`` says what it holds ("Show the answer"). Every renderer of
HTML keeps it closed until clicked, including those that ignore a notebook's ``outputs_hidden``
metadata and its cell tags (Colab, VS Code). Where the page already hides the output behind a
toggle of its own (the book), ``_static/reveal.js`` opens the box once that toggle is opened,
so one click shows it. The text form is unchanged: it is what a terminal shows and what
nbval compares.

What a reveal cell computed on the way to its answer (a table, an error message, a figure) is
part of the answer, so it goes inside the box as ``evidence`` (preformatted text) and
``figure`` (a PNG embedded at ``FIGURE_DENSITY`` times its pixels, with alt text), never as
printed output or a figure of the cell's own: a notebook shows printed output and figures
openly wherever it ignores the cell's metadata (Colab), before the reader asks.

On the web page a reader commits a guess in the page (``_static/guess.js``): the box carries
what the page needs for that, from :func:`guess_data`, as base64-encoded JSON in the
``data-mha-guess`` attribute of an empty, ``hidden`` element inside its closed content. Nothing
of it shows or is read aloud in JupyterLab, Binder or Colab, which keep the Python route; the
page builds its buttons and text box from it with JavaScript, so they exist only there.
"""

import base64
import html
import io
import json
import numbers
import re
import textwrap

from .predictions import Unreadable, _plain, format_of, offered, prediction_matches, read

__all__ = [
    "BOX_COLOURS",
    "TEXT_WIDTH",
    "Finding",
    "Revealed",
    "box_html",
    "collapsed",
    "finding",
    "prediction_matches",
    "reveal",
]

#: Printed lines stay within this many characters (a phone shows about 41, a desktop 80).
TEXT_WIDTH = 79

#: Light-theme colours of each kind of box: (text, background, left border).
BOX_COLOURS = {
    "passed": ("#1b5e20", "#e8f5e9", "#2e7d32"),
    "failed": ("#8a1c1c", "#fdecea", "#c62828"),
    "hint": ("#0b3a5c", "#eef5fb", "#0072b2"),
    "solution": ("#3d1f4d", "#f5eef8", "#8e44ad"),
    "reveal": ("#3e2c00", "#fff6e0", "#b7791f"),
    "finding": ("#263238", "#eceff1", "#546e7a"),
}


def box_html(kind, title, body_html):
    """One box of ``kind`` (a key of ``BOX_COLOURS``): ``title`` in bold, then ``body_html``.

    ``title`` is plain text (escaped here); ``body_html`` must already be escaped HTML.
    """
    text, background, border = BOX_COLOURS[kind]
    style = (
        f"border-left:4px solid {border};background:{background};color:{text};"
        "padding:0.5em 0.8em;margin:0.3em 0;white-space:normal;"
        "overflow-wrap:anywhere"
    )
    return (
        f'<div class="mha-box mha-{kind}" style="{style}">'
        f"<strong>{html.escape(title)}</strong> {body_html}</div>"
    )


#: The opening tag of a box drawn by :func:`box_html`, then its content.
_BOX = re.compile(r'(<div class="mha-box mha-\w+" style="[^"]*">)(.*)(</div>)', re.S)
#: The opening of a box's hidden content, as :func:`collapsed` writes it.
_HIDDEN = '<details class="mha-hidden">'


def _balanced(content):
    """Whether every ``</div>`` in ``content`` closes a ``<div`` opened in it."""
    depth = 0
    for tag in re.findall(r"<div\b|</div>", content):
        depth += 1 if tag == "<div" else -1
        if depth < 0:
            return False
    return depth == 0


def collapsed(box, summary):
    """``box`` (HTML from :func:`box_html`) with its content closed behind ``summary``.

    The box keeps its colours, so ``summary`` ("Show the answer") is drawn in the box's own
    text colour on its background, readable wherever the box is. Collapsing a collapsed box
    changes nothing; anything that is not one box is returned unchanged.
    """
    match = _BOX.fullmatch(box)
    if match is None or match.group(2).startswith(_HIDDEN):
        return box
    if not _balanced(match.group(2)):
        return box  # two boxes side by side, not one
    opening, content, closing = match.groups()
    return (
        f'{opening}{_HIDDEN}<summary style="cursor:pointer;font-weight:bold">'
        f"{html.escape(summary)}</summary>{content}</details>{closing}"
    )


def _inline_code(text):
    """``text`` escaped for HTML, with `backticked` spans shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


class Revealed:
    """A computed answer with its explanation: HTML in Jupyter and the book, text elsewhere.

    ``evidence`` is text the code printed on the way to the answer (a table, say), kept line
    for line; ``figure`` is ``(png_bytes, alt)``, a figure drawn on the way. Both sit inside
    the closed box with the answer.
    """

    def __init__(
        self, answer, verdict, explanation, evidence="", figure=None, guess=None, meaning=""
    ):
        self.answer = answer
        self.meaning = meaning  # what a True or False answer means, "the same output", or ""
        self.guess = guess  # guess_data() for the web page, or None
        self.verdict = verdict  # "" when no prediction was recorded
        self.explanation = " ".join(explanation.split())
        self.evidence = evidence.rstrip("\n")
        self.figure = figure

    def _said(self):
        """The answer as the box states it: "True (the same output)", "(2, 6, 4)"."""
        return f"{self.answer} ({self.meaning})" if self.meaning else str(self.answer)

    def __str__(self):
        parts = [textwrap.fill(f"The answer: {self._said()}", TEXT_WIDTH)]
        if self.evidence:
            parts.append(self.evidence)  # line for line, as it would be printed
        parts += [textwrap.fill(p, TEXT_WIDTH) for p in (self.verdict, self.explanation) if p]
        if self.figure is not None:
            parts.append(textwrap.fill(f"Figure: {self.figure[1]}", TEXT_WIDTH))
        return "\n".join(parts)

    __repr__ = __str__

    def _repr_html_(self):
        body = f"<code>{html.escape(str(self.answer))}</code>"
        if self.meaning:
            body += f" ({html.escape(self.meaning)})"
        if self.evidence:
            body += f'<pre style="{_EVIDENCE_STYLE}">{html.escape(self.evidence)}</pre>'
        for paragraph in (self.verdict, self.explanation):
            if paragraph:
                body += f'<p style="margin:0.4em 0 0">{_inline_code(paragraph)}</p>'
        if self.figure is not None:
            body += _figure_html(*self.figure)
        if self.guess is not None:
            encoded = base64.b64encode(json.dumps(self.guess).encode()).decode("ascii")
            body += f'<div class="mha-guess-data" hidden data-mha-guess="{encoded}"></div>'
        return collapsed(box_html("reveal", "The answer:", body), "Show the answer")


#: Evidence keeps its columns: preformatted, scrolling sideways rather than wrapping.
_EVIDENCE_STYLE = (
    "margin:0.4em 0 0;padding:0.3em 0.5em;overflow-x:auto;white-space:pre;"
    "background:transparent;color:inherit;border:1px solid currentColor"
)


def _png_width(png):
    """The width in pixels a PNG's header states."""
    return int.from_bytes(png[16:20], "big")


def _figure_html(png, alt):
    """An ``<img>`` of ``png`` shown at 1 / ``FIGURE_DENSITY`` of its pixels, sharp on any
    screen. On a narrow one it shrinks to the box, but no further than ``PHONE_MIN_WIDTH_PX``
    (its smallest text stays legible): the figure then scrolls sideways inside the box, as the
    book's other figures scroll inside their output (``_static/figures.css``)."""
    from .plots import FIGURE_DENSITY, PHONE_MIN_WIDTH_PX

    width = _png_width(png) // FIGURE_DENSITY
    data = base64.b64encode(png).decode("ascii")
    return (
        '<div style="margin:0.4em 0 0;overflow-x:auto">'
        f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" width="{width}" '
        f'style="max-width:max(100%, {PHONE_MIN_WIDTH_PX}px);height:auto;background:#fff">'
        "</div>"
    )


#: Colours an answer box's figure keeps. The book's figures are flat colours and text, so a
#: palette of this many draws them as the full-colour PNG does, in under a third of its bytes:
#: the figure is embedded in the page's HTML, which every reader downloads whole.
FIGURE_PALETTE_COLOURS = 64


def _figure_png(figure):
    """``figure`` (a matplotlib Figure) as PNG bytes at ``FIGURE_DENSITY`` times its pixels,
    saved as Jupyter saves the book's figures (``bbox_inches="tight"``), in a palette of
    ``FIGURE_PALETTE_COLOURS`` colours."""
    from PIL import Image

    from .plots import FIGURE_DENSITY

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi * FIGURE_DENSITY, bbox_inches="tight")
    drawn = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    palette = drawn.quantize(
        colors=FIGURE_PALETTE_COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    small = io.BytesIO()
    palette.save(small, format="png", optimize=True)
    return small.getvalue()


class Finding:
    """A sentence the code concludes from what it measured or computed, shown so that it wraps.

    A printed sentence runs off a phone's screen; this box flows to any width in the book and
    JupyterLab, and wraps at ``TEXT_WIDTH`` characters as text.
    """

    def __init__(self, text, title="Measured:"):
        self.title = title
        self.text = " ".join(text.split())

    def __str__(self):
        return textwrap.fill(f"{self.title} {self.text}", TEXT_WIDTH)

    __repr__ = __str__

    def _repr_html_(self):
        return box_html("finding", self.title, _inline_code(self.text))


def finding(text, title="Measured:"):
    """Show ``text``, a conclusion the code computed, in a box that wraps on any screen."""
    _show(Finding(text, title))


def _show(obj):
    """Display ``obj`` as rich output in IPython, or print it elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython is installed with the book
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(obj)
    else:
        print(obj)


def _verdict(prediction, answer, matches, choices=None):
    """The line that judges the prediction, or says how to write one that can be judged."""
    if matches is None:
        try:
            right = bool(read(prediction, answer, choices))
        except Exception:  # unreadable, or an exotic object that cannot even be compared
            return (
                f"Your prediction, {prediction!r}, cannot be read as this "
                f"answer: write it as {format_of(answer, choices)}."
            )
    else:
        try:
            right = matches(prediction, answer)
        except Unreadable:  # a question's own reader may say it cannot read the prediction
            return (
                f"Your prediction, {prediction!r}, cannot be read as this "
                f"answer: write it as {format_of(answer, choices)}."
            )
    outcome = "matches the answer" if right else "is not what the code computes"
    return f"Your prediction, {prediction!r}, {outcome}."


def _plain_json(value):
    """``value`` as JSON holds it: tuples (and torch.Size) as lists."""
    if isinstance(value, (list, tuple)):
        return [_plain_json(item) for item in value]
    return value


def _numeric(answer):
    """Whether ``answer`` is a number, or a (nested) sequence of numbers only."""
    if isinstance(answer, (list, tuple)):
        return bool(answer) and all(_numeric(item) for item in answer)
    return isinstance(answer, numbers.Real) and not isinstance(answer, bool)


def _choice_button(label, text):
    """What a choice's button says: "B. view raises an error", "True: the same output",
    "True"."""
    if text is None:
        return str(label)
    if re.fullmatch(r"[A-Z]", str(label)):
        return f"{label}. {text}"
    return f"{label}: {text}"


def _meaning(answer, choices):
    """What a True or False ``answer`` means, from ``choices`` ({True: "the same output",
    False: ...}), or ""."""
    answer = _plain(answer)
    if not isinstance(answer, bool) or not isinstance(choices, dict):
        return ""
    return next((text for label, text in choices.items() if label is answer), None) or ""


def guess_data(answer, matches=None, choices=None):
    """What the web page needs to let a reader commit a guess, or ``None`` if it cannot.

    A question with choices (a True/False answer offers True and False) gets one button per
    choice, with the verdict :func:`reveal` would give that choice, word for word. A number or
    a sequence of numbers gets a text box: the page's own reader (``_static/guess.js``, held to
    the same cases as :func:`mha.predictions.read` by ``tests/prediction_cases.json``) reads
    what is typed, with the answer, the reader to use (``matches.page_reader`` for a question's
    own rule, such as :func:`mha.gqa.block_lists_match`) and the format to show for a guess it
    cannot read.
    """
    choices = offered(choices)
    if choices is None and isinstance(answer, bool):
        choices = (True, False)
    if choices is not None:
        pairs = choices.items() if isinstance(choices, dict) else ((c, None) for c in choices)
        buttons = []
        for label, text in pairs:
            verdict = _verdict(label, answer, matches, choices)
            buttons.append(
                {
                    "label": _choice_button(label, text),
                    "verdict": verdict,
                    "right": verdict.endswith(", matches the answer."),
                }
            )
        return {"choices": buttons}
    reader = "default" if matches is None else getattr(matches, "page_reader", None)
    if reader is None or not _numeric(answer):
        return None
    return {"answer": _plain_json(answer), "reader": reader, "format": format_of(answer)}


def _checked_evidence(evidence):
    """``evidence`` as text whose every line fits ``TEXT_WIDTH``, or a ValueError."""
    if evidence is None:
        return ""
    if not isinstance(evidence, str):
        raise ValueError(
            f"evidence must be the text to show (a str), not {type(evidence).__name__}: "
            "join the printed lines with '\\n'"
        )
    for line in evidence.splitlines():
        if len(line) > TEXT_WIDTH:
            raise ValueError(
                f"an evidence line is {len(line)} characters, over {TEXT_WIDTH} "
                f"({line[:30]!r}...): use fewer columns or shorter labels"
            )
    return evidence


def reveal(
    answer,
    prediction=None,
    explanation="",
    *,
    choices=None,
    matches=None,
    evidence=None,
    figure=None,
    figure_alt="",
):
    """Show the computed ``answer``, the verdict on the reader's ``prediction``, and why.

    ``matches(prediction, answer)`` decides whether the prediction was right (default:
    :func:`prediction_matches`, which also explains a prediction it cannot read);
    ``explanation`` says why the answer is what it is. With no prediction recorded there is no
    verdict: the answer speaks for itself. ``choices`` are the answers the question offers
    (see :func:`mha.predictions.read`); the answer must be one of them (else a ValueError).

    ``evidence`` is what the cell would otherwise print (a table, an error message; lines of
    at most ``TEXT_WIDTH`` characters, 44 to fit a phone): it is shown inside the closed box,
    under the answer, as preformatted text. ``figure`` (a matplotlib Figure) is drawn inside
    the box too, after the explanation, described by ``figure_alt`` for readers who cannot
    see it; the cell must not show it itself.
    """
    evidence = _checked_evidence(evidence)
    drawn = None
    if figure is not None:
        if not figure_alt or not figure_alt.strip():
            raise ValueError("a figure in a reveal needs figure_alt: say what it shows")
        drawn = (_figure_png(figure), " ".join(figure_alt.split()))
    choices = offered(choices, answer)  # read once: an iterator is read twice below
    verdict = "" if prediction is None else _verdict(prediction, answer, matches, choices)
    guess = guess_data(answer, matches, choices)
    meaning = _meaning(answer, choices)
    _show(Revealed(answer, verdict, explanation, evidence, drawn, guess, meaning))
