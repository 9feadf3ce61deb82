"""An exercise as the reader meets it: ``check``, ``hint(n)`` and ``solution()`` in one
:class:`Exercise`, each hint or solution a :class:`Note` closed until the reader opens it. Its
checker is one of :mod:`.checks`."""

import html
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from .checks.core import CheckResult, wrapped


def highlighted_python(code):
    """``code`` as a highlighted block, ``<div class="highlight"><pre>``: Pygments' classes,
    which the book's theme colours and sphinx-copybutton finds (Pygments comes with IPython)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    spans = highlight(code, PythonLexer(ensurenl=False), HtmlFormatter(nowrap=True))
    spans = spans if code.endswith("\n") else spans.removesuffix("\n")
    return f'<div class="highlight"><pre>{spans}</pre></div>'


@dataclass(frozen=True)
class Note:
    """A hint or a solution (``code=True``: highlighted, copyable), as text or a closed HTML box."""

    title: str
    text: str
    code: bool = False

    def __str__(self):
        body = textwrap.indent(self.text, "    ") if self.code else wrapped(self.text)
        return f"{self.title}:\n{body}"

    __repr__ = __str__

    def _repr_html_(self):
        """The box, its content closed until the reader opens it (:func:`.reveal.collapsed`)."""
        from .reveal import box_html, collapsed

        text = html.escape(self.text).replace("\n", "<br>")
        kind, body = ("solution", highlighted_python(self.text)) if self.code else ("hint", text)
        words = self.title[0].lower() + self.title[1:]  # "Show hint 1 of 3", "Show the solution"
        summary = f"Show {words}" if words[-1].isdigit() else f"Show the {words}"
        return collapsed(box_html(kind, f"{self.title}.", body), summary)


@dataclass(frozen=True)
class Exercise:
    """``check(answer)``, ``hint(n)`` and ``solution()`` in one object. ``solution_code`` is
    the solution's one copy: its text, or the class or function whose source the reader sees."""

    checker: Callable[..., CheckResult]
    hints: tuple
    solution_code: object

    def check(self, answer):
        return self.checker(answer)

    def hint(self, n=1):
        count = len(self.hints)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= count:
            told = f"ask for hint(1) to hint({count}), a whole number without quotes"
            return Note("Hint", f"There are {count} hints: {told} (it was given {n!r}).")
        return Note(f"Hint {n} of {count}", self.hints[n - 1])

    @property
    def solution_text(self):
        """The solution as the reader should type it."""
        if isinstance(self.solution_code, str):
            return self.solution_code
        return textwrap.dedent(inspect.getsource(self.solution_code)).strip("\n")

    def solution(self):
        return Note("Solution", self.solution_text, code=True)
