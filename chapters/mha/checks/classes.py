"""Exercises whose answer is a class: what to say when it is not one, and shortcuts seen through.

Chapters 1 and 3 give the reader a *skeleton*: a base class with the constructor and a
``forward`` that raises ``NotImplementedError``. The reader subclasses it and writes ``forward``.
Such a practice must not pass without the skill, so the checks here recognise

* something that is not a module class at all (``None``, an instance, a function);
* the skeleton untouched, or subclassed with nothing written (its placeholder still raises);
* a class whose ``forward`` *is* one of the book's own, or only hands the work to one
  (``super().forward(x)`` in a subclass of a book class, a saved reference to a book
  ``forward``, or a book module built inside).
"""

import contextlib
import inspect
import sys

import torch

from .core import Mistake, kind_of


class Skeleton(torch.nn.Module):
    """A practice's starting point: the constructor is given, ``forward`` is for the reader."""

    def forward(self, x):
        raise NotImplementedError(f"write the forward pass of {type(self).__name__}")


def book_classes():
    """The book's own modules (``mha.attention``, ``mha.variants``) that define a forward."""
    from .. import attention, variants  # imported here: mha.checks loads without them

    found = []
    for module in (attention, variants):
        for _, value in inspect.getmembers(module, inspect.isclass):
            is_book = value.__module__ == module.__name__
            if is_book and issubclass(value, torch.nn.Module) and "forward" in vars(value):
                found.append(value)
    return found


def book_forward_of(cls, allowed=()):
    """The book class whose very ``forward`` function ``cls`` uses, or ``None``."""
    forward = getattr(cls, "forward", None)
    for book in book_classes():
        if book not in allowed and vars(book)["forward"] is forward:
            return book
    return None


@contextlib.contextmanager
def watching_calls(code):
    """Record the name of every function of ``code`` (``{code object: name}``) that runs.

    A profiler compares the code of every Python call that starts with ``code``, so a call
    is seen whatever route it took: directly, through ``super()``, through a reference saved
    beforehand, or through a module built inside the block. The names go to the yielded list.
    """
    called = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in code:
            called.append(code[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(previous)


def watching_book_forwards(allowed=()):
    """:func:`watching_calls` for the ``forward`` of every book class not in ``allowed``."""
    return watching_calls(
        {
            vars(book)["forward"].__code__: book.__name__
            for book in book_classes()
            if book not in allowed
        }
    )


def untouched(cls, skeleton):
    """Whether ``cls`` still uses ``skeleton``'s placeholder ``forward``."""
    return isinstance(cls, type) and getattr(cls, "forward", None) is skeleton.forward


def class_answer_mistakes(check, example):
    """The mistakes of an answer that should be a module class, for the check named ``check``.

    ``example`` is the name of the class the chapter asks for, as the messages quote it.
    """
    return (
        Mistake(
            "nothing passed",
            f"{check} got None. Run the cell that defines your class, then pass the class "
            f"itself: {check}({example}).",
            lambda answer: answer is None,
        ),
        Mistake(
            "an instance instead of the class",
            f"You passed an instance of {{name}}, not the class. Pass the class itself, "
            f"{check}({{name}}): the check builds its own instances, with several sizes.",
            lambda answer: isinstance(answer, torch.nn.Module),
        ),
        Mistake(
            "not a class",
            f"{check} expects a class, but got {{kind}}. Pass the class you defined with "
            "class ...: by its name, without calling it.",
            lambda answer: not isinstance(answer, type),
        ),
        Mistake(
            "not an nn.Module",
            "{name} is a class, but not an nn.Module. Start its definition from the skeleton "
            "the chapter gives, so that it holds layers and can be called on a tensor.",
            lambda answer: not issubclass(answer, torch.nn.Module),
        ),
    )


class AnswerFacts:
    """The facts the not-a-class messages quote about an answer."""

    def __init__(self, answer):
        self.answer = answer

    @property
    def name(self):
        answer = self.answer
        return answer.__name__ if isinstance(answer, type) else type(answer).__name__

    @property
    def kind(self):
        return kind_of(self.answer)


def book_shortcut_message(cls, book, what):
    """What to say when ``cls``'s forward is, or only calls, ``book``'s forward."""
    name = getattr(cls, "__name__", "your class")
    if book is cls:
        return (
            f"{name} is the book's own class: its forward is the one this practice asks you "
            f"to write. Subclass the skeleton and write {what} yourself."
        )
    return (
        f"{name}.forward is {book.__name__}.forward, the book's own: nothing in it is yours yet. "
        f"Subclass the skeleton and write {what} in your own forward."
    )


def delegation_message(cls, called, what):
    """What to say when ``cls``'s forward hands the work to the book modules in ``called``."""
    name = getattr(cls, "__name__", "your class")
    books = sorted(set(called))
    return (
        f"{name}.forward hands its work to the book's {' and '.join(books)}.forward (through "
        "super().forward, or a book module it calls), so it does not compute attention itself. "
        f"Write {what} in your own forward, from the layers the skeleton gives you."
    )
