"""Chapter 3's check as one table (answer, passes?, words its feedback needs): the shortcuts, and
the solution with one step changed (:func:`steps`), for every step, as a learner would write it."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from mha import MultiHeadAttention
from mha.checks.practice import checker
from mha.checks.weight_split import WEIGHT_SPLIT, check_weight_split
from mha.starting import WeightSplitSkeleton
from mha.weight_split_exercise import weight_split

BOOK_FORWARD = MultiHeadAttention.forward  # saved at module level, before the check


# fmt: off
LAYERS = lambda self: (self.W_query, self.W_key, self.W_value)  # noqa: E731

def steps(self, x, qkv=("W_query", "W_key", "W_value"), split="blocks", scale=1.0, mask="ok",
          dim=-1, drop="weights", merge="ok", out_proj=1, swap=0, give="output", heads=0,
          root=None, first=""):
    """The solution with one step changed; ``scale`` multiplies the right divisor √head_dim,
    ``root(head_dim)`` replaces it; ``first``: sequence 0's keys or output for every sequence."""
    b, T, _ = x.shape
    H = heads or self.num_heads
    hd, dropout = self.d_out // H, self.dropout
    q, k, v = (x @ getattr(self, n).weight.T if qkv == "no bias" else getattr(self, n)(x)
               for n in (("W_query", "W_key", "W_value") if qkv == "no bias" else qkv))
    view = {"blocks": (b, T, H, hd), "no transpose": (b, H, T, hd), "strided": (b, T, hd, H)}
    order = {"blocks": (0, 2, 1, 3), "no transpose": (0, 1, 2, 3), "strided": (0, 3, 1, 2)}
    q, k, v = (t.transpose(1, 2).reshape(b, H, T, hd) if split == "transposed first"
               else t.view(view[split]).permute(order[split]) for t in (q, k, v))
    v = dropout(v) if drop == "values" else v
    k, v = (k[:1].expand_as(k), v[:1].expand_as(v)) if first == "keys" else (k, v)
    s = q @ k.transpose(1, 2) if swap == "axes" else q @ k if swap == "none" else q @ k.mT
    s = k @ q.mT if swap == 1 else s
    s = dropout(s) if drop == "scores" else s
    future = {"ok": self.mask[:T, :T], "unsliced": self.mask, "diagonal": ~self.mask[:T, :T].mT,
              "inverted": ~self.mask[:T, :T], "zero": self.mask[:T, :T],
              "shifted": self.mask[:T, -T:]}.get(mask)
    s = s.masked_fill(future, 0.0 if mask == "zero" else -torch.inf) if future is not None else s
    s = dropout(s) if drop == "masked" else s
    w = torch.softmax(s / (root(hd) if root else hd**0.5 * scale), dim=dim)
    w = w.masked_fill(self.mask[:T, :T], 0.0) if mask == "after" else w
    w = dropout(w) if drop in ("weights", "twice") else w
    w = dropout(w) if drop == "twice" else F.dropout(w, dropout.p) if drop == "always" else w
    c = dropout(w @ v) if drop == "context" else w @ v  # (b, H, T, hd)
    if give == "heads":
        return c
    c = {"ok": c.transpose(1, 2).contiguous(), "no transpose": c, "no contiguous": c.mT.mT,
         "interleaved": c.permute(0, 2, 3, 1).contiguous()}[merge]
    c = c.transpose(1, 2).view(b, T, self.d_out) if merge == "no contiguous" else c.view(b, T, -1)
    for _ in range(out_proj):
        c = self.out_proj(c)
    c = c[:1].expand_as(c) if first == "output" else c
    return {"output": c, "tuple": (c, w), "none": None}[give] if drop != "output" else dropout(c)

subclass = lambda forward: type("MyWeightSplit", (WeightSplitSkeleton,), {"forward": forward})  # noqa: E731
answer = lambda **changes: subclass(lambda self, x: steps(self, x, **changes))  # noqa: E731

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

class SavedInClass(WeightSplitSkeleton):
    book = MultiHeadAttention.forward

    def forward(self, x):
        return self.book(x)

def sdpa(self, x):
    b, T, _ = x.shape
    q, k, v = (f(x).view(b, T, self.num_heads, -1).transpose(1, 2) for f in LAYERS(self))
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.out_proj(context.transpose(1, 2).reshape(b, T, self.d_out))

CASES = [  # (answer, passes, words)
    (weight_split.solution_code, True, "all 7 configurations"),
    (answer(mask="after", scale=1.0), False, "no longer sum to 1"),
    (subclass(einsum), True, "all 7"),
    (subclass(loop), True, "all 7"),
    (WeightSplitSkeleton, False, "What does each head need"),  # the starting code
    (MultiHeadAttention, False, "one of the book's own modules"),
    (subclass(lambda self, x: BOOK_FORWARD(self, x)), False, "book's MultiHeadAttention.forward"),
    (SavedInClass, False, "book's MultiHeadAttention.forward"),
    (subclass(sdpa), False, "scaled_dot_product_attention"),
    (answer(qkv=("W_query", "W_query", "W_value")), False, "keys come from W_query"),
    (answer(qkv=("W_query", "W_key", "W_key")), False, "values come from W_key"),
    (answer(swap=1), False, "keys @ queries.T"),
    (answer(swap="axes"), False, "keys.transpose(2, 3)"),
    (answer(heads=3), False, "as if it had 3 heads"),
    (answer(qkv="no bias"), False, "skip the biases"),
    (answer(split="no transpose"), False, "mixes tokens and heads"),
    (answer(split="strided"), False, "every num_heads-th column"),
    (answer(split="transposed first"), False, "a transpose(1, 2), then one view"),
    (answer(scale=5**0.5 / 2), False, "divided by √d_in"),  # d_in 5, head_dim 4
    (answer(scale=1 / 2), False, "not scaled by √head_dim at all"),
    (answer(scale=12**0.5 / 2), False, "divided by √d_out"),  # d_out 12, head_dim 4
    (answer(scale=3**0.5 / 2), False, "divided by √num_heads"),  # num_heads 3
    (answer(scale=2.0), False, "divided by head_dim"), (answer(mask="shifted"), False, "-T:]"),
    (answer(scale=1 / 4), False, "multiplied by √head_dim"),
    (answer(mask="none"), False, "no causal mask"), (answer(mask="inverted"), False, "inverted"),
    (answer(mask="unsliced"), False, "cut the mask to the input's length"),
    (answer(mask="diagonal"), False, "hides the diagonal too"), (answer(mask="zero"), False, "0 i"),
    (answer(dim=-2), False, "over the queries"), (answer(dim=1), False, "axis 1"),
    (answer(merge="no transpose"), False, "without .transpose(1, 2) first"),
    (answer(merge="no contiguous"), False, ".contiguous()"),
    (answer(merge="interleaved"), False, "interleaves the heads' columns"),
    (answer(out_proj=0), False, "never applies"), (answer(out_proj=2), False, "out_proj twice"),
    (answer(drop="always"), False, "even in eval mode"),
    (answer(drop="none"), False, "no attention weight is ever dropped"),
    (answer(drop="scores"), False, "drops scores, before the softmax"),
    (answer(drop="masked"), False, "-inf × 0 is nan"), (answer(drop="twice"), False, "runs twice"),
    (answer(drop="context"), False, "drops the context"), (answer(drop="values"), False, "values"),
    (answer(drop="output"), False, "drops the output"), (answer(swap="none"), False, "last two"),
    (answer(root=lambda d: d / 2), False, "head_dim / 2"), (answer(first="keys"), False, "0's k"),
    (answer(root=lambda d: 2 * d), False, "2 head_dim"), (answer(first="output"), False, "0's o"),
    (answer(give="heads"), False, "shape (2, 3, 6, 4); the output is (2, 6, 12)"),
    (answer(give="tuple"), False, "returned a tuple, not a tensor of shape (2, 6, 12)"),
    (answer(give="none"), False, "Did it forget to return?"), ("MyWeightSplit", False, "a class"),
    (answer(scale=3.0), False, "first differ at the attention weights"),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_the_check(case):
    given, passes, words = case
    result = check_weight_split(given)
    assert result.passed is passes and words in result.feedback, result.feedback


def test_a_row_fails_when_the_check_loses_its_entry():
    times = dict(scale="times")
    mistakes = tuple(row for row in WEIGHT_SPLIT.mistakes if row[0] != times)
    check = checker(dataclasses.replace(WEIGHT_SPLIT, mistakes=mistakes), "check")
    assert "multiplied by √head_dim" not in check(answer(scale=1 / 4)).feedback
