"""The check core: :class:`CheckResult`, :class:`Mistake`, :func:`never_raises`; what every
check tells alike (:func:`told_result`, :func:`same`, :func:`first_difference`); the reader's
module run as checks run it (:func:`evaluating`)."""

import contextlib
import functools
import html
import inspect
import re
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

#: The book's package ("mha"); its checks, starting classes and exercises (whose solutions are
#: the reader's answers) are the reader's to use: none is the book at work.
PACKAGE = __package__.rpartition(".")[0]
READERS = (__package__, f"{PACKAGE}.starting")


def is_book_code(name):
    """Whether the module called ``name`` is the book's own code, not one of :data:`READERS`'."""
    theirs = name.startswith(READERS) or name.endswith("_exercise")
    return name.startswith(PACKAGE + ".") and not theirs


#: The names of the book's functions that do an exercise's work: a call of one is the book at work.
WORK = ("forward", "absorbed", "attend_to_cache", "up_key_blocks", "value_out_blocks", "append")


@dataclass(frozen=True)
class Mistake:
    """One known mistake: how to recognise it, and what to tell the reader about it."""

    name: str
    message: str
    detect: Callable[..., bool]

    def found_in(self, *evidence):
        """Whether ``detect`` recognises the mistake; a detector that fails recognises nothing."""
        return attempt(lambda: bool(self.detect(*evidence))) is True


def fill(message, evidence, **known):
    """``message``, each ``{fact}`` replaced by ``known[fact]`` or ``evidence.fact`` ("?" for one
    it cannot state): the evidence computes a fact only when a message quotes it."""

    class Facts(dict):
        def __missing__(self, key):
            fact = attempt(getattr, evidence, key)
            return "?" if isinstance(fact, Exception) else fact

    return message.format_map(Facts(known))


def kind_of(value):
    """What ``value`` is, in words: "None", "a list", "an int", "a torch.Size", "the function f"."""
    if value is None:
        return "None"
    if inspect.isfunction(value) or inspect.ismethod(value):
        return f"the function {value.__name__}"
    package = type(value).__module__.split(".")[0]
    name = type(value).__name__ if package == "builtins" else f"{package}.{type(value).__name__}"
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def first_mistake(catalogue, *evidence):
    """The first mistake in ``catalogue`` recognised in ``evidence``, or ``None``."""
    return next((mistake for mistake in catalogue if mistake.found_in(*evidence)), None)


def attempt(function, *args, **kwargs):
    """``function(*args, **kwargs)``, or the exception it raised, as a value."""
    try:
        return function(*args, **kwargs)
    except Exception as error:
        return error


def describe_error(error):
    """``TypeError: message``: what the reader needs from an exception, without a traceback (nor a
    last full stop: the words after it are the check's)."""
    return ": ".join(filter(None, (type(error).__name__, str(error).strip()))).rstrip(".")


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


def book_modules():
    """The module classes with their own forward in the book's modules loaded now (not its checks
    nor its starting classes)."""
    found = set()
    for name, module in list(sys.modules.items()):
        book = module and is_book_code(name)
        for value in list(vars(module).values()) if book else ():
            ours = isinstance(value, type) and value.__module__ == name and "forward" in vars(value)
            if ours and issubclass(value, torch.nn.Module):
                found.add(value)
    return tuple(found)


def name_of(cls):
    """``cls.__name__``, or "your class" when it has none it will give."""
    name = attempt(getattr, cls, "__name__")
    return "your class" if isinstance(name, Exception) else name


class BookCalls(TorchFunctionMode):
    """While on, ``calls`` lists the book's forwards at work ("MultiHeadAttention.forward") when
    torch is called, whatever the route (super(), a saved reference, a module inside, a module
    loaded later): a :data:`WORK` function's code in a book module, five frames up or fewer."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        frame = sys._getframe(1)
        for _ in range(5):
            module, code = frame.f_globals.get("__name__", ""), frame.f_code
            if is_book_code(module) and code.co_name in WORK and code.co_qualname not in self.calls:
                self.calls.append(code.co_qualname)
            frame = frame.f_back or frame
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def book_calls():
    """The book's forwards that run while it lasts, as a list (:class:`BookCalls`)."""
    with BookCalls() as watch:
        yield watch.calls


def wrapped(text):
    """``text`` folded at 79 characters (what a phone or the book's code column shows uncut), its
    breaks kept; a short parenthesised group such as ``(b, num_tokens, d_out)`` is never split."""
    groups = re.compile(r"\([^()\n]{0,40}\)")
    lines = (groups.sub(lambda m: m[0].replace(" ", "\0"), line) for line in text.split("\n"))
    return "\n".join(textwrap.fill(line, 79) for line in lines).replace("\0", " ")


def same(output, expected):
    """Equal shapes and dtypes, values within rtol 1e-4, atol 1e-5 in float64 (another order or
    CPU passes, every catalogued mistake differs by far more), nan where ``expected`` has it, not
    everywhere."""
    return (
        isinstance(output, torch.Tensor)
        and isinstance(expected, torch.Tensor)
        and output.shape == expected.shape
        and output.dtype == expected.dtype
        and not bool(output.isnan().all())
        and torch.allclose(output.double(), expected.double(), rtol=1e-4, atol=1e-5, equal_nan=True)
    )


NAN = ("a -inf met a 0 (0 · -inf is nan), as a mask multiplied by -inf makes. Hide scores "
       "with masked_fill(mask, -torch.inf) (or a bool mask).")  # fmt: skip


def told_result(output, want, who="Your forward"):
    """What is wrong with ``output`` before its values, with the shapes named, or None: None, no
    tensor, no floating point numbers, not ``want``'s shape (the right output, or its shape), all
    nan."""
    shape = tuple(getattr(want, "shape", want))
    if output is None or not isinstance(output, torch.Tensor):
        forgot = " Did it forget to return?" if output is None else ""
        return f"{who} returned {kind_of(output)}, not a tensor of shape {shape}.{forgot}"
    if not output.is_floating_point():
        return f"{who} returned a tensor of {output.dtype}, not of floating point numbers."
    if (got := tuple(output.shape)) != shape:
        extra = " If the heads are still separate, merge them." if len(got) > len(shape) else ""
        extra = " Its first two axes are swapped." if got == (*shape[1::-1], *shape[2:]) else extra
        return f"{who} returned a tensor of shape {got}; the output is {shape}.{extra}"
    if isinstance(want, torch.Tensor) and output.dtype != want.dtype:
        return f"{who} returned {output.dtype} numbers; the output is {want.dtype}, as x is."
    if output.numel() and bool(output.isnan().all()):  # the right output never is
        return f"{who} returned nan everywhere: {NAN}"
    return None


@dataclass(frozen=True)
class Step:
    """One step of an exercise's computation, in order: ``right(config)`` its right tensor, or a
    tuple of the forms it may take (one head's slice, scaled or not), and the hint covering it."""

    name: str  # "the attention weights (mask, scale, softmax)"
    hint: int
    right: Callable


class Seen(TorchFunctionMode):
    """While on, notes in ``appeared`` each of ``targets`` (name: tensors) a torch call returned
    or was given."""

    def __init__(self, targets):
        super().__init__()
        self.targets, self.appeared = targets, set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for seen in (result, *args):  # an argument too: a tensor filled in place shows when used
            found = (n for n, forms in self.targets.items() if any(same(seen, f) for f in forms))
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
