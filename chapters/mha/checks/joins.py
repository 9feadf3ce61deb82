"""Chapters 1 and 2: a wrapper run with its heads watched (:class:`Heads`), shared mistakes."""

from functools import cached_property

import torch

from .core import Mistake, attempt, describe_error, evaluating, kind_of
from .reference import PROJECTIONS, Buggy, head_output, same

CAT = "torch.cat(..., dim=-1)"


class Heads:
    """``module`` run on ``x`` in eval mode, each head watched, and the facts messages quote.
    ``heads`` is empty unless ``module.heads`` lists attention heads."""

    def __init__(self, module, x):
        self.module, self.x = module, x
        heads = getattr(module, "heads", None)
        listed = isinstance(heads, (torch.nn.ModuleList, list)) and all(  # each head's layers
            isinstance(getattr(h, n, None), torch.nn.Linear) for h in heads for n in PROJECTIONS
        )
        self.heads = list(heads) if listed else []

    @cached_property
    def run(self):
        """The output (or its exception), and ``(head number, input)`` for each head call."""
        given = []
        hooks = [
            head.register_forward_pre_hook(
                lambda _, args, kwargs, n=n: given.append((n, [*args, *kwargs.values(), None][0])),
                with_kwargs=True,
            )
            for n, head in enumerate(self.heads, 1)
        ]
        try:
            with torch.random.fork_rng(devices=[]), evaluating(self.module):
                return attempt(self.module, self.x), given
        finally:
            for hook in hooks:
                hook.remove()

    @cached_property
    def refs(self):
        """Each head's right output on ``x``, computed from its own weights."""
        with evaluating(self.module):
            return [attempt(head_output, head, self.x) for head in self.heads]

    output = property(lambda e: e.run[0])
    error = property(lambda e: e.output if isinstance(e.output, Exception) else None)
    error_text = property(lambda e: describe_error(e.error))
    right = property(lambda e: torch.cat(e.refs, -1))  # (b, tokens, num_heads * d_out)
    output_shape = property(lambda e: tuple(e.output.shape))
    num_heads = property(lambda e: len(e.heads))
    output_kind = property(lambda e: kind_of(e.output))
    #: The number of the first head not given ``x``, or None.
    fed = property(lambda e: next((n for n, x in e.run[1] if not same(x, e.x)), None))

    def shared(self):
        """Two neighbouring heads have the same weights (one object, shared layers, a copy)."""
        weights = [[getattr(h, n).weight for n in PROJECTIONS] for h in self.heads]
        return any(all(map(torch.equal, u, v)) for u, v in zip(weights, weights[1:]))


NOT_X = Mistake(
    "heads not given the same x",
    "Head {fed} was not given the wrapper's input x but something else, such as a previous "
    "head's output (as in a pipeline). The heads work side by side: every head reads the same x.",
    lambda e: e.fed,
)
SHARED = Mistake(
    "one head object repeated",
    "Two of your heads share one set of weights (one head object repeated, as [head] * "
    "num_heads makes, shared layers, or a copy), so they always compute the same thing: build "
    "one new CausalAttention per head, as the wrapper's __init__ does.",
    lambda e: e.shared(),
)
#: The output itself wrong, most specific first: raised, no tensor, the heads joined wrongly.
JOINS = (
    Mistake(
        "forward raises",
        "Calling your wrapper raised {error_text}.",
        lambda e: e.error is not None,
    ),
    Mistake(
        "returns no tensor",
        "Your forward returned {output_kind}, not a tensor: did it forget to return, or to join "
        "the heads' outputs into one context vector per token?",
        lambda e: not isinstance(e.output, torch.Tensor),
    ),
    Mistake(
        "joined on the wrong axis",
        "Your output has shape {output_shape}: the heads were joined on the wrong axis. "
        "torch.stack puts them on a new axis, and torch.cat on dim=0 or dim=1 makes them "
        f"extra sequences or tokens; {CAT} joins them on the last axis, one vector per token.",
        lambda e: e.output.numel() == e.right.numel() and e.output.shape != e.right.shape,
    ),
    *(
        Buggy(
            "heads added instead of concatenated",
            f"You {how} the heads' outputs: every coordinate blends all heads, and no head's "
            f"result can be read off. Place them side by side: {CAT}.",
            lambda e, join=join: join(torch.stack(e.refs), 0),
        )
        for how, join in (("added", torch.sum), ("averaged", torch.mean))
    ),
    Mistake(
        "heads' columns reordered",
        "Every head's values are in your output, but the columns are not in head order (reversed "
        "or interleaved). Go through self.heads in list order: head 1's values first, then head "
        "2's.",
        lambda e: (
            not same(e.output, e.right) and same(*(t.sort(-1)[0] for t in (e.output, e.right)))
        ),
    ),
)
