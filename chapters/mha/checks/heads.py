"""A wrapper of heads run once on the check's input: the evidence chapters 1 and 2 judge.

:class:`HeadsRun` calls the module (eval mode, no gradients, its modes and the reader's random
state restored) with a forward pre-hook on each head that records what the head is given; each
head's right output is computed from that head's own weights (:func:`.reference.head_output`).
:data:`JOINS` are the ways of putting the heads' outputs together wrongly that both chapters
name: most are buggy references, computed from the heads' right outputs.
"""

import torch

from .catalogue import Buggy
from .core import Mistake, describe_error, evaluating, kind_of
from .reference import PROJECTIONS, head_output, same


def is_head(module):
    """Whether ``module`` has its own query, key and value projections, as a head has."""
    return isinstance(module, torch.nn.Module) and all(
        isinstance(getattr(module, name, None), torch.nn.Linear) for name in PROJECTIONS
    )


def attempt(function, *args):
    """``function(*args)``, or the exception it raised."""
    try:
        return function(*args)
    except Exception as error:
        return error


class HeadsRun:
    """The module called once on ``x``: its output, what each head was given, in which order."""

    def __init__(self, module, x):
        self.module, self.x, self.heads = module, x, list(module.heads)
        self.received, self.order = [[] for _ in self.heads], []
        hooks = [h.register_forward_pre_hook(self._recorder(n), with_kwargs=True)
                 for n, h in enumerate(self.heads)]  # fmt: skip
        try:
            with torch.random.fork_rng(devices=[]), evaluating(module):
                self.output = attempt(module, x)
                self.refs = [attempt(head_output, head, x) for head in self.heads]
        finally:
            for hook in hooks:
                hook.remove()
        self.error = self.output if isinstance(self.output, Exception) else None

    def _recorder(self, n):
        def record(head, args, kwargs):
            self.order.append(n)
            self.received[n].append(args[0] if args else next(iter(kwargs.values()), None))

        return record

    @property
    def right(self):
        """The heads' right outputs side by side."""
        return torch.cat(self.refs, dim=-1)  # (b, num_tokens, num_heads * d_out)

    @property
    def fed(self):
        """``(head number, what it was given)`` for the first head not given ``x``, or ``None``."""
        for n, inputs in enumerate(self.received, start=1):
            for given in inputs:
                if not same(given, self.x):
                    return n, self._describe(given)
        return None

    def _describe(self, given):
        if not isinstance(given, torch.Tensor):
            return kind_of(given)
        shape = tuple(given.shape)
        n = next((n for n, ref in enumerate(self.refs, 1) if same(given, ref)), None)
        return f"head {n}'s output (shape {shape})" if n else f"another tensor, of shape {shape}"

    calls = property(lambda self: [len(inputs) for inputs in self.received])  # per head

    @property
    def sharing(self):
        """How two heads share one set of weights, in words, or ``None``."""
        for first, second in zip(self.heads, self.heads[1:]):
            pairs = [(getattr(first, n).weight, getattr(second, n).weight) for n in PROJECTIONS]
            if first is second:
                return "they are the same object, as [head] * num_heads makes"
            if any(a.data_ptr() == b.data_ptr() for a, b in pairs):
                return "they use the very same weight tensors"
            if all(torch.equal(a, b) for a, b in pairs):
                return "one is a copy of the other"
        return None

    def joined(self):
        """Every head was given ``x`` and the output is their outputs side by side."""
        return self.error is None and self.fed is None and same(self.output, self.right)

    # Facts the messages quote.
    x_shape = property(lambda self: tuple(self.x.shape))
    error_text = property(lambda self: describe_error(self.error))
    output_kind = property(lambda self: kind_of(self.output))
    output_length = property(lambda self: len(self.output))
    output_shape = property(lambda self: tuple(self.output.shape))
    width = property(lambda self: self.output.shape[-1])


CAT = "torch.cat(..., dim=-1)"

# fmt: off
#: Joining the heads wrongly, most specific first.
JOINS = (
    Mistake("heads not given the same x", "Head {fed[0]} was not given the wrapper's input x: it "
            "received {fed[1]}. The heads work side by side, not as a pipeline: every head reads "
            "the same x.",
            lambda run: run.fed is not None),
    Mistake("forward raises", "Calling your wrapper on a batch of shape {x_shape} raised "
            "{error_text}.",
            lambda run: run.error is not None),
    Mistake("returns None", "Your forward returned None: did it forget to return its result?",
            lambda run: run.output is None),
    Mistake("returns a list", "Your forward returned {output_kind} of {output_length} tensors, not "
            "one tensor: the heads' outputs still have to be joined into one context vector per "
            "token.",
            lambda run: isinstance(run.output, (list, tuple))),
    Mistake("returns something else", "Your forward returned {output_kind}, not a tensor of "
            "context vectors.",
            lambda run: not isinstance(run.output, torch.Tensor)),
    *(Buggy("stacked instead of concatenated",
            "You used torch.stack, which puts the heads on a new axis: the output has shape "
            f"{{output_shape}}. {CAT} joins them on the last axis, one vector per token.",
            lambda run, d=d: torch.stack(run.refs, d)) for d in range(4)),
    *(Buggy("concatenated on the wrong axis",
            f"You joined the heads' outputs along the {axis} (dim={d}), so the output has shape "
            f"{{output_shape}}: the other heads became extra {things}. Concatenate along the "
            "last axis, dim=-1.",
            lambda run, d=d: torch.cat(run.refs, d))
      for d, axis, things in ((0, "batch axis", "sequences"), (1, "token axis", "tokens"))),
    *(Buggy("heads added instead of concatenated",
            f"You {how} the heads' outputs: every coordinate blends all heads, and no head's "
            f"result can be read off. Place them side by side: {CAT}.",
            lambda run, join=join: join(torch.stack(run.refs), 0))
      for how, join in (("added", torch.sum), ("averaged", torch.mean))),
    *(Buggy("heads' columns reordered",
            f"Every head's values are in your output, but {how}: the columns are not in head "
            "order. Head 1's values come first, then head 2's, and so on.",
            lambda run, join=join: join(run.refs))
      for how, join in (("reversed", lambda refs: torch.cat(refs[::-1], -1)),
                        ("interleaved", lambda refs: torch.stack(refs, -1).flatten(-2)))),
)
# fmt: on
