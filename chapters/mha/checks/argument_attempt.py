"""The evidence chapter 2's catalogue (:mod:`.arguments`) judges: the reader's answer for a
:class:`Target`, run on the chapter's batch with its heads watched (:class:`Attempt`)."""

from dataclasses import dataclass

import torch

from .core import kind_of
from .joins import Heads
from .reference import PROJECTIONS, same

#: The chapter's batch: two sequences of six tokens three values wide.
PROBE = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(2024))  # (b, tokens, d_in)


@dataclass(frozen=True)
class Target:
    """An exercise's heads and the width of its context vectors."""

    check: str  # the check's name, as messages quote it
    exercise: str  # the Exercise's name, for hint(1)
    heads: int
    width: int


class Attempt(Heads):
    """The answer for a target, run on :data:`PROBE`, and the facts the messages quote."""

    def __init__(self, answer, target):
        super().__init__(answer if isinstance(answer, torch.nn.Module) else None, PROBE)
        self.answer, self.t = answer, target

    got = property(lambda a: getattr(a.answer, "__name__", type(a.answer).__name__))
    given = property(
        lambda a: f"the class {a.got} itself" if isinstance(a.answer, type) else kind_of(a.answer)
    )
    answer_shape = property(lambda a: tuple(a.answer.shape))
    head_width = property(lambda a: a.heads[0].W_value.out_features)
    d_in = property(lambda a: a.heads[0].W_query.in_features)
    heads_phrase = property(lambda a: f"{a.num_heads} head" + "s" * (a.num_heads != 1))
    width = property(lambda a: a.output.shape[-1])
    #: The shortest of the heads' causal masks: the longest input they take.
    context_length = property(lambda a: min(h.mask.shape[0] for h in a.heads))

    def as_built(self):
        """Every projection is the constructor's: one width for all, weights of that shape."""
        layers = [getattr(h, n) for h in self.heads for n in PROJECTIONS]
        shapes = {(x.out_features, x.in_features, *x.weight.shape) for x in layers}
        return len(shapes) == 1 and (shape := shapes.pop())[:2] == shape[2:]

    def joined(self):
        """Every head was given the batch, and the output is their outputs side by side."""
        return self.error is None and not self.fed and same(self.output, self.right)

    def args_are(self, num_heads, d_out):
        return (self.num_heads, self.head_width) == (num_heads, d_out) and self.joined()
