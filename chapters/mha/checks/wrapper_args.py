"""The evidence chapter 2's catalogue (:mod:`.arguments`) judges: the reader's wrapper run once
on the chapter's batch (:class:`Attempt`), each head's right output computed from its own
weights (:func:`.reference.head_output`), and the facts the messages quote. Chapter 1's trial
(:class:`.wrapper_trial.Trial`) is one too."""

from functools import cached_property

import torch

from .core import describe_error, evaluating, kind_of
from .facts import attempt
from .head_faults import PROBE, head_fault, is_head, reshaped
from .reference import PROJECTIONS, head_output, same


def recorder(n, given, order):
    """A forward pre-hook for head ``n``: it notes the call in ``order``, and what the head is
    given (its first argument) in ``given[n]``."""

    def record(head, args, kwargs):
        order.append(n)
        given[n].append(args[0] if args else next(iter(kwargs.values()), None))

    return record


class Attempt:
    """The answer for a target, and the facts the messages quote, each computed when asked."""

    def __init__(self, answer, target, x=PROBE):
        self.answer, self.t, self.x = answer, target, x
        self.module = answer if isinstance(answer, torch.nn.Module) else None
        heads = getattr(self.module, "heads", None)
        self.heads = list(heads) if isinstance(heads, (torch.nn.ModuleList, list)) else None

    @cached_property
    def run(self):
        """The wrapper's output on x (or its exception), what each head was given, in what order."""
        given, order = [[] for _ in self.heads], []
        hooks = [
            h.register_forward_pre_hook(recorder(n, given, order), with_kwargs=True)
            for n, h in enumerate(self.heads)
        ]
        try:
            with torch.random.fork_rng(devices=[]), evaluating(self.module):
                return attempt(self.module, self.x), given, order
        finally:
            for hook in hooks:
                hook.remove()

    @cached_property
    def refs(self):
        """Each head's right output on x, computed from its own weights."""
        with evaluating(self.module):
            return [attempt(head_output, head, self.x) for head in self.heads]

    @cached_property
    def alone(self):
        """Each head's own output on x, and on x with its last token changed."""
        moved = torch.cat([self.x[:, :-1], self.x[:, -1:] + 1.0], dim=1)  # (b, tokens, d_in)
        with torch.random.fork_rng(devices=[]), evaluating(self.module):
            return [(attempt(head, self.x), attempt(head, moved)) for head in self.heads]

    output = property(lambda a: a.run[0])
    error = property(lambda a: a.output if isinstance(a.output, Exception) else None)
    right = property(lambda a: torch.cat(a.refs, -1))  # (b, tokens, num_heads * d_out)
    got = property(lambda a: getattr(a.answer, "__name__", type(a.answer).__name__))
    given = property(lambda a: kind_of(a.answer))
    answer_shape = property(lambda a: tuple(a.answer.shape))
    num_heads = property(lambda a: len(a.heads))
    head_width = property(lambda a: a.heads[0].W_value.out_features)
    d_in = property(lambda a: a.heads[0].W_query.in_features)
    heads_phrase = property(lambda a: f"{a.num_heads} head" + "s" * (a.num_heads != 1))
    x_shape = property(lambda a: tuple(a.x.shape))
    error_text = property(lambda a: describe_error(a.error))
    output_kind = property(lambda a: kind_of(a.output))
    output_length = property(lambda a: len(a.output))
    output_shape = property(lambda a: tuple(a.output.shape))
    width = property(lambda a: a.output.shape[-1])

    @property
    def context_length(self):
        """The shortest of the heads' causal masks (6, the batch's length, if none has one)."""
        masks = [getattr(h, "mask", None) for h in self.heads]
        return min((m.shape[0] for m in masks if isinstance(m, torch.Tensor)), default=6)

    @property
    def not_a_head(self):
        n = [is_head(h) for h in self.heads].index(False)
        return f"Head {n + 1} is a {type(self.heads[n]).__name__}"

    def joined(self):
        """Every head was given the batch and the output is their outputs side by side."""
        return self.error is None and self.fed is None and same(self.output, self.right)

    def args_are(self, num_heads, d_out):
        return (self.num_heads, self.head_width) == (num_heads, d_out) and self.joined()

    @property
    def earlier(self):
        copied = self.d_in == 3 and self.context_length >= 6
        return next((what for h, d, what in self.t.earlier if copied and self.args_are(h, d)), None)

    @property
    def fed(self):
        """``(head number, what it was given)`` for the first head not given the batch."""
        inputs = [(n, x) for n, xs in enumerate(self.run[1], 1) for x in xs if not same(x, self.x)]
        if not inputs:
            return None
        n, x = inputs[0]
        if not isinstance(x, torch.Tensor):
            return n, kind_of(x)
        source = next((k for k, ref in enumerate(self.refs, 1) if same(x, ref)), None)
        if source is None:
            return n, f"another tensor, of shape {tuple(x.shape)}"
        return n, f"head {source}'s output (shape {tuple(x.shape)})"

    @property
    def sharing(self):
        """How two heads share one set of weights, in words, or ``None``."""
        for one, two in zip(self.heads, self.heads[1:]):
            pairs = [(getattr(one, n).weight, getattr(two, n).weight) for n in PROJECTIONS]
            if one is two:
                return "they are the same object, as [head] * num_heads makes"
            if any(a.data_ptr() == b.data_ptr() for a, b in pairs):
                return "they use the very same weight tensors"
            if all(torch.equal(a, b) for a, b in pairs):
                return "one is a copy of the other"
        return None

    reshaped = property(lambda a: reshaped(a.heads))
    head_fault = property(lambda a: head_fault(a.heads, a.refs, a.alone))

    def drops_columns(self):
        """Some heads' values never reach the output, narrower than the heads' outputs."""
        if any(own.shape[-1] < self.head_width for own, _ in self.alone):
            return True
        columns = self.right.unbind(-1)
        narrower = self.output.dim() == 3 and self.width < len(columns)
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
