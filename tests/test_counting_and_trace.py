"""The instruments chapter 1 uses to watch the wrapper run."""

import torch

from mha import MultiHeadAttention, MultiHeadAttentionWrapper, example_batch
from mha.counting import count_matmuls, count_ops, matmul_sizes
from mha.trace import trace_heads


def test_wrapper_matmul_count_grows_with_heads_while_the_split_stays_constant():
    x = example_batch()
    wrapper_counts = [count_matmuls(MultiHeadAttentionWrapper(3, 2, 6, 0.0, h), x) for h in (1, 2, 4, 8)]
    split_counts = [count_matmuls(MultiHeadAttention(3, 2 * h, 6, 0.0, h), x) for h in (1, 2, 4, 8)]
    assert wrapper_counts == [5, 10, 20, 40]
    assert len(set(split_counts)) == 1


def test_matmul_sizes_are_multiply_adds_of_each_product():
    # One head, d_in=3, d_out=2, batch 2 × 6 tokens: projections (12×3)@(3×2) = 72 multiply-adds,
    # scores (6×2)@(2×6) per sequence = 72 × 2, weights @ values (6×6)@(6×2) = 72 × 2.
    sizes = matmul_sizes(MultiHeadAttentionWrapper(3, 2, 6, 0.0, 1), example_batch())
    assert sorted(sizes) == [72, 72, 72, 144, 144]


def test_count_ops_names_aten_operators():
    ops = count_ops(MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3), example_batch())
    assert ops["cat"] == 1 and ops["_softmax"] == 3


def test_trace_notices_a_head_that_is_fed_another_heads_output():
    class Chained(MultiHeadAttentionWrapper):
        def forward(self, x):
            first = self.heads[0](x)
            return torch.cat([first, self.heads[1](first[..., :3].expand_as(x))], dim=-1)

    calls = trace_heads(Chained(3, 3, 6, 0.0, 2), example_batch())
    assert [c.same_object for c in calls] == [True, False]
