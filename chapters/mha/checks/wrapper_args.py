"""What chapter 2's checks know about a wrapper whose arguments were chosen (:class:`Attempt`):
the facts :data:`.arguments.MISTAKES` asks about and its messages quote."""

from functools import cached_property

import torch

from .core import describe_error, evaluating, kind_of, listed
from .heads import HeadsRun, attempt, is_head
from .reference import PROJECTIONS, Recipe, attend, project, same

#: The chapter's batch: two sequences of six tokens three values wide.
PROBE = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(2024))  # (b, tokens, d_in)
ROLE = "Each head's role must stay as it was: change only the arguments of the call."


class Attempt:
    """The reader's answer for a target and the facts messages quote, computed when asked; the
    rest comes from the wrapper's :class:`.heads.HeadsRun`."""

    def __init__(self, answer, target):
        self.answer, self.t = answer, target
        self.module = answer if isinstance(answer, torch.nn.Module) else None
        heads = getattr(self.module, "heads", None)
        self.heads = list(heads) if isinstance(heads, (torch.nn.ModuleList, list)) else None

    def __getattr__(self, name):
        if name.startswith("_") or name in ("run", "heads"):
            raise AttributeError(name)
        return getattr(self.run, name)

    @cached_property
    def run(self):
        return HeadsRun(self.module, PROBE)

    got = property(lambda a: getattr(a.answer, "__name__", type(a.answer).__name__))
    given = property(lambda a: kind_of(a.answer))
    answer_shape = property(lambda a: tuple(a.answer.shape))
    num_heads = property(lambda a: len(a.heads))
    head_width = property(lambda a: a.heads[0].W_value.out_features)
    d_in = property(lambda a: a.heads[0].W_query.in_features)
    heads_phrase = property(lambda a: f"{a.num_heads} head" + "s" * (a.num_heads != 1))

    @property
    def not_a_head(self):
        n = next(n for n, h in enumerate(self.heads) if not is_head(h))
        return f"Head {n + 1} is a {type(self.heads[n]).__name__}"

    @property
    def context_length(self):
        masks = [getattr(h, "mask", None) for h in self.heads]
        return min((m.shape[0] for m in masks if isinstance(m, torch.Tensor)), default=None)

    def args_are(self, num_heads, d_out):
        return (self.num_heads, self.head_width) == (num_heads, d_out) and self.run.joined()

    @property
    def earlier(self):
        if self.d_in != 3 or (self.context_length or 0) < 6:
            return None
        return next((what for h, d, what in self.t.earlier if self.args_are(h, d)), None)

    @property
    def reshaped(self):
        """How the heads differ from what the constructor builds, in words, or ``None``."""
        layers = [[getattr(head, name) for name in PROJECTIONS] for head in self.heads]
        for n, head in enumerate(layers, 1):
            for name, layer in zip(PROJECTIONS, head):
                if (rows := layer.weight.shape[0]) != (width := layer.out_features):
                    has = f"its weight has {rows} row" + "s" * (rows != 1)
                    return f"head {n}'s {name} says out_features={width}, but {has}"
        widths = [[layer.out_features for layer in head] for head in layers]
        for n, (q, k, v) in enumerate(widths, start=1):
            if not q == k == v:
                return f"head {n}'s W_query, W_key and W_value are {q}, {k} and {v} values wide"
        if len({w[0] for w in widths}) > 1:
            numbers, sizes = (
                listed(map(str, range(1, len(widths) + 1))),
                listed(str(w[0]) for w in widths),
            )
            return f"heads {numbers} are {sizes} values wide"
        return None

    @cached_property
    def own(self):
        """Each head's own output on the batch, and on the batch with its last token changed."""
        changed = PROBE.clone()
        changed[:, -1] = torch.rand(2, 3, generator=torch.Generator().manual_seed(99))
        with evaluating(self.module):
            return [(attempt(h, PROBE), attempt(h, changed)) for h in self.heads]

    @property
    def leaking(self):
        """The number of the first head whose early tokens see a change in the last token."""
        leaks = [same(a[:, :-1], b[:, :-1]) is False and a.shape == b.shape for a, b in self.own]
        return leaks.index(True) + 1 if True in leaks else None

    def drops_columns(self):
        """Some heads' values never reach the output, narrower than the heads' outputs."""
        ends = [o for o, _ in self.own]
        if any(isinstance(o, torch.Tensor) and o.shape[-1] < self.head_width for o in ends):
            return True
        columns = self.run.right.unbind(-1)
        narrower = self.output.dim() == 3 and self.width < len(columns)
        return narrower and all(any(same(o, c) for c in columns) for o in self.output.unbind(-1))

    @property
    def head_fault(self):
        """``(head number, how)`` for the first head that does not compute causal attention."""
        for n, ((own, _), head, ref) in enumerate(zip(self.own, self.heads, self.refs), 1):
            if isinstance(own, Exception):
                return n, f"run on its own, it raised {describe_error(own)}"
            if not same(own, ref):
                return n, _how_it_differs(head, own, self.num_heads)
        return None

    def mixes_heads(self):
        """The output is an affine function of the heads' outputs side by side, fitted exactly."""
        if self.output.shape[:2] != PROBE.shape[:2] or same(self.output, self.run.right):
            return False
        inputs = torch.cat([self.run.right, torch.ones(2, 6, 1)], -1).flatten(0, 1).double()
        targets = self.output.flatten(0, 1).double()  # (b * num_tokens, width)
        residual = inputs @ torch.linalg.lstsq(inputs, targets).solution - targets
        return len(inputs) >= 2 * inputs.shape[1] and residual.norm() <= 1e-5 * targets.norm()

    def is_correct(self):
        return self.args_are(self.t.heads, self.t.width // self.t.heads) and not self.reshaped


def _how_it_differs(head, own, num_heads):
    """The one change to causal attention that gives the head's output ``own``, in words."""
    with torch.no_grad():
        q, k, v = project(head, PROBE)  # each (b, num_tokens, d_out)
    d, right = k.shape[-1], f"where causal attention divides them by √d_out = √{k.shape[-1]}"
    cut = "before the scores: a narrower head comes from a smaller d_out, not from slicing"
    tries = [
        (f"it cuts its queries and keys to their {which} {n} of {d} columns {cut}", part, s)
        for n in range(1, d)
        for which, part in (("first", slice(0, n)), ("last", slice(d - n, d)))
        for s in (n**0.5, d**0.5)
    ]
    total, d_in = num_heads * d, PROBE.shape[-1]
    whole = f"divided by √{total}, the square root of the whole output's width"
    scales = [("not scaled", 1.0), (f"divided by d_out = {d}", d), (whole, total**0.5)]
    scales.append((f"divided by √d_in = √{d_in}", d_in**0.5))
    tries += [(f"its scores are {what}, {right}", slice(None), s) for what, s in scales]
    for how, part, scale in tries:
        if same(own, attend(q[..., part], k[..., part], v, Recipe(scale=scale))):
            return how
    return "its output differs from the softmax of its own scaled, causally masked scores"
