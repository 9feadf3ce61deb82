"""Checks as data: a :class:`Catalogue` of :class:`Buggy` references (one per mistake), run on
an answer by :func:`run_catalogue`."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from .core import (
    CheckResult,
    Mistake,
    attempt,
    describe_error,
    fill,
    first_difference,
    same,
    told_result,
)


class Buggy(Mistake):  # a frozen dataclass, as Mistake is
    """A mistake as a buggy reference: ``detect(evidence)`` is the wrong output it makes."""

    def found_in(self, evidence):
        output, right = evidence.output, attempt(lambda: evidence.right)
        return not same(output, right) and same(output, attempt(self.detect, evidence))


@dataclass(frozen=True)
class Catalogue:
    """``right(config)`` and each mistake's ``detect(config)``, compared with ``answer(config)``;
    ``raised`` and ``unknown`` describe an answer that raises or matches nothing."""

    configurations: tuple
    right: Callable
    mistakes: tuple
    praise: str
    unknown: str
    raised: str = "On one of the check's inputs, your code raised {error}. Fix that first."
    steps: tuple = ()  # core.Step: the unknown message says where an answer first differs


def run_catalogue(catalogue, answer, evidence=None):
    """Passed if ``answer`` computes the right output on every configuration, else the first buggy
    reference it matches, or ``unknown``; ``evidence`` (and ``{error}``) fill the messages."""
    c = catalogue
    outputs = [attempt(answer, config) for config in c.configurations]
    error = next((o for o in outputs if isinstance(o, Exception)), None)

    def matches(reference):  # a reference that raises matches nothing
        return all(same(o, attempt(reference, x)) for o, x in zip(outputs, c.configurations))

    passed = error is None and matches(c.right)
    found = (buggy.message for buggy in c.mistakes if matches(buggy.detect))
    told = c.raised if error else c.praise if passed else next(found, None)
    if told is None:  # no entry explains it: its shape or kind (the core's words), or its step
        rights = [attempt(c.right, x) for x in c.configurations]
        o, r, x = next(w for w in zip(outputs, rights, c.configurations) if not same(*w[:2]))
        where = partial(first_difference, c.steps, x, partial(answer, x))  # only when needed
        told = told_result(o, r, "Your function") or c.unknown + where()
    return CheckResult(passed, fill(told, evidence, error=describe_error(error) if error else "?"))
