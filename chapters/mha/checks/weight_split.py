"""Chapter 3's exercise: a weight split's forward, judged against :mod:`.split_mistakes`."""

import torch

from ..starting import WeightSplitSkeleton
from .core import Exercise
from .practice import NOT_WRITTEN, Practice, checker
from .split_mistakes import BELONGS, EARLY, MISTAKES, STAGES, TRAINED, split

# fmt: off
#: (d_in, d_out, context_length, dropout, num_heads, qkv_bias, num_tokens): most mistakes show in
#: the first; then a short input, one head, d_in > d_out, head_dim 1, biases, and dropout.
ROWS = ((5, 12, 6, 0.0, 3, 0, 6), (6, 8, 8, 0.0, 2, 0, 5), (4, 6, 5, 0.0, 1, 0, 5),
        (3, 8, 7, 0.0, 4, 0, 3), (10, 6, 4, 0.0, 6, 0, 4), (4, 6, 6, 0.0, 3, 1, 6),
        (3, 4, 5, 0.5, 2, 0, 5))
WEIGHT_SPLIT = Practice(
    start=WeightSplitSkeleton, rows=ROWS, reference=split, mistakes=MISTAKES, early=EARLY,
    quiet=True, belongs=BELONGS, trained=TRAINED, steps=STAGES,
    torch="Chapter 5's practice uses it; here, write them with @, masked_fill and torch.softmax.",
    starting=f"{NOT_WRITTEN} What does each head need from W_query, W_key and W_value, and in "
    "which shape? The first hint, just below the check, starts from there.",
    praise=f"Your forward matches the reference from each instance's own weights in all "
    f"{len(ROWS)} configurations (1 to 6 heads, short inputs, biases; dropout off in eval mode "
    "and on whole attention weights in training mode), without torch's own attention.")
# fmt: on
#: Checks a weight-split class against references from each instance's own layers.
check_weight_split = checker(WEIGHT_SPLIT, "check_weight_split")


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
