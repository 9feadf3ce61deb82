"""Mistakes (:class:`Mistake`), the words for values and errors, and running the reader's module
as checks do, in eval mode (:func:`evaluating`), the book's forwards noted (:func:`book_calls`)."""

import contextlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

#: The book's package ("mha"); its checker and its starting classes are the reader's to use.
PACKAGE = __package__.rpartition(".")[0]
READERS = (__package__, f"{PACKAGE}.starting")
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
            book = module.startswith(PACKAGE + ".") and not module.startswith(READERS)
            if book and code.co_name in WORK and code.co_qualname not in self.calls:
                self.calls.append(code.co_qualname)
            frame = frame.f_back or frame
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def book_calls():
    """The book's forwards that run while it lasts, as a list (:class:`BookCalls`)."""
    with BookCalls() as watch:
        yield watch.calls
