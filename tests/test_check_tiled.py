"""Chapter 7's check: the loop over key blocks, every mistake it names and the styles it takes."""

import pytest
import torch
import torch.nn.functional as F

from mha import MultiHeadAttention, TiledAttention
from mha.checks.tiled import TILED_CONFIGS, TiledAttentionStart, online_softmax

NEG = -torch.inf


def state(q):
    b, h, rows, _ = q.shape
    return q.new_full((b, h, rows, 1), NEG), q.new_zeros((b, h, rows, 1)), torch.zeros_like(q)


def blocks(self, q, keys, values, q_start, *, skip=True, order=1):
    """(k, v, mask or None) per key block, the diagonal's mask at its position."""
    q_end = q_start + q.shape[2]
    end = q_end if skip else keys.shape[2]
    starts = list(range(0, end, self.block_size))[::order]
    for k_start in starts:
        k_end = min(k_start + self.block_size, end)
        mask = self.mask[q_start:q_end, k_start:k_end] if k_end > q_start + 1 else None
        yield keys[:, :, k_start:k_end], values[:, :, k_start:k_end], mask


def rescaling_factor(kind, old, new):
    """The factor that moves the running state from the old maximum to the new, right or wrong."""
    first = old == NEG  # "first block sets it": the state starts from the first block
    if kind == "old - new":
        return torch.exp(old - new)
    if kind == "new - old":
        return torch.exp(new - old)
    if kind == "new - old, first block sets it":
        return torch.where(first, 0.0, torch.exp(new - old))
    if kind == "old / new":
        return old / new
    return torch.where(first, 0.0, old / new)  # "old / new, first block sets it"


def make(
    *,
    rescale_sum=True,
    rescale_out=True,
    factor="old - new",
    diagonal="mask",
    divide="end",
    skip=True,
    order=1,
    scale=True,
    dropout="weights",  # or "both" (weights and sum), "always", "none", "values", "context",
    # "running output" (and the weights), "twice", "after out_proj"
    divisible_only=False,
):
    """A query_block with one deliberate mistake (or none)."""

    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        if divisible_only:  # drops the partial last block
            keys = keys[:, :, : keys.shape[2] // self.block_size * self.block_size]
            values = values[:, :, : keys.shape[2]]
            keys, values = keys, values
        for k, v, mask in blocks(self, q, keys, values, q_start, skip=skip, order=order):
            scores = q @ k.transpose(2, 3)
            if scale:
                scores = scores / self.head_dim**0.5
            if mask is not None and diagonal == "mask":
                scores = scores.masked_fill(mask, NEG)
            elif mask is not None and diagonal == "whole":
                scores = torch.full_like(scores, NEG)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)
            f = rescaling_factor(factor, row_max, new_max)
            dropped = self.dropout(weights) if dropout in ("weights", "both") else weights
            if dropout == "twice":
                dropped = self.dropout(self.dropout(weights))
            summed = dropped if dropout == "both" else weights
            if dropout == "always":
                dropped = F.dropout(weights, self.dropout.p, training=True)
            if dropout == "values":
                v = self.dropout(v)
            if dropout == "functional":
                dropped = F.dropout(weights, self.dropout.p, training=self.training)
            row_sum = (row_sum * f if rescale_sum else row_sum) + summed.sum(-1, keepdim=True)
            if dropout == "running output":
                out = self.dropout(out)
            out = (out * f if rescale_out else out) + dropped @ v
            if divide == "inside":
                out = out / row_sum
            row_max = new_max
        context = out / row_sum if divide == "end" else out
        return self.dropout(context) if dropout == "context" else context

    return type("MyTiledAttention", (TiledAttentionStart,), {"query_block": query_block})


# ----------------------------------------------------------------------------------------------
# Correct styles
# ----------------------------------------------------------------------------------------------


def normalised_as_it_goes(self, q, keys, values, q_start):
    """Keeps out normalised: the old output is reweighted by the share of the old sum."""
    row_max, row_sum, out = state(q)
    for k, v, mask in blocks(self, q, keys, values, q_start):
        scores = q @ k.transpose(-1, -2) * self.head_dim**-0.5
        if mask is not None:
            scores = scores.masked_fill(mask, NEG)
        new_max = torch.max(row_max, scores.max(dim=-1, keepdim=True).values)
        weights = (scores - new_max).exp()
        old = row_sum * (row_max - new_max).exp()
        row_sum = old + weights.sum(-1, keepdim=True)
        out = out * (old / row_sum) + self.dropout(weights) @ v / row_sum
        row_max = new_max
    return out


def log_sum_exp(self, q, keys, values, q_start):
    """Per-block softmax merged through each block's log-sum-exp, with einsum."""
    lse = None
    out = None
    for k, v, mask in blocks(self, q, keys, values, q_start):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / self.head_dim**0.5
        if mask is not None:
            scores = torch.where(mask, NEG, scores)
        block_lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        block_out = self.dropout(torch.exp(scores - block_lse)) @ v
        if lse is None:
            lse, out = block_lse, block_out
        else:
            new_lse = torch.logaddexp(lse, block_lse)
            out = out * torch.exp(lse - new_lse) + block_out * torch.exp(block_lse - new_lse)
            lse = new_lse
    return out


def diagonal_first_with_own_mask(self, q, keys, values, q_start):
    """Visits the diagonal block first and builds its mask with triu, scores scaled in q."""
    rows, size = q.shape[2], self.block_size
    q = q / self.head_dim**0.5
    row_max, row_sum, out = state(q)
    q_end = q_start + rows
    for k_start in reversed(range(0, q_end, size)):
        k_end = min(k_start + size, q_end)
        scores = q @ keys[:, :, k_start:k_end].transpose(2, 3)
        query_pos = torch.arange(q_start, q_end)[:, None]
        key_pos = torch.arange(k_start, k_end)[None, :]
        scores = scores.masked_fill(key_pos > query_pos, NEG)
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        weights = torch.exp(scores - new_max)
        factor = torch.exp(row_max - new_max)
        row_sum = factor * row_sum + weights.sum(-1, keepdim=True)
        out = factor * out + self.dropout(weights) @ values[:, :, k_start:k_end]
        row_max = new_max
    return out / row_sum


def keys_transposed_once(self, q, keys, values, q_start):
    """Transposes all the keys once (a copy, head_dim rows), then slices blocks of it."""
    keys_t = keys.transpose(2, 3).contiguous()  # (b, num_heads, head_dim, num_tokens)
    row_max, row_sum, out = state(q)
    q_end = q_start + q.shape[2]
    for k_start in range(0, q_end, self.block_size):
        k_end = min(k_start + self.block_size, q_end)
        scores = q @ keys_t[..., k_start:k_end] / self.head_dim**0.5
        scores = scores.masked_fill(self.mask[q_start:q_end, k_start:k_end], NEG)
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        weights = torch.exp(scores - new_max)
        factor = torch.exp(row_max - new_max)
        row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
        out = out * factor + self.dropout(weights) @ values[:, :, k_start:k_end]
        row_max = new_max
    return out / row_sum


def log_sum_exp_rows(self, q, keys, values, q_start):
    """A while loop, a (b, heads, rows) log-sum-exp, positions from arange, einsum."""
    q_end = q_start + q.shape[2]
    lse = torch.full(q.shape[:-1], float("-inf"))  # (b, num_heads, rows)
    acc = torch.zeros_like(q)
    q_pos = torch.arange(q_start, q_end)[:, None]
    k_start = 0
    while k_start < q_end:
        k_end = min(k_start + self.block_size, q_end)
        k = keys[:, :, k_start:k_end]
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.head_dim**-0.5
        s = torch.where(torch.arange(k_start, k_end)[None, :] > q_pos, float("-inf"), s)
        new = torch.logaddexp(lse, torch.logsumexp(s, -1))
        weights = torch.exp(s - new[..., None])
        acc = acc * torch.exp(lse - new)[..., None]
        acc = acc + self.dropout(weights) @ values[:, :, k_start:k_end]
        lse, k_start = new, k_end
    return acc


def solution_class():
    namespace = {"TiledAttentionStart": TiledAttentionStart, "torch": torch}
    code = online_softmax.solution_text.replace("online_softmax.check(MyTiledAttention)", "")
    exec(code, namespace)
    return namespace["MyTiledAttention"]


def styled(function):
    return type("MyTiledAttention", (TiledAttentionStart,), {"query_block": function})


@pytest.mark.parametrize(
    "answer",
    [
        solution_class(),
        make(),
        styled(normalised_as_it_goes),
        styled(log_sum_exp),
        styled(diagonal_first_with_own_mask),
        styled(keys_transposed_once),
        styled(log_sum_exp_rows),
        make(dropout="functional"),
    ],
    ids=[
        "solution",
        "running state",
        "normalised as it goes",
        "log-sum-exp",
        "diagonal first",
        "keys transposed once",
        "log-sum-exp per row, while loop",
        "functional dropout",
    ],
)
def test_correct_answers_in_several_styles_pass(answer):
    result = online_softmax.check(answer)
    assert result.passed, result.feedback


def test_the_check_leaves_the_readers_random_state_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    online_softmax.check(make())
    assert torch.equal(torch.rand(3), expected)


# ----------------------------------------------------------------------------------------------
# Mistakes: each named
# ----------------------------------------------------------------------------------------------


def full_row(self, q, keys, values, q_start):
    """No tiling: the whole row of scores at once."""
    q_end = q_start + q.shape[2]
    scores = q @ keys[:, :, :q_end].transpose(2, 3) / self.head_dim**0.5
    scores = scores.masked_fill(self.mask[q_start:q_end, :q_end], NEG)
    return self.dropout(torch.softmax(scores, -1)) @ values[:, :, :q_end]


def blocks_joined(self, q, keys, values, q_start):
    """Scores block by block, then torch.cat and a plain softmax over the whole row."""
    q_end = q_start + q.shape[2]
    parts = []
    for k, _, mask in blocks(self, q, keys, values, q_start):
        scores = q @ k.transpose(2, 3) / self.head_dim**0.5
        parts.append(scores if mask is None else scores.masked_fill(mask, NEG))
    return self.dropout(torch.softmax(torch.cat(parts, -1), -1)) @ values[:, :, :q_end]


def blocks_joined_by_hand(self, q, keys, values, q_start):
    """Scores block by block, joined, then a softmax written out, then blockwise products."""
    parts = []
    for k, _, mask in blocks(self, q, keys, values, q_start):
        scores = q @ k.transpose(2, 3) / self.head_dim**0.5
        parts.append(scores if mask is None else scores.masked_fill(mask, NEG))
    row = torch.cat(parts, -1)
    weights = torch.exp(row - row.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    out = 0
    for i, (_, v, _) in enumerate(blocks(self, q, keys, values, q_start)):
        start = i * self.block_size
        out = out + self.dropout(weights[..., start : start + v.shape[2]]) @ v
    return out


def no_maximum(self, q, keys, values, q_start):
    """exp(score) with no maximum subtracted: exact for small scores, inf for large ones."""
    _, row_sum, out = state(q)
    for k, v, mask in blocks(self, q, keys, values, q_start):
        scores = q @ k.transpose(2, 3) / self.head_dim**0.5
        if mask is not None:
            scores = scores.masked_fill(mask, NEG)
        weights = torch.exp(scores)
        row_sum = row_sum + weights.sum(-1, keepdim=True)
        out = out + self.dropout(weights) @ v
    return out / row_sum


def factor_after_update(self, q, keys, values, q_start):
    """row_max updated before the factor is computed: the factor is always 1."""
    row_max, row_sum, out = state(q)
    for k, v, mask in blocks(self, q, keys, values, q_start):
        scores = q @ k.transpose(2, 3) / self.head_dim**0.5
        if mask is not None:
            scores = scores.masked_fill(mask, NEG)
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        row_max = new_max
        factor = torch.exp(row_max - new_max)
        weights = torch.exp(scores - new_max)
        row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
        out = out * factor + self.dropout(weights) @ v
    return out / row_sum


def own_block_maximum(self, q, keys, values, q_start):
    """Each block's weights relative to its own maximum, added without rescaling."""
    _, row_sum, out = state(q)
    for k, v, mask in blocks(self, q, keys, values, q_start):
        scores = q @ k.transpose(2, 3) / self.head_dim**0.5
        if mask is not None:
            scores = scores.masked_fill(mask, NEG)
        weights = torch.exp(scores - scores.amax(-1, keepdim=True))
        row_sum = row_sum + weights.sum(-1, keepdim=True)
        out = out + self.dropout(weights) @ v
    return out / row_sum


def two_passes(self, q, keys, values, q_start):
    """Exact: the maximum in a first pass, the sum and output in a second."""
    row_max, row_sum, out = state(q)

    def scored():
        for k, v, mask in blocks(self, q, keys, values, q_start):
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            yield (scores if mask is None else scores.masked_fill(mask, NEG)), v

    for scores, _ in scored():
        row_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
    for scores, v in scored():
        weights = torch.exp(scores - row_max)
        row_sum = row_sum + weights.sum(-1, keepdim=True)
        out = out + self.dropout(weights) @ v
    return out / row_sum


def dropped_scores(*, before_mask):
    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        for k, v, mask in blocks(self, q, keys, values, q_start):
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            if before_mask:
                scores = self.dropout(scores)
            if mask is not None:
                scores = scores.masked_fill(mask, NEG)
            if not before_mask:
                scores = self.dropout(scores)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)
            factor = torch.exp(row_max - new_max)
            row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
            out = out * factor + weights @ v
            row_max = new_max
        return out / row_sum

    return styled(query_block)


def fused_per_block(self, q, keys, values, q_start):
    q_end = q_start + q.shape[2]
    mask = ~self.mask[q_start:q_end, :q_end]
    return F.scaled_dot_product_attention(q, keys[:, :, :q_end], values[:, :, :q_end], mask)


def borrowed(self, q, keys, values, q_start):
    return TiledAttention.query_block(self, q, keys, values, q_start)


def the_checks_recipe(self, x):
    from mha.checks.tiled_trial import tiled_recipe

    return tiled_recipe(self, x)


def returns_none(self, q, keys, values, q_start):
    return None


def forgets_heads(self, q, keys, values, q_start):
    return make().query_block(self, q, keys, values, q_start)[:, 0]


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (None, "got None"),
        (make()(6, 6, 12, 0.0, 2, 4), "an instance"),
        (make, "expects a class, but got the function make"),
        (int, "not an nn.Module"),
        (TiledAttention, "the book's own modules"),
        (type("Mine", (TiledAttention,), {}), "the book's own modules"),
        (MultiHeadAttention, "the book's own modules"),
        (type("Mine", (torch.nn.Module,), {}), "does not start from TiledAttentionStart"),
        (TiledAttentionStart, "no query_block of its own"),
        (type("Mine", (TiledAttentionStart,), {}), "no query_block of its own"),
        (styled(borrowed), "hands the work to the book's TiledAttention.query_block"),
        (styled(fused_per_block), "scaled_dot_product_attention"),
        (
            type(
                "Mine",
                (TiledAttentionStart,),
                {"forward": the_checks_recipe, "query_block": make().query_block},
            ),
            "hands the work to the book's tiled_recipe",
        ),
        (styled(full_row), "softmax reads all of a row's scores at once"),
        (styled(full_row), "scores for 12 keys (or queries) at once"),
        (styled(blocks_joined), "softmax reads all of a row's scores at once"),
        (styled(blocks_joined_by_hand), "joins the blocks' scores with torch.cat"),
        (styled(no_maximum), "exp overflows"),
        (styled(factor_after_update), "Your factor is 1 at every block"),
        (styled(own_block_maximum), "relative to that block's own maximum"),
        (
            styled(two_passes),
            "needs 6: each one 2 times",
        ),
        (make(factor="new - old, first block sets it"), "upside down"),
        (make(factor="old / new, first block sets it"), "ratio of the maxima"),
        (make(factor="old / new"), "Every output is nan"),
        (make(dropout="values"), "drops single numbers of the values"),
        (make(dropout="context"), "drops single numbers of an output"),
        (make(dropout="running output"), "drops single numbers of an output"),
        (make(dropout="twice"), "applied twice"),
        (dropped_scores(before_mask=True), "your dropout acts on the scores"),
        (dropped_scores(before_mask=False), "your dropout acts on the scores"),
        (styled(returns_none), "returned None"),
        (styled(forgets_heads), "returned shape (2, 4, 3) for q of shape (2, 2, 4, 3)"),
        (make(rescale_sum=False, rescale_out=False), "Neither the running sum nor"),
        (make(rescale_sum=False), "but the running sum is not"),
        (make(rescale_out=False), "but the running output is not"),
        (make(factor="new - old"), "Every output is nan"),
        (make(diagonal="none"), "needs the causal mask"),
        (make(diagonal="whole"), "whole diagonal block is masked"),
        (make(skip=False), "computed 9 blocks of scores where a causal pass needs 6 (of"),
        (make(divide="inside"), "divided by the running sum inside the loop"),
        (make(skip=False, order=-1), "nan. A row whose scores in a block are all -inf"),
        (make(divisible_only=True), "right on 8 tokens, but on 10 tokens"),
        (make(scale=False), "not divided by √head_dim"),
        (make(dropout="always"), "dropout is on"),
        (make(dropout="none"), "applies no dropout"),
        (make(dropout="both"), "reaches the running sum"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_each_mistake_and_shortcut_is_named(answer, phrase):
    result = online_softmax.check(answer)
    assert not result.passed
    assert phrase in result.feedback, result.feedback


def starting_code(self, q, keys, values, q_start):
    b, num_heads, rows, _ = q.shape
    raise NotImplementedError("write the loop over key blocks")


@pytest.mark.parametrize("answer", [TiledAttentionStart, styled(starting_code)])
def test_the_starting_code_asks_a_question_and_points_to_the_hints(answer):
    feedback = online_softmax.check(answer).feedback
    assert "?" in feedback and "hint(1)" in feedback and "starting" in feedback


def test_a_check_never_raises_even_on_a_forward_that_fails_oddly():
    def raises(self, q, keys, values, q_start):
        raise KeyError("boom")

    result = online_softmax.check(styled(raises))
    assert not result.passed and "KeyError" in result.feedback


def test_the_configurations_cover_lengths_the_block_does_not_divide_short_and_one_token():
    lengths = {
        (c.num_tokens % c.block_size != 0, c.num_tokens < c.block_size) for c in TILED_CONFIGS
    }
    assert {(False, False), (True, False), (True, True)} <= lengths
    assert any(c.num_tokens == 1 for c in TILED_CONFIGS)
    assert any(c.dropout > 0 for c in TILED_CONFIGS) and any(c.qkv_bias for c in TILED_CONFIGS)
    assert all(c.head_dim not in (c.block_size, c.d_in) for c in TILED_CONFIGS)


def test_hints_and_solution_follow_the_books_pattern():
    assert len(online_softmax.hints) == 3
    assert "online_softmax.check(MyTiledAttention)" in online_softmax.solution_text
    assert str(online_softmax.hint(1)).startswith("Hint 1 of 3")
