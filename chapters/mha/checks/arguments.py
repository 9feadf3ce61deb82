"""Chapter 2's catalogue for both exercises: the reader's wrapper run with its heads watched."""

from dataclasses import dataclass
from functools import cached_property

import torch

from .argument_mistakes import MISTAKES
from .core import CheckResult, attempt, evaluating, fill, first_mistake, kind_of
from .joins import Heads
from .reference import PROJECTIONS, same
from .runs import afterwards

#: The chapter's batch: two sequences of six tokens three values wide.
PROBE = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(2024))  # (b, tokens, d_in)


@dataclass(frozen=True)
class Target:
    """An exercise's heads and the width of its context vectors."""

    check: str  # the check's name, as messages quote it
    exercise: str  # the Exercise's name, for hint(1)
    word: str  # the number of heads in words, as the praise starts
    heads: int
    width: int

    d_out = property(lambda t: t.width // t.heads)
    s = property(lambda t: "s" * (t.d_out != 1))


class Attempt(Heads):
    """The answer for a target, run on :data:`PROBE`, and the facts the messages quote."""

    def __init__(self, answer, target):
        super().__init__(answer if isinstance(answer, torch.nn.Module) else None, PROBE)
        self.answer, self.t = answer, target

    got = property(lambda a: getattr(a.answer, "__name__", type(a.answer).__name__))
    given = property(lambda a: f"the class {a.got} itself" if isinstance(a.answer, type)
                     else kind_of(a.answer))  # fmt: skip
    head_width = property(lambda a: a.heads[0].W_value.out_features)
    d_in = property(lambda a: a.heads[0].W_query.in_features)
    heads_phrase = property(lambda a: f"{a.num_heads} head" + "s" * (a.num_heads != 1))
    width = property(lambda a: a.output.shape[-1])
    right_width = property(lambda a: a.right.shape[-1])
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

    def peeks(self):
        """An earlier token's output moves when only the last token changes."""
        later = PROBE.clone()
        later[:, -1] += 1.0  # (b, tokens, d_in): the last token changed
        with torch.random.fork_rng(devices=[]), evaluating(self.module):
            moved = attempt(self.module, later)
        return torch.is_tensor(self.output) and not same(moved[:, :-1], self.output[:, :-1])

    @cached_property
    def after(self):
        """:func:`.runs.afterwards`: a gradient back to x, and nothing kept between calls."""
        return afterwards(self.module, PROBE, self.output, (2, self.context_length, self.d_in))

    def columns_kept(self):
        """Every column of the output is one of the heads', fewer than they make."""
        out, right = (t.flatten(0, 1).T for t in (self.output, self.right))  # (width, b * tokens)
        return len(out) < len(right) and all(any(same(c, r) for r in right) for c in out)

    def mixed(self):
        """The output is an affine mix of the heads' outputs (a projection after torch.cat)."""
        right = self.right.flatten(0, 1)  # (b * tokens, width)
        right = torch.cat([right, torch.ones(len(right), 1)], 1)  # with a bias column
        fit = torch.linalg.lstsq(right, out := self.output.flatten(0, 1)).solution
        return not self.joined() and len(right) > right.shape[1] and same(right @ fit, out)

    @property
    def off(self):
        """The first head whose columns of the output are not what it computes."""
        blocks = self.output.split(self.head_width, -1)  # head 1's columns, head 2's, ...
        return next((n for n, (b, r) in enumerate(zip(blocks, self.refs), 1) if not same(b, r)), 1)


PRAISE = ("{t.word} heads, each with W_query, W_key and W_value {t.d_out} value{t.s} wide: the "
          "context vectors are {t.width}-dimensional (num_heads × d_out = {t.heads} × {t.d_out}). "
          "Each head reads the same x and computes causal attention from its own weights, and the "
          "output holds the heads' values side by side, in head order.")  # fmt: skip


def check(target, answer):
    """The verdict on ``answer`` for ``target``: :data:`PRAISE`, or what is wrong, in words."""
    mistake = first_mistake(MISTAKES, attempt := Attempt(answer, target))  # the first one known
    return CheckResult(mistake is None, fill(mistake.message if mistake else PRAISE, attempt))
