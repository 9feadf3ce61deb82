"""The check core: :class:`CheckResult`, :func:`never_raises`, an :class:`Exercise`'s hints;
what every check tells alike: a result that is no output (:func:`told_result`), :func:`same`;
and where an unexplained answer first differs (:func:`first_difference`)."""

import functools
import html
import inspect
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from .facts import Mistake, attempt, describe_error, evaluating, fill, first_mistake, kind_of  # noqa: F401


def wrapped(text):
    """``text`` folded at 79 characters (what a phone or the book's code column shows uncut), its
    breaks kept; a short parenthesised group such as ``(b, num_tokens, d_out)`` is never split."""
    groups = re.compile(r"\([^()\n]{0,40}\)")
    lines = (groups.sub(lambda m: m[0].replace(" ", "\0"), line) for line in text.split("\n"))
    return "\n".join(textwrap.fill(line, 79) for line in lines).replace("\0", " ")


def same(output, expected):
    """Equal shapes, values within rtol 1e-4, atol 1e-5 in float64 (another order or CPU passes,
    every catalogued mistake differs by far more), nan where ``expected`` has it, not everywhere."""
    return (
        isinstance(output, torch.Tensor)
        and isinstance(expected, torch.Tensor)
        and output.shape == expected.shape
        and output.is_floating_point()
        and not bool(output.isnan().all())
        and torch.allclose(output.double(), expected.double(), rtol=1e-4, atol=1e-5, equal_nan=True)
    )


def told_result(output, want, who="Your forward"):
    """What is wrong with ``output`` before its values, with the shapes named, or None: None, no
    tensor, no floating point numbers, or not ``want``'s shape (the right output, or its shape)."""
    shape = tuple(getattr(want, "shape", want))
    if output is None or not isinstance(output, torch.Tensor):
        forgot = " Did it forget to return?" if output is None else ""
        return f"{who} returned {kind_of(output)}, not a tensor of shape {shape}.{forgot}"
    if not output.is_floating_point():
        return f"{who} returned a tensor of {output.dtype}, not of floating point numbers."
    if (got := tuple(output.shape)) != shape:
        extra = " If the heads are still separate, merge them." if len(got) > len(shape) else ""
        return f"{who} returned a tensor of shape {got}; the output is {shape}.{extra}"
    return None


@dataclass(frozen=True)
class Step:
    """One step of an exercise's computation, in order: ``right(config)`` its right tensor, or a
    tuple of the forms it may take (one head's slice, scaled or not), and the hint covering it."""

    name: str  # "the attention weights (mask, scale, softmax)"
    hint: int
    right: Callable


class Seen(TorchFunctionMode):
    """While on, notes in ``appeared`` each of ``targets`` (name: tensors) a torch call returned."""

    def __init__(self, targets):
        super().__init__()
        self.targets, self.appeared = targets, set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        found = (n for n, forms in self.targets.items() if any(same(result, t) for t in forms))
        self.appeared.update(found)
        return result


def first_difference(steps, config, run):
    """Where ``run()`` (the answer, on ``config``) first leaves the right computation: the first of
    ``steps`` whose tensor never appears, and its hint; "" when the check cannot tell."""
    forms = {s.name: attempt(s.right, config) for s in steps}
    targets = {n: t if isinstance(t, (tuple, list)) else (t,) for n, t in forms.items()}
    with torch.random.fork_rng(devices=[]), torch.no_grad(), Seen(targets) as seen:
        attempt(run)
    first = next((i for i, s in enumerate(steps) if s.name not in seen.appeared), None)
    if first is None:  # every step appeared: the check cannot tell
        return ""
    step, hint = steps[first], f": see hint({steps[first].hint})."
    if not first:
        return f" Your tensors differ from the reference's already at {step.name}{hint}"
    upto = f"match the reference's up to {steps[first - 1].name}"
    return f" Your tensors {upto} and first differ at {step.name}{hint}"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of a check, shown open (a gallery's ``feedback`` cells are stored closed)."""

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


def never_raises(check, name=None, doc=None):
    """Wrap a check so that an unexpected failure inside it becomes feedback, not a traceback.
    ``name`` and ``doc``: what ``help()`` shows the reader for a ``partial``, which has neither."""

    @functools.wraps(check)  # its name, its docstring, and __wrapped__: the check itself
    def guarded(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except Exception as error:  # a checker must never raise at the reader
            why = describe_error(error)
            return CheckResult(False, f"The check itself could not run on this answer ({why}).")

    guarded.__name__ = guarded.__qualname__ = name or guarded.__name__
    guarded.__doc__ = doc or guarded.__doc__
    return guarded


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
        """The box, its content closed until the reader opens it (:func:`..reveal.collapsed`)."""
        from ..reveal import box_html, collapsed

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
