"""The book's classes (:func:`book_modules`); which of their forwards run (:func:`book_calls`)."""

import contextlib
import functools
import sys

import torch

from .. import attention, gqa
from .facts import attempt

#: The book's package ("mha"); its checker and its starting classes are the reader's to use.
PACKAGE = __package__.rpartition(".")[0]
READERS = (__package__, f"{PACKAGE}.starting")
#: Every book forward calls one, whatever route (super(), a saved reference, a module inside, a
#: forward taken before the check).
GUARDS = (attention.check_input, gqa.check_length, gqa.check_one_token)


def loaded():
    """The book's modules loaded now (its checks too), as (name, module) pairs."""
    return [(n, m) for n, m in list(sys.modules.items()) if n.startswith(PACKAGE + ".") and m]


def book_modules():
    """The module classes with their own forward that the book's modules define (not its checks
    nor its starting classes)."""
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
    calls, patched = [], []

    def forward_recorder(cls, forward):
        @functools.wraps(forward)  # its source stays the book's (inspect unwraps)
        def recorded(self, *args, **kwargs):
            calls.append(f"{cls.__name__}.forward")
            return forward(self, *args, **kwargs)

        return recorded

    def guard_recorder(guard):
        return lambda *args: calls.append(sys._getframe(1).f_code.co_qualname) or guard(*args)

    for cls in book_modules():
        patched.append((cls, "forward", vars(cls)["forward"]))
        cls.forward = forward_recorder(cls, vars(cls)["forward"])
    for _, module in loaded():
        for name, value in list(vars(module).items()):
            if any(value is guard for guard in GUARDS):
                patched.append((module, name, value))
                setattr(module, name, guard_recorder(value))
    try:
        yield calls
    finally:
        for owner, name, value in reversed(patched):
            setattr(owner, name, value)
