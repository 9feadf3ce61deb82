"""Chapter 7's check names scale errors, a missing final division and a running sum rescaled
by the factor squared as themselves, not as "none of the usual mistakes"."""

import pytest
import torch

from mha.checks.tiled import online_softmax
from test_check_tiled import NEG, blocks, state, styled


def loop(*, divisor="sqrt head_dim", divide=True, sum_power=1):
    """The online softmax with one deliberate mistake (or none)."""

    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        scale = {"sqrt head_dim": self.head_dim**0.5, "sqrt d_out": self.d_out**0.5}
        scale["head_dim"] = self.head_dim
        for k, v, mask in blocks(self, q, keys, values, q_start):
            scores = q @ k.transpose(2, 3) / scale[divisor]
            if mask is not None:
                scores = scores.masked_fill(mask, NEG)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)
            factor = torch.exp(row_max - new_max)
            row_sum = row_sum * factor**sum_power + weights.sum(-1, keepdim=True)
            out = out * factor + self.dropout(weights) @ v
            row_max = new_max
        return out / row_sum if divide else out

    return styled(query_block)


def diagonal_masked_too(self, q, keys, values, q_start):
    """The mask built with diagonal=0: each query's own key hidden as well."""
    row_max, row_sum, out = state(q)
    q_end = q_start + q.shape[2]
    for k_start in range(0, q_end, self.block_size):
        k_end = min(k_start + self.block_size, q_end)
        k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]
        scores = q @ k.transpose(2, 3) / self.head_dim**0.5
        future = torch.ones(q_end, q_end, dtype=torch.bool).triu(diagonal=0)
        scores = scores.masked_fill(future[q_start:q_end, k_start:k_end], NEG)
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        weights = torch.exp(scores - new_max)
        factor = torch.exp(row_max - new_max)
        row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
        out = out * factor + self.dropout(weights) @ v
        row_max = new_max
    return out / row_sum


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (loop(), None),
        (loop(divisor="sqrt d_out"), "divided by √d_out"),
        (loop(divisor="head_dim"), "not by its square root"),
        (loop(divide=False), "never divided by the running sum"),
        (loop(sum_power=2), "rescaled by the factor squared"),
        (styled(diagonal_masked_too), "hides each query's own key"),
    ],
)
def test_each_mistake_gets_its_own_entry(answer, phrase):
    result = online_softmax.check(answer)
    if phrase is None:
        assert result.passed, result.feedback
    else:
        assert not result.passed and phrase in result.feedback, result.feedback
        assert "none of the usual mistakes" not in result.feedback
        assert "Skip the key blocks" not in result.feedback


def learner(slip=None):
    """The loop as a learner writes it from the practice's skeleton, with one slip (or none).

    The mask is applied to every key block visited (earlier blocks' slices are all False)."""

    def query_block(self, q, keys, values, q_start):
        b, num_heads, rows, _ = q.shape
        q_end = q_start + rows
        row_max, row_sum, out = state(q)
        per_block = []
        stop = q_end - 1 if slip == "range to q_end - 1" else q_end
        if slip == "future blocks on odd query blocks" and q_start // self.block_size % 2:
            stop = keys.shape[2]
        for k_start in range(0, stop, self.block_size):
            k_end = min(k_start + self.block_size, max(stop, q_end))
            if slip == "key-block end off by one":
                k_end = min(k_start + self.block_size - 1, q_end)
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            future = {
                "mask sliced at the origin": self.mask[:rows, : k_end - k_start],
                "mask without its column offset": self.mask[q_start:q_end, : k_end - k_start],
                "inverted mask": ~self.mask[q_start:q_end, k_start:k_end],
            }.get(slip, self.mask[q_start:q_end, k_start:k_end])
            scores = scores.masked_fill(future, NEG)
            if slip == "blocks normalised separately and averaged":
                per_block.append(self.dropout(torch.softmax(scores, -1)) @ v)
                continue
            block_max = scores.amax(2 if slip == "max over the rows" else -1, keepdim=True)
            new_max = torch.maximum(row_max, block_max)
            weights = torch.exp(scores - new_max)
            factor = torch.exp(row_max - new_max)
            row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
            out = out * factor + self.dropout(weights) @ v
            row_max = new_max
        return torch.stack(per_block).mean(0) if per_block else out / row_sum

    return styled(query_block)


@pytest.mark.parametrize(
    "slip, phrases, not_said",
    [
        (None, (), ()),
        (
            "mask sliced at the origin",
            ("keys 0 to 3", "self.mask[0:4, 0:4]", "sliced at the origin", "self.mask[4:8, 0:4]"),
            (),
        ),
        (
            "mask without its column offset",
            ("self.mask[4:8, 0:4]", "without the column offset", "self.mask[4:8, 4:8]"),
            (),
        ),
        ("blocks normalised separately and averaged", ("1/n", "normalised each", "averaged"), ()),
        ("key-block end off by one", ("no weight to key 3", "k_start + self.block_size"), ()),
        ("inverted mask", ("~self.mask[0:4, 0:4]", "your mask is inverted"), ("Skip the key",)),
        (
            "future blocks on odd query blocks",
            ("computed 7 blocks of scores where a causal pass needs 6", "all future"),
            ("never touch",),
        ),
        (
            "range to q_end - 1",
            ("queries 0 to 0", "no score at all", "range(0, q_end"),
            ("factor",),
        ),
        (
            "max over the rows",
            ("maximum over dimension 2 of (2, 2, 4, 4)", "amax(-1"),
            ("partial",),
        ),
    ],
)
def test_each_slip_is_named_as_itself(slip, phrases, not_said):
    result = online_softmax.check(learner(slip))
    if slip is None:
        assert result.passed, result.feedback
        return
    assert not result.passed
    for phrase in phrases:
        assert phrase in result.feedback, result.feedback
    for phrase in (*not_said, "none of the usual mistakes"):
        assert phrase not in result.feedback, result.feedback
