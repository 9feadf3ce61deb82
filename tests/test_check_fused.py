"""check_fused_attention's table of (answer, passes?, words its feedback must contain): right
answers, the starting code, the book's classes, PyTorch's layer, each named mistake."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha import FusedMultiHeadAttention as BOOK
from mha import GroupedQueryAttention, MultiHeadAttention
from mha.checks.fused import FUSED, check_fused_attention
from mha.checks.practice import check_practice
from mha.fused_exercise import fused_attention
from mha.starting import FusedAttentionStart as START
from mha.starting import Skeleton

SAVED, SDPA = BOOK.forward, F.scaled_dot_product_attention  # saved before a check watches them


# fmt: off
def split(s, x, shape=lambda s: (3, s.num_heads, -1), axis=2, bias=True):
    """Queries, keys and values (b, H, T, hd) from self.qkv(x), its last axis read as ``shape``."""
    qkv = F.linear(x, s.qkv.weight, s.qkv.bias if bias else None).unflatten(-1, shape(s))
    return [t.transpose(1, 2) for t in qkv.unbind(axis)]  # from (b, T, H, hd)
def kernel(s, q, k, v, **changes):  # by keyword, as torch names them (the solution: by place)
    p = s.dropout_p if s.training else 0.0
    return SDPA(query=q, key=k, value=v, **dict(dropout_p=p, is_causal=True) | changes)
def F_(name, split=split, kernel=kernel, merge=lambda s, c: c.transpose(1, 2).flatten(2), out=None):
    """A class on the starting point: the solution's steps, some replaced."""
    def forward(s, x):
        context = merge(s, kernel(s, *split(s, x)))  # (b, T, d_out)
        return s.out_proj(context) if out is None else out(s, context)
    return type(name, (START,), {"forward": forward})
def manual(s, q, k, v):  # the kernel's work step by step
    w = (q @ k.mT).masked_fill(s.mask[: q.shape[2], : q.shape[2]], -torch.inf) / s.head_dim**0.5
    return D(s, torch.softmax(w, -1)) @ v
def torch_layer(s, x):  # PyTorch's layer on self.qkv's three parts, its projections identities
    layer = nn.MultiheadAttention(s.d_out, s.num_heads, bias=False, batch_first=True)
    eye, T = torch.eye(s.d_out), x.shape[1]
    layer.in_proj_weight.data, layer.out_proj.weight.data = eye.repeat(3, 1), eye
    return s.out_proj(layer(*s.qkv(x).chunk(3, -1), attn_mask=s.mask[:T, :T])[0])
def through_grouped(s, x):  # the weights copied into the book's GroupedQueryAttention
    inner = GroupedQueryAttention(s.d_in, s.d_out, s.mask.shape[0], s.dropout_p, s.num_heads,
                                  s.num_heads, s.qkv.bias is not None)
    parts = zip(*(t.chunk(3) for t in s.qkv.parameters()))  # (weight, bias) of each projection
    for layer, part in zip((inner.W_query, inner.W_key, inner.W_value), parts):
        layer.load_state_dict(dict(zip(("weight", "bias"), part)))
    inner.out_proj.load_state_dict(s.out_proj.state_dict())
    return inner.train(s.training)(x)
def solution():
    namespace = dict(FusedAttentionStart=START, F=F, torch=torch)
    code = fused_attention.solution_text.replace("fused_attention.check", "")
    return exec(code, namespace) or namespace["MyFusedAttention"]
def K(**changes):  # the kernel called with ``changes``
    return dict(kernel=lambda s, q, k, v: kernel(s, q, k, v, **changes))
K0, SAME, D = K(dropout_p=0.0), lambda s, t: t, lambda s, t: F.dropout(t, s.dropout_p, s.training)
PRAISE, MIXED, ALL = "matches the book's modules", "heads and tokens are mixed up", "all queries"
FLAT, ROLES = dict(merge=lambda s, c: c.flatten(2)), "queries, keys and values are mixed up"
def masked(keep):  # the kernel given attn_mask=keep(s, T), True where a query may look
    return dict(kernel=lambda s, q, k, v: kernel(s, q, k, v, is_causal=False,
                                                 attn_mask=keep(s, q.shape[2])))
CASES = [  # right answers in several styles; mistakes; the kernel and its result unused; dropout
    # in a wrong place or in eval mode; the book's own work and the starting code; not a class
    (SOL := solution(), True, PRAISE), (F_("permute"), True, PRAISE),
    (F_("chunk", split=lambda s, x: [t.unflatten(-1, (s.num_heads, -1)).transpose(1, 2)
                                     for t in s.qkv(x).chunk(3, -1)]), True, PRAISE),
    (F_("bool mask", **masked(lambda s, T: ~s.mask[:T, :T])), True, PRAISE),
    (F_("float mask", **masked(lambda s, T: s.mask[:T, :T] * -1e9)), True, PRAISE),
    (F_("no mask", **K(is_causal=False)), False, "no causal mask"),
    (F_("inverted", **masked(lambda s, T: s.mask[:T, :T])), False, "the wrong way round"),
    (F_("diagonal", **masked(lambda s, T: s.mask[:T, :T].T)), False, "hides each token from it"),
    (F_("tokens", split=lambda s, x: [t.movedim(1, 2) for t in split(s, x)], **FLAT), False, MIXED),
    (F_("viewed", split=lambda s, x: [t.reshape(t.shape[0], s.num_heads, t.shape[1], -1) for t in
       s.qkv(x).chunk(3, -1)]), False, MIXED),
    (F_("merged", merge=lambda s, c: c.reshape(c.shape[0], c.shape[2], -1)), False, MIXED),
    (F_("interleaved", merge=lambda s, c: c.permute(0, 2, 3, 1).flatten(2)), False, "interleaves"),
    (F_("no perm", split=lambda s, x: [t.transpose(1, 2) for t in split(s, x)], merge=lambda s, c:
       c.transpose(1, 2).reshape(c.shape[0], c.shape[1], -1)), False, MIXED),
    (F_("heads, 3", split=lambda s, x: split(s, x, lambda s: (s.num_heads, 3, -1), 3)), False, ALL),
    (F_("strided", split=lambda s, x: [t.permute(0, 3, 2, 1) for t in split(s, x, lambda s: (3, -1,
       s.num_heads))]), False, "all queries, then all keys"),
    (F_("k, q, v", split=lambda s, x: split(s, x)[1::-1] + split(s, x)[2:]), False, ROLES),
    (F_("q, v, k", split=lambda s, x: split(s, x)[:1] + split(s, x)[:0:-1]), False, ROLES),
    (F_("q / √hd", kernel=lambda s, q, k, v: kernel(s, q / s.head_dim**0.5, k, v)), False, "twice"),
    (F_("1", **K(scale=1.0)), False, "leave its"), (F_("no out", out=SAME), False, "never applies"),
    (F_("d_out", kernel=lambda s, *a: kernel(s, *a, scale=s.d_out**-0.5)), False, "leave its"),
    (F_("√hd", kernel=lambda s, *a: kernel(s, *a, scale=s.head_dim**0.5)), False, "multiplies the"),
    (F_("no bias", split=lambda s, x: split(s, x, bias=False)), False, "leaves out the bias"),
    (F_("out bias", out=lambda s, c: F.linear(c, s.out_proj.weight)), False, "bias is missing"),
    (F_("tuple", out=lambda s, c: (s.out_proj(c), None)), False, "returned a tuple, not a tensor"),
    (F_("unmerged", merge=SAME, out=SAME), False, "the heads are still separate"),
    (F_("× -inf", **masked(lambda s, T: s.mask[:T, :T] * -torch.inf)), False, "nan everywhere"),
    (F_("tril float", **masked(lambda s, T: torch.ones(T, T).tril())), False, "added to the sc"),
    (F_("3, tokens", split=lambda s, x: [t.transpose(1, 2) for t in s.qkv(x).view(x.shape[0], 3,
       x.shape[1], s.num_heads, -1).unbind(1)]), False, "all queries, then all keys"),
    (F_("unsliced", **masked(lambda s, T: ~s.mask)), False, "cut the mask to the input's length"),
    (F_("chunk view", split=lambda s, x: [t.view(t.shape[0], s.num_heads, t.shape[1], -1) for t in
       s.qkv(x).chunk(3, -1)]), False, ".contiguous() before .view"),
    (F_("raises", out=lambda s, c: {}["surprise"]), False, "KeyError: 'surprise'"),
    (F_("in", merge=lambda s, c: c.movedim(1, 2).reshape(*c.shape[:3:2], s.d_in)), False,
     "not d_in"),
    (F_("keys .mT", kernel=lambda s, q, k, v: kernel(s, q, k.mT, v)), False, "transposes them it"),
    (type("res", (START,), {"forward": lambda s, x: SOL.forward(s, x) + x}), False, "residual"),
    (type("BadInit", (F_("x"),), {"__init__": lambda s, *a, **k: 1 / 0}), False, "ZeroDivision"),
    (F_("by hand", kernel=manual), False, "computes the attention step by step"),
    (F_("decoy", kernel=lambda *a: (kernel(*a), manual(*a))[1]), False, "does not use what it ret"),
    (type("layer", (START,), {"forward": torch_layer}), False, "torch.nn.MultiheadAttention"),
    (F_("always", kernel=lambda s, *a: kernel(s, *a, dropout_p=s.dropout_p)), False, "only while"),
    (F_("no dropout", **K0), False, "yours drops nothing"),
    (F_("values", kernel=lambda s, q, k, v: K0["kernel"](s, q, k, D(s, v))), False, "drops the v"),
    (F_("context", kernel=lambda s, *a: D(s, K0["kernel"](s, *a))), False, "drops the context"),
    (F_("twice", merge=lambda s, c: D(s, c).transpose(1, 2).flatten(2)), False, "context again"),
    (F_("input", split=lambda s, x: split(s, D(s, x)), **K0), False, "yours drops the input x"),
    (F_("output", **K0, out=lambda s, c: D(s, s.out_proj(c))), False, "yours drops the output"),
    (F_("noise", kernel=lambda s, q, k, v: K0["kernel"](s, q, k, v) + 0.05 * torch.randn_like(q)
       * s.training), False, "noise, not dropout"),
    (type("calls", (START,), {"forward": lambda s, x: BOOK.forward(s, x)}), False, "hands its wo"),
    (type("saved", (START,), {"forward": lambda s, x: SAVED(s, x)}), False, "FusedMultiHeadAtt"),
    (type("grouped", (START,), {"forward": through_grouped}), False, "GroupedQueryAttention"),
    (BOOK, False, "one of the book's own modules"), (MultiHeadAttention, False, "book's own"),
    (type("assigned", (START,), {"forward": BOOK.forward}), False, "the book's FusedMultiHeadAt"),
    (START, False, "What are the steps from x to the output?"),
    (type("Empty", (START,), {}), False, "fused_attention.hint(1) gives a first nudge"),
    (F_("Skeleton", split=Skeleton.forward), False, "fused_attention.hint(1), just below the"),
    (None, False, "got None"), (START(4, 4, 4, 0.0, 2), False, "an instance of FusedAttentionSt"),
    (nn.Linear, False, "does not start from FusedAttentionStart"),
]
NAMED = [(a, w) for a, _, w in CASES if any(w in m for _, m in FUSED.mistakes[:-1])]
# fmt: on


@pytest.mark.parametrize("answer, passes, words", CASES, ids=lambda v: getattr(v, "__name__", None))
def test_the_check(answer, passes, words):
    result = check_fused_attention(answer)
    assert result.passed == passes and words in result.feedback, result.feedback
    assert all(len(line) <= 79 for line in str(result).split("\n"))


@pytest.mark.parametrize("answer, words", NAMED, ids=lambda v: getattr(v, "__name__", None))
def test_a_row_fails_on_a_check_without_its_entry(answer, words):
    mistakes = tuple(m for m in FUSED.mistakes[:-1] if words not in m[1])
    without = replace(FUSED, mistakes=mistakes + FUSED.mistakes[-1:])
    assert words not in check_practice(without, answer).feedback


def test_the_starting_code_is_told_without_the_configuration_or_the_kernels_name():
    feedback = check_fused_attention(F_("Skeleton", split=Skeleton.forward)).feedback
    assert "Seen with" not in feedback and "is_causal" not in feedback
