"""Chapter 1's exercise: the wrapper's forward, judged on a watched run (:data:`MISTAKES`)."""

import torch

from ..starting import WrapperSkeleton
from .core import Exercise, Mistake, attempt, fill, first_mistake, told_result
from .joins import JOINS, NOT_X, SHARED, Heads
from .practice import Practice, checker, verdict
from .reference import Buggy, same

#: (d_in, d_out, context_length, dropout, num_heads, qkv_bias, num_tokens): three heads first
#: (chains, order and joins all show), then d_in = d_out (a chain runs without an error) with
#: dropout (off in eval mode) on a short input, then one head.
ROWS = ((3, 2, 6, 0.0, 3, 0, 6), (4, 4, 6, 0.25, 2, 0, 5), (5, 3, 6, 0.0, 1, 0, 4))
STARTING = (
    "Your forward still raises NotImplementedError: this is the starting code, and the "
    "forward pass is yours to write. What should each head be given, and what becomes of "
    "the heads' outputs? The first hint, just below the check, starts from there."
)


def joined(name, message, join):
    """A mistake in joining the heads: ``join`` makes its output from each head's right one."""
    return Buggy(name, message, lambda e: join(e.refs))


def stacked_then_viewed(outs):  # (b, num_heads, T, d_out) read as (b, T, num_heads * d_out)
    return torch.stack(outs, 1).reshape(*outs[0].shape[:2], -1)


CAT, ONE = "torch.cat(head_outputs, dim=-1)", "one vector per token: torch.cat(..., dim=-1)"
# fmt: off
JOINED = (  # each head's output right, joined wrongly: most specific first
    joined("one head repeated", "Your output is head 1's, repeated for every head: call each head "
           "in self.heads on x, not self.heads[0].", lambda r: torch.cat([r[0]] * len(r), -1)),
    joined("the first head only", "Your output is head 1's alone: the wrapper returns every "
           f"head's output, side by side: {CAT}.", lambda r: r[0]),
    joined("the last head only", "Your output is the last head's alone (a loop that keeps only "
           f"its last result?): keep every head's output and join them: {CAT}.", lambda r: r[-1]),
    joined("the last head left out", "Your output has every head but the last: self.heads[:-1] "
           "or range(num_heads - 1) leaves one out.", lambda r: torch.cat(r[:-1], -1)),
    joined("stacked on a new last axis", "torch.stack put the heads on a new last axis, (b, "
           f"num_tokens, d_out, num_heads): torch.cat joins them on an existing one, {ONE}.",
           lambda r: torch.stack(r, -1)),
    joined("stacked in front", "torch.stack put the heads on a new first axis, (num_heads, b, "
           f"num_tokens, d_out): {ONE}.", torch.stack),
    joined("joined as tokens", "Your heads' outputs are joined on axis 1, as extra tokens "
           f"(torch.cat(..., dim=1) or torch.hstack): {ONE}.", lambda r: torch.cat(r, 1)),
    joined("joined as sequences", "Your heads' outputs are joined on axis 0, as extra sequences "
           f"(torch.cat(..., dim=0) or torch.vstack): {ONE}.", lambda r: torch.cat(r, 0)),
    joined("heads reversed", "Your heads are in reverse order: head 1's values come first.",
           lambda r: torch.cat(r[::-1], -1)),
    joined("heads interleaved", "Your heads' columns are interleaved (torch.stack on the last "
           "axis, then flatten): head 1's d_out values come first, then head 2's.",
           lambda r: torch.stack(r, -1).flatten(-2)),
    joined("stacked then reshaped", "Your forward stacks the heads as (b, num_heads, num_tokens, "
           "d_out) and reshapes that, which mixes tokens and heads: torch.cat(..., dim=-1).",
           stacked_then_viewed),
    joined("heads added", "You added the heads' outputs, so no head's result can be read off: "
           f"place them side by side, {CAT}.", sum),
    joined("heads averaged", "You averaged the heads' outputs, so no head's result can be read "
           f"off: place them side by side, {CAT}.", lambda r: torch.stack(r).mean(0)))
#: Known mistakes, most specific first, on a run's :class:`.joins.Heads`.
MISTAKES = (
    Mistake("no list of heads", "Your instance has no list of heads in self.heads: subclass "
            "WrapperSkeleton, which builds them, and write only forward.", lambda e: not e.heads),
    Mistake("the list of heads called", "Your forward calls the list of heads itself, and PyTorch "
            "raised {error_text}: an nn.ModuleList holds the heads but computes nothing. Call "
            "each head in it on x.", lambda e: "ModuleList" in str(e.error)),
    Mistake("the starting code", STARTING, lambda e: isinstance(e.error, NotImplementedError)),
    Mistake("one sequence only", "Head {fed} was given x[0], the first sequence alone: give "
            "every head the whole batch x.", lambda e: any(same(x, e.x[0]) for _, x in e.run[1])),
    NOT_X,
    *JOINED,
    JOINS[0],  # it raised
    Mistake("not every head ran once", "Not every head in self.heads ran once as head(x): call "
            "each head on x, once (not head.forward, its layers or PyTorch's attention: calling "
            "the module runs its hooks).", lambda e: len({n for n, _ in e.run[1]}) != e.num_heads),
    SHARED,
    Mistake("no output", "{told}", lambda e: told_result(e.output, e.right)),
    JOINS[-1],  # the columns in another order
    Mistake("not the heads side by side", "Each head ran once on x, but your output is not their "
            "outputs side by side, and matches no mistake this check knows: see hint(3), on "
            "joining them.", lambda e: not same(e.output, e.right)))
# fmt: on


def judge(p, run):
    """What is wrong with one run, or None: :func:`.practice.verdict`'s when the constructor raised
    or the book's classes did the work (its heads aside), else the first of :data:`MISTAKES`."""
    run.calls[:] = [c for c in run.calls if c != "CausalAttention.forward"]  # its heads'
    if run.stage == "constructor" or run.calls:
        return verdict(p, run)
    heads = Heads(run.module, run.x)
    found = first_mistake(MISTAKES, heads)
    told = attempt(lambda: told_result(heads.output, heads.right))  # no heads: no right output
    return found and fill(found.message, heads, told=told)


WRAPPER = Practice(
    start=WrapperSkeleton,
    rows=ROWS,
    judge=judge,
    quiet=True,
    starting=STARTING,
    praise="With 1, 2 and 3 heads, every head reads the same x once, and their outputs sit side "
    "by side on the last axis, in list order: num_heads × d_out values per token.",
)
#: Checks chapter 1's exercise: every head run once on ``x``, joined on the last axis.
check_wrapper = checker(WRAPPER, "check_wrapper")


class MyWrapper(WrapperSkeleton):
    def forward(self, x):
        # num_heads tensors, each (b, num_tokens, d_out)
        head_outputs = [head(x) for head in self.heads]
        # (b, num_tokens, num_heads * d_out)
        return torch.cat(head_outputs, dim=-1)


sequential_wrapper = Exercise(
    check_wrapper,
    hints=(
        "The trace showed what each head is given, and in which order the heads run. The "
        "shape prediction showed how the outputs come together. Your forward does the same.",
        "Go through self.heads in order and call each head on the same x. That gives "
        "num_heads tensors of shape (b, num_tokens, d_out); the wrapper returns one tensor of "
        "shape (b, num_tokens, num_heads × d_out).",
        "A list comprehension collects the heads' outputs; torch.cat joins a list of tensors "
        "along an existing axis, and dim=-1 is the last one.",
    ),
    solution_code=MyWrapper,
)
