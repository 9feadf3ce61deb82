"""An exercise's check as data (AUTHORING.md): buggy references judged by :func:`run_catalogue`."""

from collections.abc import Callable
from dataclasses import dataclass

from .core import CheckResult, describe_error, fill
from .facts import Mistake, attempt
from .reference import same


@dataclass(frozen=True)
class Buggy(Mistake):
    """A known mistake as a buggy reference, ``detect`` computing its wrong output: found (by
    ``first_mistake``) where that equals ``evidence.output`` and ``evidence.right`` does not."""

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
    raised: str = "Your code raised {error} on one of the check's inputs. Fix that first."


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
    told = c.raised if error else c.praise if passed else next(found, c.unknown)
    return CheckResult(passed, fill(told, evidence, error=describe_error(error) if error else "?"))
