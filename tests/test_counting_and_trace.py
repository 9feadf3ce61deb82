"""The instruments chapter 1 uses to watch the wrapper run."""

import torch

from mha import MultiHeadAttentionWrapper, example_batch
from mha.counting import count_matmuls, count_ops, matmul_sizes
from mha.trace import trace_heads
from mha.variants import equivalent_modules


def test_the_wrapper_s_matmul_count_grows_with_heads_while_the_others_stay_flat():
    x = example_batch()
    counts = {
        name: [
            count_matmuls(equivalent_modules([name], 3, 2 * h, 6, h)[name], x) for h in (1, 2, 4, 8)
        ]
        for name in ("wrapper", "split", "combined_qkv", "fused")
    }
    # Per head: three projections, the scores and the weighted sum. The split does three
    # projections, the scores, the weighted sum and out_proj; one projection fewer with combined
    # QKV; the fused kernel counts as one call for scores and sum together.
    assert counts == {
        "wrapper": [5, 10, 20, 40],
        "split": [6] * 4,
        "combined_qkv": [4] * 4,
        "fused": [3] * 4,
    }


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


def test_every_head_receives_the_same_input_and_heads_run_in_list_order():
    x = example_batch()
    calls = trace_heads(MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=4), x)
    assert [c.head for c in calls] == [1, 2, 3, 4]
    assert all(c.same_object for c in calls)
