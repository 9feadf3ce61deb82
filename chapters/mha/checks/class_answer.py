"""Answers that are classes written from a skeleton (chapters 1 and 3), and their shortcuts.

The reader subclasses a :class:`Skeleton` (the constructor given, a ``forward`` that raises) and
writes ``forward`` (the untouched skeleton raises NotImplementedError when the check runs it).
:func:`class_problem` names an answer that is not such a class, or is the book's own class or
``forward`` (by identity); :func:`watching` records, while the check runs
the answer, the book's ``forward`` methods it calls (each replaced by a recorder for that time)
and PyTorch's own attention (a :class:`.shortcuts.Watch`). A determined reader
can get round both; they catch the natural shortcuts, not tampering.
"""

import contextlib
import sys

import torch

from .core import kind_of
from .shortcuts import Watch

#: The book's package ("mha"); its checker ("mha.checks") is the reader's to use.
PACKAGE, CHECKER = __package__.rpartition(".")[0], __package__


class Skeleton(torch.nn.Module):
    """A practice's starting point: the constructor is given, ``forward`` is for the reader."""

    def forward(self, x):
        raise NotImplementedError(f"write the forward pass of {type(self).__name__}")


def book_classes():
    """The module classes of the book's modules loaded now that define their own ``forward``."""
    found = []
    for name, module in list(sys.modules.items()):
        if not name.startswith(PACKAGE + ".") or name.startswith(CHECKER):
            continue
        for value in list(vars(module).values()):
            is_module = isinstance(value, type) and issubclass(value, torch.nn.Module)
            if is_module and value.__module__ == name and "forward" in vars(value):
                found.append(value)
    return found


def name_of(cls):
    """``cls.__name__``, or "your class" when it has none it will give."""
    try:
        return cls.__name__
    except Exception:
        return "your class"


def class_problem(cls, check, example, what):
    """What is wrong with ``cls`` before it runs, in words, or ``None``: not a module class, or
    the book's own class or ``forward`` (``what`` names the reader's part of the work)."""
    name = name_of(cls) if isinstance(cls, type) else type(cls).__name__
    if cls is None:
        return f"{check} got None. Run the cell that defines your class, then {check}({example})."
    if isinstance(cls, torch.nn.Module):
        return (
            f"You passed an instance of {name}, not the class. Pass the class itself, "
            f"{check}({name}): the check builds its own instances, with several sizes."
        )
    if not isinstance(cls, type):
        return f"{check} expects a class, but got {kind_of(cls)}. Pass the class by its name."
    if not issubclass(cls, torch.nn.Module):
        return f"{name} is a class, but not an nn.Module: subclass the chapter's skeleton."
    for book in book_classes():
        if cls is book:
            return (
                f"{name} is the book's own class: its forward is the one this practice asks "
                f"you to write. Subclass the skeleton and write {what} yourself."
            )
        if cls.forward is vars(book)["forward"]:
            return (
                f"{name}.forward is {book.__name__}.forward, the book's own: nothing in it is "
                f"yours yet. Subclass the skeleton and write {what} in your own forward."
            )
    return None


#: PyTorch's own attention, as the messages name it.
TORCH_NAMES = {
    "kernel": "torch.nn.functional.scaled_dot_product_attention, PyTorch's fused kernel",
    "layer": "torch.nn.MultiheadAttention, PyTorch's own attention layer",
}


@contextlib.contextmanager
def watching():
    """Yield ``(book, watch)``: the names of the book classes whose ``forward`` ran, and a
    :class:`.shortcuts.Watch` (torch's own dropout) of PyTorch's attention, while the block runs."""
    book, watch, saved = [], Watch(fixed=False), []

    def recorder(cls, forward):
        def recorded(self, *args, **kwargs):
            book.append(cls.__name__)
            return forward(self, *args, **kwargs)

        return recorded

    try:
        for cls in book_classes():
            saved.append((cls, vars(cls)["forward"]))
            cls.forward = recorder(cls, vars(cls)["forward"])
        with watch:
            yield book, watch
    finally:
        for cls, forward in saved:
            cls.forward = forward


def delegation(cls, book, what):
    """What to say when ``cls``'s forward hands its work to the book classes in ``book``."""
    names = " and ".join(f"{name}.forward" for name in sorted(set(book)))
    return (
        f"{name_of(cls)}.forward hands its work to the book's {names}, so it does not compute "
        f"attention itself. Write {what} in your own forward, from the skeleton's layers."
    )
