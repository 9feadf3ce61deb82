"""What chapter 2's checks know about a wrapper whose arguments were chosen: the evidence
(:class:`Attempt`) and the catalogue of mistakes (:data:`MISTAKES`), most specific first."""

import types
from functools import cached_property

import torch

from .core import Mistake, describe_error, evaluating, kind_of, listed
from .heads import JOINS, HeadsRun, attempt, is_head
from .reference import PROJECTIONS, Recipe, attend, project, same

#: The chapter's batch: two sequences of six tokens three values wide, and the starting call.
PROBE = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(2024))  # (b, tokens, d_in)
START = dict(d_in=3, d_out=2, context_length=6, num_heads=2)
KEEP_FORWARD = "torch.cat([head(x) for head in self.heads], dim=-1)"
ROLE = "Each head's role must stay as it was: change only the arguments of the call."


class Attempt:
    """The reader's answer for a target, and the facts the messages quote, each computed when a
    mistake asks; what it does not know it asks the wrapper's :class:`.heads.HeadsRun`."""

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
    not_a_head = property(
        lambda a: next(
            f"Head {n} is a {type(h).__name__}" for n, h in enumerate(a.heads, 1) if not is_head(h)
        )
    )

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
        for n, (name, layer) in (
            (n, p) for n, h in enumerate(layers, 1) for p in zip(PROJECTIONS, h)
        ):
            if (rows := layer.weight.shape[0]) != layer.out_features:
                return (
                    f"head {n}'s {name} says out_features={layer.out_features}, but its "
                    f"weight has {rows} row{'s' * (rows != 1)}"
                )
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
    tries += [
        (f"its scores are {what}, {right}", slice(None), s)
        for what, s in (
            ("not scaled", 1.0),
            (f"divided by d_out = {d}", d),
            (
                f"divided by √{num_heads * d}, the square root of the whole output's width",
                (num_heads * d) ** 0.5,
            ),
            (f"divided by √d_in = √{PROBE.shape[-1]}", PROBE.shape[-1] ** 0.5),
        )
    ]
    for how, part, scale in tries:
        if same(own, attend(q[..., part], k[..., part], v, Recipe(scale=scale))):
            return how
    return "its output differs from the softmax of its own scaled, causally masked scores"


ASK = "How many values must each of the {t.heads} heads give? {t.exercise}.hint(1) starts there."

#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake(
        "passed the class",
        "You passed the class {got} itself, not a wrapper built from it: build one, my_wrapper "
        "= MultiHeadAttentionWrapper(...), and pass my_wrapper.",
        lambda a: isinstance(a.answer, type),
    ),
    Mistake(
        "passed a Python module",
        "You passed the Python module {got}, not a wrapper: import {got} binds that name. "
        "Give your wrapper a name of its own and pass it.",
        lambda a: isinstance(a.answer, types.ModuleType),
    ),
    Mistake(
        "passed a tensor",
        "You passed a tensor of shape {answer_shape}, probably the wrapper's output. Pass the "
        "wrapper itself: {t.check}(my_wrapper), not {t.check}(my_wrapper(batch)).",
        lambda a: isinstance(a.answer, torch.Tensor),
    ),
    Mistake(
        "not a module",
        "{t.check} needs the wrapper you built (a torch.nn.Module), but it was given {given}.",
        lambda a: a.module is None,
    ),
    Mistake(
        "the weight-split class",
        "A {got} packs its heads into one set of weights (chapter 3's weight splits), and its "
        "d_out is the width of the whole output: build a MultiHeadAttentionWrapper.",
        lambda a: a.heads is None and is_head(a.module) and hasattr(a.module, "num_heads"),
    ),
    Mistake(
        "a single head",
        "This is a single attention head (a {got}), not a wrapper of heads: build a "
        "MultiHeadAttentionWrapper with {t.heads} heads.",
        lambda a: a.heads is None and is_head(a.module),
    ),
    Mistake(
        "not the wrapper",
        "A {got} has no list of heads (no .heads): it is not a MultiHeadAttentionWrapper. Keep "
        "the class as it is and change only the arguments of its call.",
        lambda a: not a.heads,
    ),
    Mistake(
        "a head that is not an attention head",
        "{not_a_head}, not an attention head with its own W_query, W_key and W_value. " + ROLE,
        lambda a: not all(is_head(h) for h in a.heads),
    ),
    Mistake(
        "a projection reshaped after the call",
        "Your heads are not as the constructor builds them: {reshaped}. So the heads were "
        "changed after the call; d_out gives every head's projections one width.",
        lambda a: a.reshaped is not None,
    ),
    Mistake(
        "the starting wrapper",
        "This is the starting wrapper, unchanged: {num_heads} heads and {width}-dimensional "
        "context vectors, where the exercise asks for {t.heads} heads and {t.width}-dimensional "
        "ones. What decides the width of the wrapper's output? {t.exercise}.hint(1) starts "
        "from there.",
        lambda a: (
            a.args_are(START["num_heads"], START["d_out"]) and a.d_in == 3 and a.context_length == 6
        ),
    ),
    Mistake(
        "an answer from earlier in the book",
        "This is {earlier}: {heads_phrase} of width {head_width}, num_heads × d_out = "
        "{num_heads} × {head_width} = {width} values wide. This practice asks for {t.width} "
        "values from {t.heads} heads. " + ASK,
        lambda a: a.earlier is not None,
    ),
    Mistake(
        "d_in changed",
        "Your heads expect tokens {d_in} values wide (d_in={d_in}), but the example's tokens "
        "are 3 wide, batch shape (2, 6, 3): d_in describes the input, keep d_in=3.",
        lambda a: a.d_in != 3,
    ),
    Mistake(
        "num_heads changed",
        "Your wrapper has {heads_phrase}, but the exercise asks for {t.heads}: keep "
        "num_heads={t.heads}, and set each head's width with d_out.",
        lambda a: a.num_heads != a.t.heads,
    ),
    Mistake(
        "one head object repeated",
        "Two of your heads share one set of weights ({sharing}), so they always compute the "
        "same thing: build one new CausalAttention per head, as the wrapper does.",
        lambda a: a.sharing is not None,
    ),
    Mistake(
        "context_length too short",
        "context_length={context_length} makes the causal mask cover only {context_length} "
        "tokens, but the example has 6: context_length is the longest sequence, not the output "
        "width; keep it at 6 (or more).",
        lambda a: (a.context_length or 6) < 6,
    ),
    JOINS[0],
    Mistake(
        "a head attends to later tokens",
        "Head {leaking} lets tokens attend to later tokens: its causal mask was removed or "
        "altered. " + ROLE,
        lambda a: a.leaking is not None,
    ),
    Mistake(
        "columns thrown away",
        "Your wrapper throws values away: each head computes {head_width} values per token, "
        "and not all reach the output. Make each head narrower instead: d_out is each head's "
        "width.",
        lambda a: a.head_width > 1 and a.drops_columns(),
    ),
    Mistake(
        "a head's computation changed",
        "Head {head_fault[0]} no longer computes causal attention as it was built to: "
        "{head_fault[1]}. " + ROLE,
        lambda a: a.head_fault is not None,
    ),
    *JOINS[1:],
    Mistake(
        "heads mixed by a projection",
        "Your output is a weighted mix of the heads' outputs, as an extra layer after torch.cat "
        "makes: a learned mix of heads (chapter 3's out_proj) blends all heads into every "
        "coordinate. Keep the class, and choose each head's width with d_out.",
        lambda a: a.mixes_heads(),
    ),
    Mistake(
        "d_out taken as the total width",
        "You gave d_out={head_width}, the total width you want, but d_out is the width of each "
        "head: num_heads × d_out = {num_heads} × {head_width} = {width}. " + ASK,
        lambda a: a.run.joined() and a.head_width == a.t.width != a.width,
    ),
    Mistake(
        "wrong width",
        "Your context vectors are {width}-dimensional, not {t.width}: num_heads × d_out = "
        "{num_heads} × {head_width} = {width}, as d_out is the width of each head. " + ASK,
        lambda a: a.run.joined() and a.width != a.t.width,
    ),
)
