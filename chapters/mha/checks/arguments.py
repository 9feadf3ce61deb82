"""Chapter 2's catalogue for both exercises: the reader's wrapper run with its heads watched."""

from dataclasses import dataclass

import torch

from .core import CheckResult, Mistake, fill, first_mistake, kind_of
from .joins import JOINS, NOT_X, SHARED, Heads
from .reference import PROJECTIONS, same

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
    given = property(
        lambda a: f"the class {a.got} itself" if isinstance(a.answer, type) else kind_of(a.answer)
    )
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


#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake(
        "not a module",
        "{t.check} needs the wrapper you built (a torch.nn.Module), but it was given {given}. "
        "Pass the wrapper itself, not its output nor its class: {t.check}(my_wrapper), not "
        "{t.check}(my_wrapper(batch)).",
        lambda a: a.module is None,
    ),
    Mistake(
        "not the wrapper",
        "Your {got} does not have the heads MultiHeadAttentionWrapper builds: a list self.heads "
        "of attention heads, each with W_query, W_key and W_value of one width. Build a "
        "MultiHeadAttentionWrapper with {t.heads} heads: change only the arguments of the call.",
        lambda a: not a.heads or not a.as_built(),
    ),
    Mistake(
        "the starting wrapper",
        "This is the starting wrapper, unchanged: {num_heads} heads and {width}-dimensional "
        "context vectors, where the exercise asks for {t.heads} heads and {t.width}-dimensional "
        "ones. What decides the width of the wrapper's output? {t.exercise}.hint(1) starts "
        "from there.",
        lambda a: (
            (a.num_heads, a.head_width, a.d_in, a.context_length) == (2, 2, 3, 6) and a.joined()
        ),
    ),
    Mistake(
        "the input's arguments changed",
        "Your heads take tokens {d_in} values wide (d_in={d_in}), at most {context_length} "
        "(context_length={context_length}), but the example has 6 tokens 3 values wide, batch "
        "shape (2, 6, 3): d_in and context_length describe the input, not the output's width. "
        "Keep d_in=3 and context_length at 6 (or more).",
        lambda a: a.d_in != 3 or a.context_length < 6,
    ),
    Mistake(
        "num_heads changed",
        "Your wrapper has {heads_phrase}, but the exercise asks for {t.heads}: keep "
        "num_heads={t.heads}, and set each head's width with d_out.",
        lambda a: a.num_heads != a.t.heads,
    ),
    SHARED,
    NOT_X,
    *JOINS,
    Mistake(
        "wrong width",
        "Your context vectors are {width}-dimensional, not {t.width}: d_out is each head's "
        "width, so num_heads × d_out = {num_heads} × {head_width} = {width}. How many values "
        "must each of the {t.heads} heads give? {t.exercise}.hint(1) starts there.",
        lambda a: a.joined() and a.width != a.t.width,
    ),
    Mistake(
        "not the heads side by side",
        "Your output is not the heads' outputs side by side: values thrown away, a head's mask, "
        "scale or columns changed, or the heads mixed after torch.cat (a weighted mix, as "
        "chapter 3's learned out_proj makes). Keep the class and its heads as built, and change "
        "only the arguments of the call: d_out is each head's width.",
        lambda a: not a.joined(),
    ),
)


def diagnosis(answer, target):
    """The first catalogued mistake in ``answer`` (with its evidence), or ``None`` if right."""
    return first_mistake(MISTAKES, attempt := Attempt(answer, target)), attempt


PRAISE = (
    "{t.word} heads, each with W_query, W_key and W_value {t.d_out} value{t.s} wide: the context "
    "vectors are {t.width}-dimensional (num_heads × d_out = {t.heads} × {t.d_out}). Each head "
    "reads the same x and computes causal attention from its own weights, and the output holds "
    "the heads' values side by side, in head order."
)


def check(target, answer):
    """The verdict on ``answer`` for ``target``: :data:`PRAISE`, or what is wrong, in words."""
    mistake, attempt = diagnosis(answer, target)
    return CheckResult(mistake is None, fill(mistake.message if mistake else PRAISE, attempt))


def solution(name, t):
    """The solution's code: the starting call with the right arguments, and the check."""
    return (
        f"torch.manual_seed(123)\n{name} = MultiHeadAttentionWrapper(\n"
        f"    d_in=3, d_out={t.d_out}, context_length=6, dropout=0.0, num_heads={t.heads}\n"
        f")\n{t.check}({name})"
    )
