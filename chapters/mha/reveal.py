"""Predict-then-reveal: the reader records a prediction, the reveal cell computes the answer.

The answer is shown as a box that leads with the computed answer, then the verdict on the
reader's prediction (only if one was recorded), then the explanation. In Jupyter and in the
book it is HTML that wraps to any width; in a terminal, or wherever HTML is not shown, it is
plain text wrapped at ``TEXT_WIDTH`` characters.

Every coloured box the book shows (this answer, a check's verdict, a hint, a solution) is
drawn by :func:`box_html`: one CSS class per kind, styled for the light and the dark theme by
``_static/boxes.css``, and an inline light style as the fallback where that stylesheet is not
loaded (JupyterLab, Binder). ``BOX_COLOURS`` holds that fallback and must match the
stylesheet's light variant (``tests/test_feedback_box_colours.py`` checks both themes).
"""

import html
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


def reveal(answer, prediction=None, explanation="", *, matches=None):
    """Show the computed ``answer``, the verdict on the reader's ``prediction``, and why.

    ``matches(prediction, answer)`` decides whether the prediction was right (default: ``==``);
    ``explanation`` says why the answer is what it is. With no prediction recorded there is no
    verdict: the answer speaks for itself.
    """
    verdict = ""
    if prediction is not None:
        right = matches(prediction, answer) if matches else prediction == answer
        outcome = "matches the answer" if right else "is not what the code computes"
        verdict = f"Your prediction, {prediction!r}, {outcome}."
    _show(Revealed(answer, verdict, explanation))
