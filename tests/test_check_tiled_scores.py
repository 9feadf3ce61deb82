"""Chapter 7's check sees every score it is handed, whatever the layout.

Scores computed as 3-D or 4-D products, one (batch, head) at a time in 2-D, or elementwise
(``(q.unsqueeze(3) * k.unsqueeze(2)).sum(-1)``, with or without a trailing size-1 axis) are
all counted, entry by entry: a loop that visits blocks above the diagonal, a whole row of
scores, or a first pass over every block for an exact maximum is refused in each layout.
"""

import pytest
import torch

from mha.checks.tiled import online_softmax
from test_check_tiled import NEG, blocks, state, styled


def product(q, k):
    return q @ k.transpose(2, 3)  # (b, num_heads, rows, cols)


def per_head(q, k):
    """One (batch, head) at a time, in 2-D."""
    b, h = q.shape[:2]
    rows = [torch.stack([q[i, j] @ k[i, j].T for j in range(h)]) for i in range(b)]
    return torch.stack(rows)  # (b, num_heads, rows, cols)


def elementwise(q, k):
    return (q.unsqueeze(3) * k.unsqueeze(2)).sum(-1)  # (b, num_heads, rows, cols)


def elementwise_trailing(q, k):
    """The same, through a trailing size-1 axis."""
    return (q[:, :, :, None, :, None] * k[:, :, None, :, :, None]).sum((-2, -1))


LAYOUTS = [product, per_head, elementwise, elementwise_trailing]


def tiled(scores_of):
    """The book's online softmax, with scores computed by ``scores_of``."""

    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        for k, v, mask in blocks(self, q, keys, values, q_start):
            scores = scores_of(q, k) / self.head_dim**0.5
            if mask is not None:
                scores = scores.masked_fill(mask, NEG)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)
            factor = torch.exp(row_max - new_max)
            row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
            out = out * factor + self.dropout(weights) @ v
            row_max = new_max
        return out / row_sum

    return styled(query_block)


def every_block(scores_of):
    """Visits every key block, and masks each one fully where it lies after the queries."""

    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        q_end = q_start + q.shape[2]
        for k_start in range(0, keys.shape[2], self.block_size):
            k_end = min(k_start + self.block_size, keys.shape[2])
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]
            scores = scores_of(q, k) / self.head_dim**0.5
            later = torch.arange(k_start, k_end)[None, :] > torch.arange(q_start, q_end)[:, None]
            scores = scores.masked_fill(later, NEG)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.nan_to_num(torch.exp(scores - new_max))
            factor = torch.nan_to_num(torch.exp(row_max - new_max))
            row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
            out = out * factor + self.dropout(weights) @ v
            row_max = torch.maximum(row_max, new_max)
        return out / row_sum

    return styled(query_block)


def whole_row_per_head(self, q, keys, values, q_start):
    """A whole row of scores per (batch, head), in 2-D, with one softmax."""
    q_end = q_start + q.shape[2]
    scores = per_head(q, keys[:, :, :q_end]) / self.head_dim**0.5
    scores = scores.masked_fill(self.mask[q_start:q_end, :q_end], NEG)
    return self.dropout(torch.softmax(scores, -1)) @ values[:, :, :q_end]


def exact_maximum_first(self, q, keys, values, q_start):
    """An exact row maximum from an elementwise first pass, then no online rescale at all."""
    row_max, row_sum, out = state(q)
    for k, _, mask in blocks(self, q, keys, values, q_start):
        scores = elementwise(q, k) / self.head_dim**0.5
        scores = scores if mask is None else scores.masked_fill(mask, NEG)
        row_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
    for k, v, mask in blocks(self, q, keys, values, q_start):
        scores = q @ k.transpose(2, 3) / self.head_dim**0.5
        scores = scores if mask is None else scores.masked_fill(mask, NEG)
        weights = torch.exp(scores - row_max)
        row_sum = row_sum + weights.sum(-1, keepdim=True)
        out = out + self.dropout(weights) @ v
    return out / row_sum


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_online_softmax_passes_in_every_layout_of_scores(layout):
    result = online_softmax.check(tiled(layout))
    assert result.passed, result.feedback


@pytest.mark.parametrize("layout", LAYOUTS)
def test_blocks_above_the_diagonal_are_refused_in_every_layout(layout):
    result = online_softmax.check(every_block(layout))
    assert not result.passed
    assert "blocks of scores where a causal pass needs" in result.feedback, result.feedback


def test_a_whole_row_per_head_in_2d_is_refused_as_held_at_once():
    result = online_softmax.check(styled(whole_row_per_head))
    assert not result.passed
    assert "at once" in result.feedback and "never holds" not in result.feedback, result.feedback


def test_an_exact_maximum_from_an_elementwise_first_pass_does_not_pass():
    result = online_softmax.check(styled(exact_maximum_first))
    assert not result.passed
    assert "blocks of scores" in result.feedback, result.feedback
