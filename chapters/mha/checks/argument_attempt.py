"""The evidence chapter 2's catalogue (:mod:`.arguments`) judges: the reader's answer for a
:class:`Target`, run on the chapter's batch with its heads watched (:class:`Attempt`, a
:class:`.joins.Heads`), and the facts its messages quote."""

from dataclasses import dataclass

import torch

from .core import evaluating, kind_of
from .facts import attempt
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
    layers = property(lambda a: [getattr(h, n) for h in a.heads for n in PROJECTIONS])

    @property
    def context_length(self):
        """The shortest of the heads' causal masks (6, the batch's length, if none has one)."""
        masks = [getattr(h, "mask", None) for h in self.heads]
        return min((m.shape[0] for m in masks if isinstance(m, torch.Tensor)), default=6)

    def as_built(self):
        """Every projection is the constructor's: one width for all, weights of that shape."""
        shapes = {(x.out_features, x.in_features, *x.weight.shape) for x in self.layers}
        return len(shapes) == 1 and (shape := shapes.pop())[:2] == shape[2:]

    def joined(self):
        """Every head was given the batch, and the output is their outputs side by side."""
        return self.error is None and not self.fed and same(self.output, self.right)

    def args_are(self, num_heads, d_out):
        return (self.num_heads, self.head_width) == (num_heads, d_out) and self.joined()

    @property
    def changed(self):
        """The first head whose own output is not causal attention from its weights, or 0."""
        with torch.random.fork_rng(devices=[]), evaluating(self.module):
            own = [attempt(head, self.x) for head in self.heads]
        return next((n for n, o in enumerate(own, 1) if not same(o, self.refs[n - 1])), 0)

    def drops_columns(self):
        """Each head is wider than one value, and the output keeps only some of their columns."""
        columns = self.right.unbind(-1)
        narrower = self.output.dim() == 3 and self.width < len(columns) and self.head_width > 1
        return narrower and all(any(same(o, c) for c in columns) for o in self.output.unbind(-1))

    def mixes_heads(self):
        """The output is an affine function of the heads' outputs side by side, fitted exactly."""
        if self.output.shape[:2] != self.x.shape[:2] or same(self.output, self.right):
            return False
        ones = torch.ones(*self.x.shape[:2], 1)  # (b, num_tokens, 1): the affine map's offset
        inputs = torch.cat([self.right, ones], -1).flatten(0, 1).double()
        targets = self.output.flatten(0, 1).double()  # (b * num_tokens, width)
        residual = inputs @ torch.linalg.lstsq(inputs, targets).solution - targets
        return len(inputs) >= 2 * inputs.shape[1] and residual.norm() <= 1e-5 * targets.norm()
