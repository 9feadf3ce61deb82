"""Chapters 1 and 2: a wrapper run with its heads watched (:class:`Heads`), shared mistakes."""

import operator
from contextlib import ExitStack
from functools import cached_property
from unittest import mock

import torch

from .catalogue import Buggy
from .core import Mistake, attempt, describe_error, evaluating, told_result
from .reference import PROJECTIONS, head_output, same


class Heads:
    """``module`` run on ``x`` in eval mode, its listed heads watched; the facts messages quote."""

    def __init__(self, module, x):
        self.module, self.x = module, x
        heads = getattr(module, "heads", None)
        listed = isinstance(heads, (torch.nn.ModuleList, list)) and all(  # each head's layers
            isinstance(getattr(h, n, None), torch.nn.Linear) for h in heads for n in PROJECTIONS
        )
        self.heads = list(heads) if listed else []

    @cached_property
    def run(self):
        """The output (or its exception), and ``(head number, input)`` of each head's forward."""
        given = []

        def noting(n, forward):  # head n's forward, its input (first argument, or keyword) noted
            return lambda *a, **k: given.append((n, [*a, *k.values(), None][0])) or forward(*a, **k)

        with ExitStack() as watched, torch.random.fork_rng(devices=[]), evaluating(self.module):
            for n, head in enumerate(self.heads, 1):  # each forward restored as the block ends
                watched.enter_context(mock.patch.object(head, "forward", noting(n, head.forward)))
            return attempt(self.module, self.x), given

    @cached_property
    def refs(self):
        """Each head's right output on ``x``, computed from its own weights."""
        with evaluating(self.module):
            return [attempt(head_output, head, self.x) for head in self.heads]

    output = property(lambda e: e.run[0])
    error = property(lambda e: e.output if isinstance(e.output, Exception) else None)
    error_text = property(lambda e: describe_error(e.error))
    right = property(lambda e: torch.cat(e.refs, -1))  # (b, tokens, num_heads * d_out)
    num_heads = property(lambda e: len(e.heads))
    told = property(lambda e: told_result(e.output, e.right))  # None, no tensor, wrong shape
    #: The number of the first head not given ``x``, or None.
    fed = property(lambda e: next((n for n, x in e.run[1] if not same(x, e.x)), None))

    def shared(self):
        """Two neighbouring heads have the same weights (one object, shared layers, a copy)."""
        weights = [[getattr(h, n).weight for n in PROJECTIONS] for h in self.heads]
        return any(all(map(torch.equal, u, v)) or any(map(operator.is_, u, v))  # or one layer
                   for u, v in zip(weights, weights[1:]))  # fmt: skip


# fmt: off
NOT_X = Mistake("heads not given the same x", "Head {fed} was not given the wrapper's input x but "
                "something else, such as a previous head's output (as in a pipeline). The heads "
                "work side by side: every head reads the same x.", lambda e: e.fed)
ONE_SEQUENCE = Mistake("one sequence only", "Head {fed} was given x[0], the first sequence "
                      "alone: give every head the whole batch x.",
                      lambda e: any(same(x, e.x[0]) or same(x, e.x[:1]) for _, x in e.run[1]))
SHARED = Mistake("one head object repeated", "Two of your heads share one set of weights (one "
                 "head object repeated, as [head] * num_heads makes, shared layers, or a copy), so "
                 "they always compute the same thing: build one new CausalAttention per head, as "
                 "the wrapper's __init__ does.", lambda e: e.shared())


def joined(name, message, join):
    """A mistake in joining the heads: ``join`` makes its output from each head's right one."""
    return Buggy(name, message, lambda e: join(e.refs))


CAT, ONE = "torch.cat(head_outputs, dim=-1)", "one vector per token: torch.cat(..., dim=-1)"
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
    joined("heads reversed", "Your heads are in reverse order: head 1's values must come first.",
           lambda r: torch.cat(r[::-1], -1)),
    joined("heads interleaved", "Your heads' columns are interleaved (torch.stack on the last "
           "axis, then flatten): head 1's d_out values come first, then head 2's.",
           lambda r: torch.stack(r, -1).flatten(-2)),
    joined("stacked then reshaped", "Your forward stacks the heads as (b, num_heads, num_tokens, "
           "d_out) and reshapes that, which mixes tokens and heads: torch.cat(..., dim=-1).",
           lambda r: torch.stack(r, 1).reshape(*r[0].shape[:2], -1)),  # (b, H, T, d_out) read
    joined("heads added", "You added the heads' outputs, so no head's result can be read off: "
           f"place them side by side, {CAT}.", sum),
    joined("heads averaged", "You averaged the heads' outputs, so no head's result can be read "
           f"off: place them side by side, {CAT}.", lambda r: torch.stack(r).mean(0)))
RAISED = Mistake("forward raises", "Calling your wrapper raised {error_text}.",
                 lambda e: e.error is not None)
NO_OUTPUT = Mistake("no output", "{told}", lambda e: e.told)  # the core's words
REORDERED = Mistake("heads' columns reordered", "Every head's values are in your output, but the "
                    "columns are not in head order (reversed or interleaved). Go through "
                    "self.heads in list order: head 1's values first, then head 2's.",
                    lambda e: not same(e.output, e.right)
                    and same(*(t.sort(-1)[0] for t in (e.output, e.right))))
# fmt: on
