"""An exercise's check as data: configurations, the right reference, and buggy references.

How an exercise's check is written (the whole of it, for an exercise whose answer is judged by
what it computes):

1. **Configurations.** A tuple of inputs to try, each whatever the reference and the answer
   take (a module and its input, a seed, a shape). Two or three are enough: one the chapter
   uses, and one where a mistake that hides in the first (a scale of 1 when ``head_dim`` is 1,
   a mask that drops nothing on one token) shows.
2. **The right reference.** A function ``right(config)`` computing the correct output, from
   :mod:`.reference` (``attend``, ``head_output``, ``split_attention`` with the default
   :class:`.reference.Recipe`).
3. **The mistakes, as buggy references.** One :class:`Buggy` per known mistake: a name, the
   message the reader sees (``{fact}`` fields are filled from the evidence, see
   :func:`.core.fill`), and ``compute(config)`` giving the wrong output that mistake makes,
   most often ``Recipe().but(one ingredient changed)``. Most specific first: the first buggy
   reference the answer matches on every configuration is the one named.
4. **The check.** ``answer(config)`` runs the reader's code on one configuration;
   :func:`run_catalogue` compares its output with the right one and with each buggy one (with
   :func:`.reference.same`, the one tolerance) and returns the :class:`.core.CheckResult`. It
   never raises: an answer that raises, or returns something that is not a tensor, is described
   by ``raised`` and ``unknown``, and a buggy reference that itself fails matches nothing.

A sketch, for an exercise "write causal attention for one head"::

    CONFIGS = (torch.rand(2, 6, 4, generator=torch.Generator().manual_seed(1)),)
    ONE_HEAD = Catalogue(
        configurations=CONFIGS,
        right=lambda x: attend(x, x, x),
        mistakes=(
            Buggy("no mask", "Every token sees later tokens: mask the scores.",
                  lambda x: attend(x, x, x, Recipe().but(mask="none"))),
            Buggy("not scaled", "Divide the scores by √head_dim.",
                  lambda x: attend(x, x, x, Recipe().but(scale="none"))),
        ),
        praise="Causal, scaled attention.",
        unknown="Your output matches none of the mistakes this check knows.",
    )

    @never_raises
    def check_one_head(function):
        return run_catalogue(ONE_HEAD, lambda x: function(x, x, x))

Mistakes that are not about the output (the answer is a class, not a module; it raises) are
:class:`.core.Mistake` entries. A :class:`Buggy` fits in the same catalogue, for
:func:`.core.first_mistake`: there ``compute(evidence)`` and ``evidence.right`` are compared with
``evidence.output``, as in chapter 2's joins of heads (:data:`.arguments.JOINS`). Class
practices (chapters 1, 3, 5, 6) write the same buggy references as ``(changes, message)`` rows of
a :class:`.practice.Practice`.
"""

from collections.abc import Callable
from dataclasses import dataclass

from .core import CheckResult, describe_error, fill
from .facts import attempt
from .reference import same


@dataclass(frozen=True)
class Buggy:
    """A known mistake as a buggy reference: the wrong output it computes, and what to say."""

    name: str
    message: str
    compute: Callable

    def found_in(self, evidence):
        """In a :class:`.core.Mistake` catalogue: ``evidence.output`` equals this reference's
        output computed from ``evidence``, and differs from ``evidence.right`` (where both
        agree, the answer is right, never this mistake)."""
        output = evidence.output
        return not same(output, attempt(lambda e: e.right, evidence)) and same(
            output, attempt(self.compute, evidence)
        )

    def tell(self, evidence):
        return fill(self.message, evidence)


@dataclass(frozen=True)
class Catalogue:
    """An exercise's check as data; see the module's docstring."""

    configurations: tuple
    right: Callable
    mistakes: tuple
    praise: str
    unknown: str
    raised: str = "Your code raised {error} on one of the check's inputs. Fix that first."


def matching(reference, outputs, configurations):
    """Whether ``outputs`` equal ``reference``'s outputs on every configuration."""
    return all(
        same(output, attempt(reference, config))
        for output, config in zip(outputs, configurations, strict=True)
    )


def run_catalogue(catalogue, answer, evidence=None):
    """The verdict on ``answer``: passed if it computes the right output on every configuration,
    otherwise the first buggy reference it matches, or ``catalogue.unknown``.

    ``evidence`` fills the messages' ``{fact}`` fields; ``{error}`` is always available.
    """
    outputs = [attempt(answer, config) for config in catalogue.configurations]
    error = next((o for o in outputs if isinstance(o, Exception)), None)
    facts = _Facts(evidence, error)
    if error is not None:
        return CheckResult(False, fill(catalogue.raised, facts))
    if matching(catalogue.right, outputs, catalogue.configurations):
        return CheckResult(True, fill(catalogue.praise, facts))
    for buggy in catalogue.mistakes:
        if matching(buggy.compute, outputs, catalogue.configurations):
            return CheckResult(False, fill(buggy.message, facts))
    return CheckResult(False, fill(catalogue.unknown, facts))


class _Facts:
    """``evidence``'s facts, plus ``error``: the answer's exception, described."""

    def __init__(self, evidence, error):
        self.evidence, self.error = evidence, describe_error(error) if error else "?"

    def __getattr__(self, name):
        return getattr(self.evidence, name)
