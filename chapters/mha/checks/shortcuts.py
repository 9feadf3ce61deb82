"""Natural shortcuts: the starting code or the book's class, its forwards, torch's attention."""

import ast
import inspect
import textwrap

import torch

from .core import attempt, book_modules, kind_of, name_of
from .core import book_calls as book_calls  # re-exported: the shortcuts in one place


def torch_message(watch, here, kernel=True):
    """What to say when a forward hands attention to PyTorch's layer (``kernel``: or kernel)."""
    what = "runs torch.nn.MultiheadAttention (or multi_head_attention_forward)"
    if "layer" not in watch.seen:
        grouped = " (with enable_gqa=True)" if "grouped" in watch.seen else ""
        what = f"calls torch.nn.functional.scaled_dot_product_attention{grouped}"
    told = f"Your forward {what}, PyTorch's attention: those steps are not yours. {here}"
    return told if "layer" in watch.seen or kernel and "kernel" in watch.seen else None


def _code(forward):
    """The code of ``forward`` without its layout and comments, or the exception (no source)."""
    return attempt(lambda: ast.dump(ast.parse(textwrap.dedent(inspect.getsource(forward)))))


def refusal(cls, start, own, inherited, method="forward"):
    """What to say when ``cls`` is no class of the reader's own, or None. ``own`` True: it must be
    built on ``start``; None: any module class but the book's runs as it is; False: none built on
    another book class. ``inherited``: said of the starting ``method`` ("" accepts it)."""
    book, name, strict = book_modules(), name_of(cls), own is not None
    if not isinstance(cls, type):
        kind = f"the function {name}" if callable(cls) else kind_of(cls)
        if isinstance(cls, torch.nn.Module):
            kind = f"an instance of {type(cls).__name__}, not the class"
        return f"The check expects a class, but got {kind}: pass your class itself, by its name."
    if not issubclass(cls, torch.nn.Module):
        return f"{name} is a class, but not an nn.Module: subclass {start.__name__}."
    if cls in book or strict and issubclass(cls, book) and not issubclass(cls, start):
        return (f"{name} is one of the book's own modules: the book's own class, or built on one. "
                f"Subclass {start.__name__} and write the {method} yourself.")  # fmt: skip
    if own and not issubclass(cls, start):
        return f"{name} does not start from {start.__name__}, so the check cannot know its layers."
    if inherited is not None and cls.forward is start.forward:
        return inherited.format(name=name)
    forwards = {b.forward: b.__name__ for b in book}
    if taken := forwards.get(cls.forward):
        return (f"{name}.forward is {taken}.forward, the book's own: what runs is the book's "
                f"{taken}.forward, not yours. Write your own.")  # fmt: skip
    if strict and cls.forward is torch.nn.Module.forward:
        return f"{name} has no forward method at all: write def forward(self, x): inside it."
    mine = strict and _code(cls.forward)
    pasted = [b for f, b in forwards.items() if mine and _code(f) == mine]
    return f"{name}.forward is the book's {pasted[0]}.forward, line for line." if pasted else None
