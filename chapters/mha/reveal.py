"""Predict-then-reveal: the reader records a prediction, the reveal cell computes the answer.

The answer is shown as a box that leads with the computed answer, then the verdict on the
reader's prediction (only if one was recorded), then the explanation. In Jupyter and in the
book it is HTML that wraps to any width; in a terminal, or wherever HTML is not shown, it is
plain text wrapped at ``TEXT_WIDTH`` characters.

Every coloured box the book shows (this answer, a measured finding, a check's verdict, a hint,
a solution) is
drawn by :func:`box_html`: one CSS class per kind, styled for the light and the dark theme by
``_static/boxes.css``, and an inline light style as the fallback where that stylesheet is not
loaded (JupyterLab, Binder). ``BOX_COLOURS`` holds that fallback and must match the
stylesheet's light variant (``tests/test_feedback_box_colours.py`` checks both themes).
"""

import ast
import html
import numbers
import re
import textwrap

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


def _inline_code(text):
    """``text`` escaped for HTML, with `backticked` spans shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


class Revealed:
    """A computed answer with its explanation: HTML in Jupyter and the book, text elsewhere."""

    def __init__(self, answer, verdict, explanation):
        self.answer = answer
        self.verdict = verdict  # "" when no prediction was recorded
        self.explanation = " ".join(explanation.split())

    def __str__(self):
        parts = [f"The answer: {self.answer}", self.verdict, self.explanation]
        return "\n".join(textwrap.fill(p, TEXT_WIDTH) for p in parts if p)

    __repr__ = __str__

    def _repr_html_(self):
        body = f"<code>{html.escape(str(self.answer))}</code>"
        for paragraph in (self.verdict, self.explanation):
            if paragraph:
                body += f'<p style="margin:0.4em 0 0">{_inline_code(paragraph)}</p>'
        return box_html("reveal", "The answer:", body)


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


class Unreadable(ValueError):
    """A prediction that cannot be compared with the answer; the message shows the format."""


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _format_of(answer):
    """How a prediction for ``answer`` is written, without giving the answer away."""
    if isinstance(answer, bool):
        return "True or False (without quotes)"
    if isinstance(answer, numbers.Integral):
        return f"a whole number, such as {8 if answer == 7 else 7}"
    if _is_number(answer):
        return f"a number, such as {0.25 if answer == 0.5 else 0.5}"
    if isinstance(answer, str):
        example = "B" if answer.strip().casefold() == "a" else "A"
        return f'text in quotes, such as "{example}"'
    if isinstance(answer, (list, tuple)):
        parts = ", ".join(_format_of(item).split(",")[0] for item in answer)
        return f"a tuple of {len(answer)}: ({parts})"
    return f"a value like the answer's type, {type(answer).__name__}"


def _choice_label(prediction, choices):
    """The label of the choice whose text ``prediction`` repeats, else ``prediction`` itself.

    ``choices`` maps each label a question offers ("A", "B" ...) to the text of that choice;
    a reader who copies the text of a choice means its label.
    """
    if isinstance(choices, dict) and isinstance(prediction, str):
        said = " ".join(prediction.split()).casefold()
        for label, text in choices.items():
            if text is not None and said == " ".join(str(text).split()).casefold():
                return label
    return prediction


def _read(prediction, answer, choices=None):
    """Whether ``prediction`` means ``answer``; raises :class:`Unreadable` if it cannot tell.

    ``choices`` (see :func:`prediction_matches`) are the answers the question offers.
    """
    prediction = _choice_label(prediction, choices)
    if choices is not None and not isinstance(choices, dict):
        offered = [c for c in choices if isinstance(c, str)]
        if isinstance(prediction, str) and any(
            prediction.strip().casefold() == c.strip().casefold() for c in offered
        ):
            return isinstance(answer, str) and (
                prediction.strip().casefold() == answer.strip().casefold()
            )
    if isinstance(prediction, str) and not isinstance(answer, str):
        text = prediction.strip()
        if isinstance(answer, bool):
            if text.casefold() in ("true", "false"):
                return text.casefold() == str(answer).casefold()
            raise Unreadable(_format_of(answer))
        try:
            prediction = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise Unreadable(_format_of(answer)) from None
        if isinstance(prediction, str):
            raise Unreadable(_format_of(answer))
    if isinstance(answer, bool) or isinstance(prediction, bool):
        if isinstance(answer, bool) and isinstance(prediction, bool):
            return prediction == answer
        raise Unreadable(_format_of(answer))
    if _is_number(answer):
        if _is_number(prediction):
            return prediction == answer
        raise Unreadable(_format_of(answer))
    if isinstance(answer, str):
        if isinstance(prediction, str):
            return prediction.strip().casefold() == answer.strip().casefold()
        if _is_number(prediction):
            return str(prediction) == answer.strip()
        raise Unreadable(_format_of(answer))
    if isinstance(answer, (list, tuple)):
        if not isinstance(prediction, (list, tuple)):
            raise Unreadable(_format_of(answer))
        if len(prediction) != len(answer):
            return False
        return all(_read(p, a) for p, a in zip(prediction, answer, strict=True))
    return prediction == answer


def prediction_matches(prediction, answer, choices=None):
    """Whether ``prediction`` says what ``answer`` says, read as a reader means it.

    Text compares without case or surrounding spaces ("b" means "B", "No" means "no"); a number
    matches a number of equal value (4.0 means 4, and "4" means 4); "True" and "False" mean the
    booleans, but 0 and 1 do not; a list matches a tuple element by element. A prediction that
    cannot be read as the answer's kind does not match.

    ``choices`` is what the question offers, when it offers something: a dict from each label
    to the text of its choice (``{"A": "d_out", "B": "num_heads * d_out"}``: the text of a
    choice means its label), or a sequence of the answers it offers (``(1, 2, 3, "spread")``:
    each of them is a readable answer, whatever type the right one has).
    """
    try:
        return bool(_read(prediction, answer, choices))
    except Unreadable:
        return False
    except Exception:  # an exotic object that cannot even be compared
        return False


def _verdict(prediction, answer, matches, choices=None):
    """The line that judges the prediction, or says how to write one that can be judged."""
    if matches is None:
        try:
            right = bool(_read(prediction, answer, choices))
        except Exception as error:
            shape = str(error) if isinstance(error, Unreadable) else _format_of(answer)
            return (
                f"Your prediction, {prediction!r}, cannot be read as this "
                f"answer: write it as {shape}."
            )
    else:
        right = matches(prediction, answer)
    outcome = "matches the answer" if right else "is not what the code computes"
    return f"Your prediction, {prediction!r}, {outcome}."


def reveal(answer, prediction=None, explanation="", *, choices=None, matches=None):
    """Show the computed ``answer``, the verdict on the reader's ``prediction``, and why.

    ``matches(prediction, answer)`` decides whether the prediction was right (default:
    :func:`prediction_matches`, which also explains a prediction it cannot read);
    ``explanation`` says why the answer is what it is. With no prediction recorded there is no
    verdict: the answer speaks for itself. ``choices`` are the answers the question offers
    (see :func:`prediction_matches`).
    """
    verdict = "" if prediction is None else _verdict(prediction, answer, matches, choices)
    _show(Revealed(answer, verdict, explanation))
