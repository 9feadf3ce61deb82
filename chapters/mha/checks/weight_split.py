"""Chapter 3's exercise: the forward pass of a weight split, written from a skeleton.

The reader subclasses :class:`WeightSplitSkeleton` (``MultiHeadAttention``'s layers, a ``forward``
that raises) and writes ``forward``. :func:`check_weight_split` builds the class in several
configurations (:mod:`.split_trial`) and compares its output, in eval mode, with the reference
computed from each instance's own layers; most mistakes are buggy references, the same
computation with one ingredient changed (:class:`.reference.Recipe`). With dropout it also runs
training mode, where dropout must drop whole weights. A forward that uses PyTorch's attention or
the book's own class is refused (:mod:`.class_answer`).
"""

from collections import namedtuple

import torch
from torch import nn

from .class_answer import Skeleton, class_problem, delegation
from .core import CheckResult, Exercise, first_mistake, never_raises
from .shortcuts import watching
from .split_mistakes import MISTAKES
from .split_trial import SplitTrial


class Config(namedtuple("Config", "d_in d_out context_length num_heads num_tokens qkv_bias "
                             "dropout seed", defaults=(False, 0.0, 0))):  # fmt: skip
    """One way the check builds the reader's class and calls it."""

    head_dim = property(lambda c: c.d_out // c.num_heads)
    input_shape = property(lambda c: (2, c.num_tokens, c.d_in))
    kwargs = property(lambda c: dict(zip(("d_in", "d_out", "context_length", "dropout",
                      "num_heads"), (c.d_in, c.d_out, c.context_length, c.dropout, c.num_heads)))
                      | ({"qkv_bias": True} if c.qkv_bias else {}))  # fmt: skip


#: Several heads and a full-length input first (most mistakes show there), then a shorter
#: input than the mask, one head, d_in > d_out, head_dim 1, biases, and dropout.
CONFIGS = (
    Config(d_in=5, d_out=12, context_length=6, num_heads=3, num_tokens=6, seed=1),
    Config(d_in=6, d_out=8, context_length=8, num_heads=2, num_tokens=5, seed=2),
    Config(d_in=4, d_out=6, context_length=5, num_heads=1, num_tokens=5, seed=3),
    Config(d_in=3, d_out=8, context_length=7, num_heads=4, num_tokens=3, seed=4),
    Config(d_in=10, d_out=6, context_length=4, num_heads=6, num_tokens=4, seed=5),
    Config(d_in=4, d_out=6, context_length=6, num_heads=3, num_tokens=6, qkv_bias=True, seed=6),
    Config(d_in=3, d_out=4, context_length=5, num_heads=2, num_tokens=5, dropout=0.5, seed=7),
)


class WeightSplitSkeleton(Skeleton):
    """Chapter 3's starting point: the layers of ``MultiHeadAttention``, no forward pass yet."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(
                f"d_out={d_out} is not divisible by num_heads={num_heads}: "
                "choose d_out as a multiple of num_heads."
            )
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # the width of each head
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the heads' outputs
        self.dropout = nn.Dropout(dropout)
        future = torch.ones(context_length, context_length).triu(diagonal=1)
        self.register_buffer("mask", future.bool())  # True: a later token


@never_raises
def check_weight_split(cls):
    """Check a weight-split class: build it in several configurations and compare its output
    with the reference computed from each instance's own layers."""
    problem = class_problem(cls, "check_weight_split", "MyWeightSplit", "the weight split")
    if problem:
        return CheckResult(False, problem)
    with watching() as (book, watch), torch.random.fork_rng(devices=[]):
        for config in CONFIGS:
            watch.seen.clear()
            watch.failed = None
            trial = SplitTrial(cls, config, watch)
            if book:
                return CheckResult(False, delegation(cls, book, "the weight split"))
            if trial.correct:
                continue
            mistake = first_mistake(MISTAKES, trial)
            quiet = trial.stage == "constructor" or mistake.name == "the starting code"
            seen_with = f"\n(Seen with {trial.call}.)" * (not quiet)
            return CheckResult(False, mistake.tell(trial) + seen_with)
    return CheckResult(
        True,
        f"Your forward pass matches the reference, computed from each instance's own weights, "
        f"in all {len(CONFIGS)} configurations: 1, 2, 3, 4 and 6 heads, d_in ≠ d_out, inputs "
        "shorter than context_length, biases, and dropout (off in eval mode; in training mode "
        "token 0's context is 0 or its value / (1 - p), the mean of 48 calls is the eval output), "
        "written without torch's own attention (the fused kernel or nn.MultiheadAttention).",
    )


class MyWeightSplit(WeightSplitSkeleton):
    def forward(self, x):
        b, num_tokens, _ = x.shape
        by_head = (b, num_tokens, self.num_heads, self.head_dim)
        # (b, num_tokens, d_out) -> (b, num_heads, num_tokens, head_dim)
        queries = self.W_query(x).view(by_head).transpose(1, 2)
        keys = self.W_key(x).view(by_head).transpose(1, 2)
        values = self.W_value(x).view(by_head).transpose(1, 2)

        # (b, num_heads, num_tokens, num_tokens)
        attn_scores = queries @ keys.transpose(2, 3)
        future = self.mask[:num_tokens, :num_tokens]
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        scaled = attn_scores / self.head_dim**0.5
        attn_weights = self.dropout(torch.softmax(scaled, dim=-1))

        # (b, num_heads, num_tokens, head_dim) -> (b, num_tokens, d_out)
        context = (attn_weights @ values).transpose(1, 2)
        context = context.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)


weight_split = Exercise(
    checker=check_weight_split,
    hints=(
        "The idea: one product per projection computes the queries of every head at once, "
        "and the same goes for keys and values. Each head owns a block of head_dim "
        "consecutive columns of them. Give each head its own axis, and the single-head steps "
        "apply to all heads at once.",
        "The shapes: the projections give (b, num_tokens, d_out). Split the last axis as "
        "(num_heads, head_dim), then move the head axis in front of the tokens: "
        "(b, num_heads, num_tokens, head_dim). The scores are then (b, num_heads, num_tokens, "
        "num_tokens), and the context (b, num_heads, num_tokens, head_dim) must go back to "
        "(b, num_tokens, d_out), head 1's block first.",
        "The code, step by step: .view(b, num_tokens, self.num_heads, self.head_dim) and "
        ".transpose(1, 2) split; keys.transpose(2, 3) lines the keys up for the product; "
        "self.mask[:num_tokens, :num_tokens] and self.head_dim ** 0.5 are the mask and the "
        "scale; self.dropout goes on the weights; .transpose(1, 2).contiguous().view(...) "
        "merges, and self.out_proj finishes.",
    ),
    solution_code=MyWeightSplit,
)
