"""Chapter 3's practice: a weight split's forward, all heads in one product.
The check is :func:`mha.checks.weight_split.check_weight_split`."""

import torch

from .checks.weight_split import check_weight_split
from .exercise import Exercise
from .starting import WeightSplitSkeleton


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
