"""Mistakes (:class:`Mistake`), the words for values and errors, and running the reader's module
as checks do, in eval mode (:func:`evaluating`), the book's forwards noted (:func:`book_calls`)."""

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from unittest import mock

import torch

from .. import attention, gqa

#: The book's package ("mha"); its checker and its starting classes are the reader's to use.
PACKAGE = __package__.rpartition(".")[0]
READERS = (__package__, f"{PACKAGE}.starting")
#: Every book forward calls one, whatever route (super(), a saved reference, a module inside, a
#: forward taken before the check).
GUARDS = (attention.check_input, gqa.check_length, gqa.check_one_token)


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
    """``TypeError: message``: what the reader needs from an exception, without a traceback."""
    return ": ".join(filter(None, (type(error).__name__, str(error).strip())))


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


def loaded():
    """The book's modules loaded now (its checks too), as (name, module) pairs."""
    return [(n, m) for n, m in list(sys.modules.items()) if n.startswith(PACKAGE + ".") and m]


def book_modules():
    """The module classes with their own forward in the book's modules (not checks nor starting)."""
    found = set()
    for name, module in loaded():
        for value in list(vars(module).values()):
            ours = isinstance(value, type) and value.__module__ == name and "forward" in vars(value)
            if ours and issubclass(value, torch.nn.Module) and not name.startswith(READERS):
                found.add(value)
    return tuple(found)


def name_of(cls):
    """``cls.__name__``, or "your class" when it has none it will give."""
    name = attempt(getattr, cls, "__name__")
    return "your class" if isinstance(name, Exception) else name


@contextlib.contextmanager
def book_calls():
    """Record the book's forwards that run ("MultiHeadAttention.forward"), whatever the route:
    each book forward and each of the :data:`GUARDS` is replaced by a recorder while it lasts."""
    calls = []

    def forward_recorder(cls, forward):
        @functools.wraps(forward)  # its source stays the book's (inspect unwraps)
        def recorded(self, *args, **kwargs):
            calls.append(f"{cls.__name__}.forward")
            return forward(self, *args, **kwargs)

        return recorded

    def guard_recorder(guard):
        return lambda *args: calls.append(sys._getframe(1).f_code.co_qualname) or guard(*args)

    with contextlib.ExitStack() as patches:  # each undone on the way out
        for cls in book_modules():
            forward = forward_recorder(cls, vars(cls)["forward"])
            patches.enter_context(mock.patch.object(cls, "forward", forward))
        for _, module in loaded():
            for name, value in list(vars(module).items()):
                if any(value is guard for guard in GUARDS):
                    patches.enter_context(mock.patch.object(module, name, guard_recorder(value)))
        yield calls
