"""A wrapper of heads run once on the check's input: the evidence chapters 1 and 2 judge.

:class:`HeadsRun` calls the module (eval mode, no gradients, its modes and the reader's random
state restored) with a forward pre-hook on each head that records what the head is given; each
head's right output is computed from that head's own weights (:func:`.reference.head_output`).
Chapter 1's runner (and chapter 3's ``attempt``) import it and chapter 2's :data:`JOINS` from
here until they move off; chapter 2's own evidence is :class:`.wrapper_args.Attempt`.
"""

import torch

from .arguments import JOINS as JOINS
from .core import describe_error, evaluating, kind_of
from .head_faults import is_head as is_head
from .reference import PROJECTIONS, head_output, same
from .wrapper_args import attempt as attempt


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
