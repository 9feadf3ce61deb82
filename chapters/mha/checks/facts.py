"""Mistakes (:class:`Mistake`), the words for values and errors, running a module as checks do."""

import contextlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Mistake:
    """One known mistake: how to recognise it, and what to tell the reader about it."""

    name: str
    message: str
    detect: Callable[..., bool]

    def found_in(self, *evidence):
        """Whether ``detect`` recognises the mistake; a detector that fails recognises nothing."""
        return attempt(lambda: bool(self.detect(*evidence))) is True

    def tell(self, evidence):
        """The message, its ``{fact}`` fields filled from ``evidence`` (:func:`fill`)."""
        return fill(self.message, evidence)


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
