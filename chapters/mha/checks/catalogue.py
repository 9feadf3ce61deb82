"""An exercise's check as data (AUTHORING.md): the configurations to try, the right reference
and one buggy reference per known mistake (:class:`Buggy`), judged by :func:`run_catalogue`."""

from collections.abc import Callable
from dataclasses import dataclass

from .core import CheckResult, describe_error, fill
from .facts import Mistake, attempt
from .reference import same


@dataclass(frozen=True)
class Buggy(Mistake):
    """A known mistake as a buggy reference: ``detect`` computes the wrong output it makes. In a
    :func:`.core.first_mistake` catalogue it is found where ``evidence.output`` equals that output
    and differs from ``evidence.right`` (where both agree, the answer is right)."""

    def found_in(self, evidence):
        output, right = evidence.output, attempt(lambda: evidence.right)
        return not same(output, right) and same(output, attempt(self.detect, evidence))


@dataclass(frozen=True)
class Catalogue:
    """An exercise's check as data: ``right(config)`` and each mistake's ``detect(config)`` are
    compared with ``answer(config)`` on every configuration; ``raised`` and ``unknown`` describe
    an answer that raises or matches nothing."""

    configurations: tuple
    right: Callable
    mistakes: tuple
    praise: str
    unknown: str
    raised: str = "Your code raised {error} on one of the check's inputs. Fix that first."


def run_catalogue(catalogue, answer, evidence=None):
    """The verdict on ``answer``: passed if it computes the right output on every configuration,
    otherwise the first buggy reference it matches, or ``catalogue.unknown``.

    ``evidence`` fills the messages' ``{fact}`` fields; ``{error}`` is always available.
    """
    outputs = [attempt(answer, config) for config in catalogue.configurations]
    error = next((o for o in outputs if isinstance(o, Exception)), None)
    error_text = describe_error(error) if error else "?"

    def matches(reference):  # a reference that raises matches nothing
        configurations = zip(outputs, catalogue.configurations, strict=True)
        return all(same(output, attempt(reference, config)) for output, config in configurations)

    if error is not None:
        return CheckResult(False, fill(catalogue.raised, evidence, error=error_text))
    if matches(catalogue.right):
        return CheckResult(True, fill(catalogue.praise, evidence, error=error_text))
    found = (buggy.message for buggy in catalogue.mistakes if matches(buggy.detect))
    return CheckResult(False, fill(next(found, catalogue.unknown), evidence, error=error_text))
