"""check_gqa_forward's table of (answer, passes?, words its feedback must contain)."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha import GroupedQueryAttention as GQA
from mha import MultiHeadAttention
from mha.checks.gqa import GQA as PRACTICE
from mha.checks.gqa import check_gqa_forward
from mha.checks.practice import check_practice
from mha.gqa import KVCache, generate
from mha.gqa_exercise import gqa_forward
from mha.starting import Skeleton

BOOK, LAYERS = GQA.forward, ("W_query", "W_key", "W_value")  # BOOK: before a check watches it


def blocks(s, x, layers=LAYERS, bias=True, how=lambda s, t: t.unflatten(-1, (-1, s.head_dim))):
    """Queries (b, H, T, hd), keys and values (b, G, T, hd), from ``layers``, split ``how``."""
    made = (F.linear(x, getattr(s, n).weight, getattr(s, n).bias if bias else None) for n in layers)
    return [how(s, t).transpose(1, 2) for t in made]


# fmt: off
scaled = lambda root, dim=-1: lambda s, a: torch.softmax(a / root(s), dim=dim)  # noqa: E731
masked = lambda hidden, fill=-torch.inf: lambda s, a: a.masked_fill(hidden(s, a.shape[-1]), fill)  # noqa: E731
FUTURE, SAME, D = lambda s, T: s.mask[:T, :T], lambda s, t: t, lambda s, t: s.dropout(t)
STEPS = dict(split=blocks, keys=lambda s, t: t.repeat_interleave(s.group_size, 1),  # (b, H, T, hd)
             values=lambda s, t: t.repeat_interleave(s.group_size, 1), mask=masked(FUTURE),
             softmax=scaled(lambda s: s.head_dim**0.5), dropout=D, mix=lambda s, w, v: w @ v,
             merge=lambda s, c: c.transpose(1, 2).flatten(2), out=lambda s, c: s.out_proj(c))
def G(name, **steps):
    """A class on GroupedQueryAttention: the solution's steps, ``steps`` replacing some."""
    S = STEPS | steps
    def forward(s, x):
        q, k, v = S["split"](s, x)
        weights = S["dropout"](s, S["softmax"](s, S["mask"](s, q @ S["keys"](s, k).mT)))
        return S["out"](s, S["merge"](s, S["mix"](s, weights, S["values"](s, v))))
    return type(name, (GQA,), {"forward": forward})
def torch_attention(s, x, layer=False, **kw):  # PyTorch's own: its kernel, or its layer
    q, k, v = blocks(s, x)
    if layer:
        kv = [STEPS["keys"](s, t).transpose(1, 2).flatten(2) for t in (k, v)]  # (b, T, d_out)
        mha = nn.MultiheadAttention(s.d_out, s.num_heads, bias=False, batch_first=True)
        return s.out_proj(mha(s.W_query(x), *kv, attn_mask=FUTURE(s, x.shape[1]))[0])
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw)
    return s.out_proj(context.transpose(1, 2).flatten(2))
W = lambda name, forward, base=GQA: type(name, (base,), {"forward": forward})  # noqa: E731
by = lambda i: dict(keys=lambda s, t: t[:, i(s)], values=lambda s, t: t[:, i(s)])  # noqa: E731
def solution():
    namespace = dict(GroupedQueryAttention=GQA, torch=torch, check_gqa_forward=check_gqa_forward)
    return exec(gqa_forward.solution_code, namespace) or namespace["MyGroupedQueryAttention"]
RIGHT, HEADS = "matches the reference in all 5", lambda s: torch.arange(s.num_heads)
STRIDED = lambda s, t: t.unflatten(-1, (s.head_dim, -1)).mT  # noqa: E731  every G-th column
VIEWED = lambda s, t: t.reshape(t.shape[0], -1, *t.shape[1:2], s.head_dim).transpose(1, 2)  # noqa: E731
NO_T = dict(merge=lambda s, c: c.reshape(c.shape[0], c.shape[2], -1))  # merged, no transpose
UNDROPPED = dict(dropout=SAME)  # dropout moved from the attention weights elsewhere
FIRST = lambda t: t[:1].expand_as(t)  # noqa: E731  sequence 0's, for every sequence
KV = lambda how, n=1: lambda s, x: blocks(s, x)[:n] + blocks(s, x, LAYERS[n:], how=how)  # noqa: E731
COLS = G("columns", keys=SAME, values=SAME, split=KV(lambda s, t: t.repeat_interleave(  # columns
    s.group_size, -1).unflatten(-1, (-1, s.head_dim))))  # repeated, then split into num_heads
CASES = [  # right answers; mistakes; what raised; dropout; PyTorch's attention; the book's work
    (solution(), True, RIGHT), (G("steps"), True, RIGHT),
    (G("einsum", mix=lambda s, w, v: torch.einsum("bhqk,bhkd->bhqd", w, v)), True, RIGHT),
    (G("index", **by(lambda s: HEADS(s) // s.group_size)), True, RIGHT),
    (G("F.dropout", dropout=lambda s, w: F.dropout(w, s.dropout.p, s.training)), True, RIGHT),
    (G("cycled", **by(lambda s: HEADS(s) % s.num_kv_groups)), False, "h % num_kv_groups"),
    (G("keys cycled", keys=lambda s, t: t.repeat(1, s.group_size, 1, 1)), False, "another gr"),
    (G("kv width", softmax=scaled(lambda s: (s.d_out / s.group_size) ** 0.5)), False, "not scaled"),
    (G("d_out", softmax=scaled(lambda s: s.d_out**0.5)), False, "divided by √d_out"),
    (G("d_in", softmax=scaled(lambda s: s.W_query.in_features**0.5)), False, "by √d_in"),
    (G("num_heads", softmax=scaled(lambda s: s.num_heads**0.5)), False, "by √num_heads"),
    (G("h // G", **by(lambda s: HEADS(s) // s.num_kv_groups)), False, "runs past the"),
    (G("late", softmax=lambda s, a: torch.softmax(a, -1) / s.head_dim**0.5), False, "sum to 1:"),
    (G("dim -2", softmax=scaled(lambda s: s.head_dim**0.5, -2)), False, "dim=-1"),
    (G("no mask", mask=SAME), False, "no causal"), (G("merged", **NO_T), False, "without .tr"),
    (G("zero", mask=masked(FUTURE, 0.0)), False, "instead of -inf"), (COLS, False, "each column"),
    (G("late", mask=SAME, dropout=lambda s, w: D(s, masked(FUTURE, 0.0)(s, w))), False, "after"),
    (G("diag", mask=masked(lambda s, T: torch.ones(T, T).triu().bool())), False, "diagonal too"),
    (G("inverted", mask=masked(lambda s, T: ~s.mask[:T, :T])), False, "mask is inverted"),
    (G("shifted", mask=masked(lambda s, T: s.mask[:T, -T:])), False, "the last columns of self.m"),
    (G("unsliced", mask=masked(lambda s, T: s.mask)), False, "cut the mask to the input's"),
    (G("no bias", split=lambda s, x: blocks(s, x, bias=False)), False, "skip the biases"),
    (G("W_key", split=lambda s, x: blocks(s, x, LAYERS[:2] + LAYERS[1:2])), False, "values come"),
    (G("swap", split=lambda s, x: blocks(s, x, LAYERS[:1] + LAYERS[:0:-1])), False, "keys come f"),
    (G("strided", split=KV(STRIDED)), False, "split wrong"),
    (G("v strided", split=KV(STRIDED, 2)), False, "split wrong"),
    (G("viewed", split=lambda s, x: blocks(s, x, how=VIEWED), **NO_T), False, "one view straight"),
    (G("q viewed", split=lambda s, x: blocks(s, x, LAYERS[:1], how=VIEWED)
     + blocks(s, x, LAYERS[1:])), False, "Your queries are one view straight"),
    (G("no out_proj", out=SAME), False, "never applies out_proj"),
    (G("out bias", out=lambda s, c: F.linear(c, s.out_proj.weight)), False, "bias is missing"),
    (G("twice", out=lambda s, c: s.out_proj(s.out_proj(c))), False, "out_proj twice"),
    (G("row 0", out=lambda s, c: FIRST(s.out_proj(c))), False, "sequence 0's output"),
    (G("k0", **{n: lambda s, t, n=n: FIRST(STEPS[n](s, t)) for n in ("keys", "values")}), False,
     "sequence 0's keys"),
    (G("unmerged", merge=SAME, out=SAME), False, "still separate"),
    (G("none spread", keys=SAME, values=SAME), False, "once per head of its group"),
    (G("by G", keys=lambda s, t: t.repeat_interleave(s.num_kv_groups, 1)), False, "= 3 times"),
    (G("heads view", split=lambda s, x: blocks(s, x, how=lambda s, t: t.view(*t.shape[:2],
       s.num_heads, -1))), False, "view the keys and values with"),
    (G("tokens", keys=lambda s, t: t.repeat_interleave(s.group_size, 2)), False, "token axis"),
    (G("raises", out=lambda s, c: {}["surprise"]), False, "KeyError: 'surprise'"),
    (G("in eval", dropout=lambda s, w: F.dropout(w, s.dropout.p)), False, "self.dropout(attn_w"),
    (G("no dropout", **UNDROPPED), False, "yours drops nothing"),
    (G("v", **UNDROPPED, values=lambda s, t: D(s, STEPS["values"](s, t))), False, "the values"),
    (G("heads", **UNDROPPED, mix=lambda s, w, v: D(s, w @ v)), False, "drops the context"),
    (G("m", **UNDROPPED, merge=lambda s, c: D(s, STEPS["merge"](s, c))), False, "drops the cont"),
    (G("input", **UNDROPPED, split=lambda s, x: blocks(s, D(s, x))), False, "drops the input x"),
    (G("output", **UNDROPPED, out=lambda s, c: D(s, s.out_proj(c))), False, "drops the output"),
    (G("scores", **UNDROPPED, mask=lambda s, a: D(s, STEPS["mask"](s, a))), False, "masked s"),
    (G("double", dropout=lambda s, w: D(s, D(s, w))), False, "drops the weights twice"),
    (G("3x", softmax=scaled(lambda s: s.head_dim**1.5)), False, "three times"),
    (G("unscaled", softmax=scaled(lambda s: 1.0)), False, "not scaled by √head_dim at all"),
    (G("noise", dropout=lambda s, w: w + torch.randn_like(w) * s.training / 20), False, "noise,"),
    (W("gqa", lambda s, x: torch_attention(s, x, enable_gqa=True)), False, "enable_gqa=True"),
    (W("sdpa", lambda s, x: torch_attention(s, x)), False, "scaled_dot_product_attention"),
    (W("layer", lambda s, x: torch_attention(s, x, True)), False, "torch.nn.MultiheadAttention"),
    (GQA, False, "GroupedQueryAttention is one of the book's own modules"),
    (W("Skeleton", Skeleton.forward), False, "still raises NotImplementedError, as the starting"),
    (W("Empty", GQA.forward), False, "Empty does not define forward"),
    (W("super", lambda s, x: super(type(s), s).forward(x)), False, "GroupedQueryAttention.forw"),
    (W("saved", lambda s, x: BOOK(s, x)), False, "hands its work to the book's GroupedQueryAtt"),
    (W("cache", lambda s, x: generate(s, x, KVCache(s, *x.shape[:2]))), False, "attend_to_cache"),
    (W("MHA", lambda s, x: MultiHeadAttention.forward(s, x)), False, "MultiHeadAttention.forward"),
    (None, False, "got None"), (GQA(4, 4, 4, 0.0, 2, 1), False, "an instance of GroupedQueryAtt"),
    (type("BadInit", (G("x"),), {"__init__": lambda s, *a, **k: 1 / 0}), False, "Building your"),
    (type("NoLayers", (nn.Module,), {"__init__": lambda s, *a, **k: nn.Module.__init__(s),
     "forward": SAME}), False, "could not use your instance's W_query"),
]
NAMED = [(a, w) for a, _, w in CASES if any(w in m for _, m in PRACTICE.mistakes[:-1])]
# fmt: on


@pytest.mark.parametrize("answer, passes, words", CASES, ids=lambda v: getattr(v, "__name__", None))
def test_the_check(answer, passes, words):
    result = check_gqa_forward(answer)
    assert result.passed == passes and words in result.feedback, result.feedback
    assert "{" not in result.feedback and all(len(line) <= 79 for line in str(result).split("\n"))


@pytest.mark.parametrize("answer, words", NAMED, ids=lambda v: getattr(v, "__name__", None))
def test_a_row_fails_on_a_check_without_its_entry(answer, words):
    mistakes = tuple(m for m in PRACTICE.mistakes[:-1] if words not in m[1])
    without = replace(PRACTICE, mistakes=mistakes + PRACTICE.mistakes[-1:])
    assert words not in check_practice(without, answer).feedback
