"""The evidence chapter 2's catalogue (:mod:`.arguments`) judges: the reader's wrapper run once
on the chapter's batch (:class:`Attempt`), each head's right output computed from its own
weights (:func:`.reference.head_output`), and the facts the messages quote."""

from functools import cached_property

import torch

from .core import describe_error, evaluating, kind_of, listed
from .reference import PROJECTIONS, Recipe, attend, head_output, project, same

#: The chapter's batch (two sequences of six tokens three values wide), and the same batch with
#: its last token changed: a head whose earlier tokens see the change attends to later tokens.
PROBE = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(2024))  # (b, tokens, d_in)
LAST = torch.rand((2, 1, 3), generator=torch.Generator().manual_seed(99))  # (b, 1, d_in)
MOVED = torch.cat([PROBE[:, :-1], LAST], dim=1)  # (b, tokens, d_in)


def attempt(function, *args):
    """``function(*args)``, or the exception it raised."""
    try:
        return function(*args)
    except Exception as error:
        return error


def is_head(module):
    """Whether ``module`` has its own query, key and value projections, as a head has."""
    layers = [getattr(module, name, None) for name in PROJECTIONS]
    return isinstance(module, torch.nn.Module) and all(
        isinstance(x, torch.nn.Linear) for x in layers
    )


class Attempt:
    """The answer for a target, and the facts the messages quote, each computed when asked."""

    def __init__(self, answer, target):
        self.answer, self.t, self.x = answer, target, PROBE
        self.module = answer if isinstance(answer, torch.nn.Module) else None
        heads = getattr(self.module, "heads", None)
        self.heads = list(heads) if isinstance(heads, (torch.nn.ModuleList, list)) else None

    @cached_property
    def run(self):
        """The wrapper's output on the batch (or its exception), and what each head was given."""
        given = [[] for _ in self.heads]
        hooks = [
            h.register_forward_pre_hook(
                lambda _, args, kwargs, n=n: given[n].append([*args, *kwargs.values()][0]),
                with_kwargs=True,
            )
            for n, h in enumerate(self.heads)
        ]
        try:
            with torch.random.fork_rng(devices=[]), evaluating(self.module):
                return attempt(self.module, PROBE), given
        finally:
            for hook in hooks:
                hook.remove()

    @cached_property
    def heads_alone(self):
        """Per head: its right output, and its own outputs on the batch and the moved batch."""
        with torch.random.fork_rng(devices=[]), evaluating(self.module):
            return [[attempt(f, *a) for f, *a in ((head_output, h, PROBE), (h, PROBE), (h, MOVED))]
                    for h in self.heads]  # fmt: skip

    output = property(lambda a: a.run[0])
    error = property(lambda a: a.output if isinstance(a.output, Exception) else None)
    refs = property(lambda a: [right for right, _, _ in a.heads_alone])
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
    not_a_head = property(
        lambda a: next(
            f"Head {n} is a {type(h).__name__}" for n, h in enumerate(a.heads, 1) if not is_head(h)
        )
    )
    masks = property(
        lambda a: [m for h in a.heads if isinstance(m := getattr(h, "mask", 0), torch.Tensor)]
    )
    context_length = property(lambda a: min((m.shape[0] for m in a.masks), default=6))

    def joined(self):
        """Every head was given the batch and the output is their outputs side by side."""
        return self.error is None and self.fed is None and same(self.output, self.right)

    def args_are(self, num_heads, d_out):
        return (self.num_heads, self.head_width) == (num_heads, d_out) and self.joined()

    @property
    def earlier(self):
        if self.d_in != 3 or self.context_length < 6:
            return None
        return next((what for h, d, what in self.t.earlier if self.args_are(h, d)), None)

    @property
    def fed(self):
        """``(head number, what it was given)`` for the first head not given the batch."""
        for n, inputs in enumerate(self.run[1], 1):
            for x in (x for x in inputs if not same(x, self.x)):
                if not isinstance(x, torch.Tensor):
                    return n, kind_of(x)
                mine = [k for k, ref in enumerate(self.refs, 1) if same(x, ref)]
                shape = tuple(x.shape)
                return (
                    n,
                    f"head {mine[0]}'s output (shape {shape})"
                    if mine
                    else f"another tensor, of shape {shape}",
                )
        return None

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

    @property
    def reshaped(self):
        """How the heads differ from what the constructor builds, in words, or ``None``."""
        layers = [[getattr(h, name) for name in PROJECTIONS] for h in self.heads]
        for n, name, layer in (
            (n, *p) for n, h in enumerate(layers, 1) for p in zip(PROJECTIONS, h)
        ):
            if (rows := layer.weight.shape[0]) != layer.out_features:
                has = f"its weight has {rows} row" + "s" * (rows != 1)
                return f"head {n}'s {name} says out_features={layer.out_features}, but {has}"
        widths = [[layer.out_features for layer in head] for head in layers]
        for n, (q, k, v) in enumerate(widths, 1):
            if not q == k == v:
                return f"head {n}'s W_query, W_key and W_value are {q}, {k} and {v} values wide"
        if len({w[0] for w in widths}) > 1:
            numbers = listed(str(n) for n in range(1, len(widths) + 1))
            return f"heads {numbers} are {listed(str(w[0]) for w in widths)} values wide"
        return None

    def drops_columns(self):
        """Some heads' values never reach the output, narrower than the heads' outputs."""
        if any(own.shape[-1] < self.head_width for _, own, _ in self.heads_alone):
            return True
        columns = self.right.unbind(-1)
        narrower = self.output.dim() == 3 and self.width < len(columns)
        return narrower and all(any(same(o, c) for c in columns) for o in self.output.unbind(-1))

    @property
    def head_fault(self):
        """``(head number, how)`` for the first head that does not compute causal attention."""
        changed = "no longer computes causal attention as it was built to:"
        for n, (head, (ref, own, moved)) in enumerate(zip(self.heads, self.heads_alone), 1):
            if isinstance(own, Exception):
                return n, f"{changed} run on its own, it raised {describe_error(own)}"
            if own.shape == moved.shape and not same(own[:, :-1], moved[:, :-1]):
                return (
                    n,
                    "lets tokens attend to later tokens: its causal mask was removed or altered",
                )
            if not same(own, ref):
                return n, f"{changed} {how_it_differs(head, own, self.num_heads)}"
        return None

    def mixes_heads(self):
        """The output is an affine function of the heads' outputs side by side, fitted exactly."""
        if self.output.shape[:2] != PROBE.shape[:2] or same(self.output, self.right):
            return False
        inputs = torch.cat([self.right, torch.ones(2, 6, 1)], -1).flatten(0, 1).double()
        targets = self.output.flatten(0, 1).double()  # (b * num_tokens, width)
        residual = inputs @ torch.linalg.lstsq(inputs, targets).solution - targets
        return len(inputs) >= 2 * inputs.shape[1] and residual.norm() <= 1e-5 * targets.norm()


def how_it_differs(head, own, num_heads):
    """The one change to causal attention that gives the head's output ``own``, in words."""
    with torch.no_grad():
        q, k, v = project(head, PROBE)  # each (b, num_tokens, d_out)
    d, total = k.shape[-1], num_heads * k.shape[-1]
    tries = [
        (f"it cuts its queries and keys to their {which} {n} of {d} columns before the scores: "
         "a narrower head comes from a smaller d_out, not from slicing", part, s)
        for n in range(1, d)
        for which, part in (("first", slice(0, n)), ("last", slice(d - n, d)))
        for s in (n**0.5, d**0.5)
    ]  # fmt: skip
    whole = f"divided by √{total}, the square root of the whole output's width"
    for what, s in (
        (f"divided by d_out = {d}", d),
        (whole, total**0.5),
        ("divided by √d_in = √3", 3**0.5),
    ):
        tries.append(
            (
                f"its scores are {what}, where causal attention divides them by √d_out = √{d}",
                slice(None),
                s,
            )
        )
    for how, part, scale in tries:
        if same(own, attend(q[..., part], k[..., part], v, Recipe(scale=scale))):
            return how
    return "its output differs from the softmax of its own scaled, causally masked scores"
