"""Chapter 3's check as one table (answer, passes?, words its feedback needs): the shortcuts, and
the solution as a learner would edit it (:func:`edited`), a mistake at every step."""

import dataclasses
import inspect

import pytest
import torch
import torch.nn.functional as F

from mha import MultiHeadAttention
from mha.checks.practice import checker
from mha.checks.weight_split import WEIGHT_SPLIT, check_weight_split
from mha.starting import WeightSplitSkeleton
from mha.weight_split_exercise import MyWeightSplit, weight_split

BOOK_FORWARD, SOURCE = MultiHeadAttention.forward, inspect.getsource(MyWeightSplit)  # saved first


def edited(*edits):
    """The solution with a learner's edits, ``(old, new)`` pairs of its text (each old is there)."""
    code = SOURCE
    for old, new in zip(edits[::2], edits[1::2], strict=True):
        assert old in code, old
        code = code.replace(old, new)
    names = dict(__name__="learner", torch=torch, F=F, WeightSplitSkeleton=WeightSplitSkeleton)
    return exec(code, names) or names["MyWeightSplit"]


# fmt: off
E, LAYERS = edited, lambda self: (self.W_query, self.W_key, self.W_value)
subclass = lambda forward: type("MyWeightSplit", (WeightSplitSkeleton,), {"forward": forward})  # noqa
MASK, SCALE = "self.mask[:num_tokens, :num_tokens]", "self.head_dim**0.5"
OUT, SPLIT = "self.out_proj(context)", ".view(by_head).transpose(1, 2)"
DROP, SOFT = "self.dropout(torch.softmax(scaled, dim=-1))", "torch.softmax(scaled, dim=-1)"
NO_BIAS = [e for n in ("query", "key", "value")  # each layer as x @ W.weight.T: its bias left out
           for e in (f"self.W_{n}(x)", f"(x @ self.W_{n}.weight.T)")]
MOVED, MIX = (DROP, SOFT), "attn_weights @ values"  # MOVED: dropout off the weights, elsewhere
BY_HAND = lambda scale: (DROP, SOFT + "\n        if self.training and self.dropout.p > 0:\n"  # noqa: E731
                         "            kept = torch.rand_like(attn_weights) >= self.dropout.p\n"
                         f"            attn_weights = attn_weights * kept{scale}")  # scaled how
def einsum(self, x):
    q, k, v = (f(x).unflatten(-1, (self.num_heads, -1)) for f in LAYERS(self))
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.head_dim**-0.5
    s = s.masked_fill(torch.ones(x.shape[1], x.shape[1]).triu(1).bool(), -1e9)
    w = self.dropout(s.softmax(-1))
    return self.out_proj(torch.einsum("bhqk,bkhd->bqhd", w, v).flatten(2))
def loop(self, x):  # a head at a time, from column blocks
    (q, k, v), T, d = (f(x) for f in LAYERS(self)), x.shape[1], self.head_dim
    blocks = [slice(h * d, (h + 1) * d) for h in range(self.num_heads)]
    s = [(q[..., c] @ k[..., c].mT).masked_fill(self.mask[:T, :T], -torch.inf) for c in blocks]
    heads = [self.dropout((t / d**0.5).softmax(-1)) @ v[..., c] for t, c in zip(s, blocks)]
    return self.out_proj(torch.cat(heads, -1))
SavedInClass = type("SavedInClass", (WeightSplitSkeleton,),  # a saved reference, called
                    {"book": MultiHeadAttention.forward, "forward": lambda self, x: self.book(x)})
def sdpa(self, x):
    b, T, _ = x.shape
    q, k, v = (f(x).view(b, T, self.num_heads, -1).transpose(1, 2) for f in LAYERS(self))
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.out_proj(context.transpose(1, 2).reshape(b, T, self.d_out))
CASES = [  # (answer, passes, words)
    (weight_split.solution_code, True, "all 7 configurations"),
    (subclass(einsum), True, "all 7"), (subclass(loop), True, "all 7"),
    (WeightSplitSkeleton, False, "What does each head need"),  # the starting code
    (MultiHeadAttention, False, "one of the book's own modules"),
    (subclass(lambda self, x: BOOK_FORWARD(self, x)), False, "book's MultiHeadAttention.forward"),
    (SavedInClass, False, "book's MultiHeadAttention.forward"),
    (subclass(sdpa), False, "scaled_dot_product_attention"), ("MyWeightSplit", False, "a class"),
    (E("keys = self.W_key(x)", "keys = self.W_query(x)"), False, "keys come from W_query"),
    (E("values = self.W_value(x)", "values = self.W_key(x)"), False, "values come from W_key"),
    (E("queries @ keys.transpose(2, 3)", "keys @ queries.transpose(2, 3)"), False, "keys @ quer"),
    (E("keys.transpose(2, 3)", "keys.transpose(1, 2)"), False, "keys.transpose(2, 3)"),
    (E("keys.transpose(2, 3)", "keys.transpose(1, 3)"), False, "(1 and 2, or 1 and 3)"),
    (E("keys.transpose(2, 3)", "keys"), False, "keys' last two"), (E(*NO_BIAS), False, "biases"),
    (E("W_key(x)" + SPLIT, "W_key(x).view(by_head).permute(0, 2, 3, 1)"), False, "keys as the q"),
    (E("self.num_heads, self.head_dim)", "3, self.d_out // 3)"), False, "as if it had 3 heads"),
    (E("self.W_query(x)", "(x @ self.W_query.weight)"), False, "x @ weight.T + bias"),
    (E(SPLIT, ".view(b, self.num_heads, num_tokens, -1)"), False, "mixes tokens and heads"),
    (E("self.num_heads, self.head_dim)", "self.head_dim, self.num_heads)", SPLIT,
       ".view(by_head).permute(0, 3, 1, 2)"), False, "every num_heads-th column"),
    (E(SPLIT, ".transpose(1, 2).reshape(b, self.num_heads, num_tokens, -1)"), False, "a transpose"),
    (E("self.W_value(x)" + SPLIT, "self.W_value(x).view(b, self.num_heads, num_tokens, -1)"),
     False, "Your values are one view"),
    (E(SCALE, "x.shape[-1]**0.5"), False, "√d_in"), (E(SCALE, "self.d_out**.5"), False, "√d_out"),
    (E(SCALE, "1"), False, "not scaled by √he"), (E(SCALE, "self.num_heads**.5"), False, "√num_h"),
    (E(SCALE, "self.head_dim"), False, "divided by head_dim"), (E(SCALE, "num_tokens**0.5"), False,
     "√num_tokens"), (E(SCALE, "self.head_dim**0.25"), False, "√√head_dim"),
    (E(f"/ {SCALE}", f"* {SCALE}"), False, "multiplied by √head_dim"),
    (E(SCALE, "(self.head_dim**1/2)"), False, "by head_dim /"),
    (E(SCALE, "self.head_dim**1/2"), False, "by 2 head_d"), (E("torch.inf)", "0)"), False, "0 in"),
    (E(SCALE, f"{SCALE} * 3"), False, "first differ at the attention weights"),
    (E(f" / {SCALE}", "", SOFT, f"{SOFT} / {SCALE}"), False, "after the softmax"),
    (E("attn_scores.masked_fill(future, -torch.inf)", "attn_scores"), False, "no causal mask"),
    (E("attn_scores.masked_fill(future, -torch.inf)", "attn_scores", SOFT,
       f"{SOFT}.masked_fill(future, 0.0)"), False, "no longer sum to 1"),
    (E("attn_scores.masked_fill(future, -torch.inf)", "attn_scores + future"), False, "numbers"),
    (E(MASK, f"~{MASK}"), False, "inverted"), (E(MASK, f"{MASK}.T"), False, "transposed"),
    (E(MASK, "self.mask"), False, "cut the mask to the input's length"),
    (E(MASK, "self.mask[:6, :6]"), False, "cut the mask to the input's length"),
    (E(MASK, "self.mask[:num_tokens, -num_tokens:]"), False, "-T:]"),
    (E(MASK, "torch.ones(num_tokens, num_tokens).triu().bool()"), False, "hides the diagonal too"),
    (E(MASK, "torch.ones(num_tokens, num_tokens).triu().bool()", SOFT, f"{SOFT}.nan_to_num(0.0)"),
     False, "nan_to_num"),
    (E("dim=-1", "dim=-2"), False, "over the queries"), (E("dim=-1", "dim=1"), False, "axis 1"),
    (E("(attn_weights @ values)", "(attn_weights.mT @ values)"), False, "weights transposed"),
    (E("(attn_weights @ values).transpose(1, 2)", "(attn_weights @ values)"), False, "without .t"),
    (E("context.contiguous().view", "context.view"), False, ".contiguous()"),
    (E("values).transpose(1, 2)", "values).permute(0, 2, 3, 1)"), False, "interleaves the heads'"),
    (E("context.contiguous().view(b, num_tokens, self.d_out)",
       "context.mean(2).repeat(1, 1, self.num_heads)"), False, "averaged, not placed side by"),
    (E("b, num_tokens, _ = x.shape", "B, T, _ = x.shape\n        x = x.reshape(1, B * T, -1)\n"
       "        b, num_tokens, _ = x.shape", MASK, "torch.ones(num_tokens, num_tokens).triu(1) > 0",
       OUT, f"{OUT}.view(B, T, -1)"), False, "attend to each other"),
    (E("keys.transpose(2, 3)", "keys[:1].expand_as(keys).transpose(2, 3)", "@ values)",
       "@ values[:1].expand_as(values))"), False, "0's keys"),
    (E(OUT, f"{OUT}[:1].expand(b, -1, -1)"), False, "0's output"),
    (E(f"return {OUT}", "return context"), False, "never applies"),
    (E(OUT, "self.out_proj(self.out_proj(context))"), False, "out_proj twice"),
    (E(OUT, "context @ self.out_proj.weight.T"), False, "bias is missing"),
    (E(DROP, f"F.dropout({SOFT}, self.dropout.p)"), False, "even in eval mode"),
    (E(*MOVED), False, "ever dropped"), (E(OUT, f"{OUT} + context"), False, "a residual"),
    (E(*MOVED, "= queries @ keys.transpose(2, 3)", "= self.dropout(queries @ keys.mT)"), False,
     "drops scores, before the softmax"),
    (E(*MOVED, "scaled = attn_scores", "scaled = self.dropout(attn_scores)"), False, "-inf × 0"),
    (E(DROP, f"self.dropout({DROP})"), False, "runs twice"),
    (E(*MOVED, MIX, "self.dropout(attn_weights @ values)"), False, "drops the context"),
    (E(*MOVED, MIX, "attn_weights @ self.dropout(values)"), False, "drops values"),
    (E(*MOVED, f"return {OUT}", f"return self.dropout({OUT})"), False, "drops the output"),
    (E(*BY_HAND("")), False, "does not scale the kept weights"),
    (E(*BY_HAND(" / self.dropout.p")), False, "by 1 / p"),
    (E(MIX, "attn_weights / attn_weights.sum(-1, True) @ values"), False, "divided by their sum"),
    (E(DROP, f"F.dropout({SOFT}, 0.1, self.training)"), False, "rate is not the module's"),
    (E(OUT + "\n", f"{OUT}, attn_weights\n"), False, "returned a tuple, not a tensor of shape"),
    (E("context = (", "return attn_weights @ values\n        context = ("), False, "(2, 3, 6, 4)"),
    (E(f"return {OUT}", OUT), False, "Did it forget to return?"),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_the_check(case):
    given, passes, words = case
    result = check_weight_split(given)
    assert result.passed is passes and words in result.feedback, result.feedback


def test_a_row_fails_when_the_check_loses_its_entry():
    mistakes = tuple(row for row in WEIGHT_SPLIT.mistakes if row[0] != dict(scale="times"))
    check = checker(dataclasses.replace(WEIGHT_SPLIT, mistakes=mistakes), "check")
    assert "multiplied by √head_dim" not in check(edited(f"/ {SCALE}", f"* {SCALE}")).feedback
