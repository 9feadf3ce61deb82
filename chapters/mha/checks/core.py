"""Self-checks for the book's exercises.

The convention, shared by every exercise:

* a check is a function that takes the reader's answer and returns a :class:`CheckResult`
  (``.passed``, ``.feedback``); in Jupyter it renders as a short coloured box;
* a check never raises, whatever it is given, and names the mistake it found;
* mistakes are recognised from a *catalogue*: each :class:`Mistake` knows how to spot itself
  and what to tell the reader, so a new mistake is one new entry;
* modules are run in eval mode under ``no_grad``, and their mode is restored afterwards;
* each exercise is also an :class:`Exercise` with ``check()``, ``hint()`` and ``solution()``,
  in the spirit of Kaggle's learntools.
"""

import contextlib
import html
import inspect
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import torch

#: The longest line a check prints: what a phone or the book's code column shows uncut.
LINE_WIDTH = 79


def wrapped(text):
    """``text`` with every line folded at :data:`LINE_WIDTH` characters, its breaks kept.

    A short parenthesised group, such as a shape ``(b, num_tokens, d_out)`` or a call
    ``transpose(1, 2)``, is never split across lines.
    """

    def keep(group):
        return group.group(0).replace(" ", "\0")

    lines = (re.sub(r"\([^()\n]{0,40}\)", keep, line) for line in text.split("\n"))
    return "\n".join(textwrap.fill(line, LINE_WIDTH) for line in lines).replace("\0", " ")


@dataclass(frozen=True)
class CheckResult:
    """The outcome of a check: did it pass, and what should the reader hear?

    Its box is shown open: it answers the reader's own code. Where a page shows a check's
    feedback on code the reader should first judge alone (a mistakes gallery, cells tagged
    ``feedback``), ``make execute`` stores that box closed behind "Show the check's feedback".
    """

    passed: bool
    feedback: str

    def __str__(self):
        mark = "✓ Correct." if self.passed else "✗ Not yet."
        return wrapped(f"{mark} {self.feedback}")

    __repr__ = __str__

    def _repr_html_(self):
        from ..reveal import box_html

        kind, mark = ("passed", "✓ Correct.") if self.passed else ("failed", "✗ Not yet.")
        return box_html(kind, mark, html.escape(self.feedback).replace("\n", "<br>"))


@dataclass(frozen=True)
class Mistake:
    """One known mistake: how to recognise it, and what to tell the reader about it."""

    name: str
    message: str
    detect: Callable[..., bool]

    def found_in(self, *evidence):
        """Whether ``detect`` recognises the mistake; a detector that fails recognises nothing."""
        try:
            return bool(self.detect(*evidence))
        except Exception:
            return False

    def tell(self, evidence):
        """The message, its ``{fact}`` fields filled from ``evidence``: see :func:`fill`."""
        return fill(self.message, evidence)


def fill(message, evidence):
    """``message``, each ``{fact}`` replaced by ``evidence.fact`` ("?" for one it cannot state).

    Every checker words its messages this way, so a message names the facts it quotes and the
    evidence object computes them only when a message needs them.
    """

    class Facts(dict):
        def __missing__(self, key):
            try:
                return getattr(evidence, key)
            except Exception:
                return "?"

    return message.format_map(Facts())


def kind_of(value):
    """What ``value`` is, in words: "None", "a list", "an int", "a torch.Size", "the function f"."""
    if value is None:
        return "None"
    if inspect.isfunction(value) or inspect.ismethod(value):
        return f"the function {value.__name__}"
    package = type(value).__module__.split(".")[0]
    name = type(value).__name__ if package == "builtins" else f"{package}.{type(value).__name__}"
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def listed(names):
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1])))


def first_mistake(catalogue, *evidence):
    """The first mistake in ``catalogue`` recognised in ``evidence``, or ``None``."""
    return next((mistake for mistake in catalogue if mistake.found_in(*evidence)), None)


def describe_error(error):
    """``TypeError: message``: what the reader needs from an exception, without a traceback."""
    message = str(error).strip()
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


@contextlib.contextmanager
def evaluating(module):
    """Run ``module`` in eval mode under ``no_grad``, then restore every submodule's mode."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            yield module
    finally:
        for m, training in modes:
            m.training = training


def never_raises(check):
    """Wrap a check so that an unexpected failure inside it becomes feedback, not a traceback."""

    def guarded(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except Exception as error:  # a checker must never raise at the reader
            reason = describe_error(error)
            return CheckResult(False, f"The check itself could not run on this answer ({reason}).")

    guarded.__name__ = check.__name__
    guarded.__doc__ = check.__doc__
    guarded.__wrapped__ = check
    return guarded


def highlighted_python(code):
    """``code`` as the HTML of a highlighted code block, ``<div class="highlight"><pre>``: one
    span per token with Pygments' CSS classes, which the book's theme colours (in both of its
    themes) and under which sphinx-copybutton puts a copy button. Pygments comes with IPython,
    so it is there wherever a notebook shows this box."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    spans = highlight(code, PythonLexer(ensurenl=False), HtmlFormatter(nowrap=True))
    spans = spans if code.endswith("\n") else spans.removesuffix("\n")
    return f'<div class="highlight"><pre>{spans}</pre></div>'


@dataclass(frozen=True)
class Note:
    """A hint or a solution, shown as plain text or as a small HTML box, closed until the reader
    opens it.

    A solution (``code=True``) shows its code highlighted, as the book shows code, with a copy
    button in the book (:func:`highlighted_python`).
    """

    title: str
    text: str
    code: bool = False

    def __str__(self):
        body = textwrap.indent(self.text, "    ") if self.code else wrapped(self.text)
        return f"{self.title}:\n{body}"

    __repr__ = __str__

    @property
    def summary(self):
        """What the closed box says: "Show hint 1 of 3", "Show the solution"."""
        words = self.title[0].lower() + self.title[1:]
        return f"Show {words}" if words[-1].isdigit() else f"Show the {words}"

    def _repr_html_(self):
        """The box, its content closed until the reader opens it (:func:`..reveal.collapsed`)."""
        from ..reveal import box_html, collapsed

        if self.code:
            box = box_html("solution", f"{self.title}.", highlighted_python(self.text))
        else:
            box = box_html("hint", f"{self.title}.", html.escape(self.text).replace("\n", "<br>"))
        return collapsed(box, self.summary)


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``check(answer)``, ``hint(n)`` and ``solution()`` in one object.

    ``solution_code`` is the one copy of the solution: either its text, or the class or function
    that solves the exercise (then the solution shows its source, so the code the tests run is
    the code the reader sees).
    """

    checker: Callable[..., CheckResult]
    hints: tuple
    solution_code: object

    def check(self, answer):
        return self.checker(answer)

    def hint(self, n=1):
        count = len(self.hints)
        if isinstance(n, bool) or not isinstance(n, int):
            return Note(
                "Hint",
                f"hint() takes the hint's number, a whole number without quotes: "
                f"hint(1) for the first hint, up to hint({count}). It was given {n!r}.",
            )
        if not 1 <= n <= count:
            return Note("Hint", f"There are {count} hints: ask for hint(1) to hint({count}).")
        return Note(f"Hint {n} of {count}", self.hints[n - 1])

    @property
    def solution_text(self):
        """The solution as the reader should type it."""
        if isinstance(self.solution_code, str):
            return self.solution_code
        return textwrap.dedent(inspect.getsource(self.solution_code)).strip("\n")

    def solution(self):
        return Note("Solution", self.solution_text, code=True)
