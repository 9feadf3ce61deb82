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
import textwrap
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class CheckResult:
    """The outcome of a check: did it pass, and what should the reader hear?"""

    passed: bool
    feedback: str

    def __str__(self):
        mark = "✓ Correct." if self.passed else "✗ Not yet."
        return f"{mark} {self.feedback}"

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
            return CheckResult(False, f"The check itself could not run on this answer ({describe_error(error)}).")

    guarded.__name__ = check.__name__
    guarded.__doc__ = check.__doc__
    guarded.__wrapped__ = check
    return guarded


@dataclass(frozen=True)
class Note:
    """A hint or a solution, shown as plain text or as a small HTML box."""

    title: str
    text: str
    code: bool = False

    def __str__(self):
        return f"{self.title}:\n{textwrap.indent(self.text, '    ') if self.code else self.text}"

    __repr__ = __str__

    def _repr_html_(self):
        from ..reveal import box_html

        body = html.escape(self.text)
        if self.code:
            return box_html("solution", f"{self.title}.", f"<pre>{body}</pre>")
        return box_html("hint", f"{self.title}.", body.replace("\n", "<br>"))


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``check(answer)``, ``hint(n)`` and ``solution()`` in one object."""

    checker: Callable[..., CheckResult]
    hints: tuple
    solution_code: str

    def check(self, answer):
        return self.checker(answer)

    def hint(self, n=1):
        if not 1 <= n <= len(self.hints):
            return Note("Hint", f"There are {len(self.hints)} hints: ask for hint(1) to hint({len(self.hints)}).")
        return Note(f"Hint {n} of {len(self.hints)}", self.hints[n - 1])

    def solution(self):
        return Note("Solution", self.solution_code, code=True)


# ---------------------------------------------------------------------------------------------
# Chapter 2: check_two_dim_output
