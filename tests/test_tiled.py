"""TiledAttention: MultiHeadAttention's function, one block of scores at a time."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mha import MultiHeadAttention, TiledAttention
from mha.tiled import causal_block_pairs


def pair(num_heads=3, d_out=12, block_size=4, qkv_bias=False, dropout=0.0, seed=0):
    torch.manual_seed(seed)
    split = MultiHeadAttention(8, d_out, 40, dropout, num_heads, qkv_bias=qkv_bias)
    tiled = TiledAttention(8, d_out, 40, dropout, num_heads, block_size, qkv_bias=qkv_bias)
    tiled.load_state_dict(split.state_dict())
    return split.eval(), tiled.eval()


def test_it_has_the_parameter_and_buffer_names_of_multi_head_attention():
    split, tiled = pair(qkv_bias=True)
    assert list(tiled.state_dict()) == list(split.state_dict())
    assert tiled.block_size == 4 and TiledAttention(4, 4, 8, 0.0, 2).block_size == 64


@pytest.mark.parametrize("num_tokens", [1, 2, 3, 4, 5, 8, 11, 16, 37, 40])
@pytest.mark.parametrize("block_size", [1, 4, 5, 64])
@pytest.mark.parametrize("qkv_bias", [False, True])
def test_it_equals_multi_head_attention_for_any_length_and_block(num_tokens, block_size, qkv_bias):
    split, tiled = pair(block_size=block_size, qkv_bias=qkv_bias)
    torch.manual_seed(1)
    x = torch.randn(2, num_tokens, 8)  # (b, num_tokens, d_in)
    with torch.no_grad():
        expected, got = split(x), tiled(x)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("seed", range(4))
def test_it_equals_multi_head_attention_on_large_scores_too(seed):
    """Scores far from 0 exercise the rescaling: a plain exp would overflow.

    Scores in the hundreds carry float32 rounding of about 1e-5 each, so the tolerance is
    relative, 1e-3, and absolute 1e-4 near zero."""
    split, tiled = pair(seed=seed)
    torch.manual_seed(seed)
    x = 30 * torch.randn(1, 23, 8)
    with torch.no_grad():
        expected, got = split(x), tiled(x)
    assert torch.isfinite(got).all()
    assert (x @ x.transpose(1, 2)).abs().max() > 1000
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-3)


def test_it_is_causal_a_later_token_changes_no_earlier_output():
    _, tiled = pair()
    torch.manual_seed(2)
    x = torch.randn(1, 13, 8)
    changed = x.clone()
    changed[:, 9:] += 5.0
    with torch.no_grad():
        torch.testing.assert_close(tiled(changed)[:, :9], tiled(x)[:, :9], atol=0, rtol=0)


@pytest.mark.parametrize("num_tokens, block_size", [(16, 4), (13, 4), (5, 8), (40, 16)])
def test_no_product_of_scores_is_larger_than_a_block_and_blocks_above_the_diagonal_are_skipped(
    num_tokens, block_size
):
    _, tiled = pair(num_heads=4, block_size=block_size)  # head_dim 3: no block is 3 wide
    x = torch.randn(2, num_tokens, 8)
    shapes = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ in {"bmm", "mm", "addmm", "baddbmm"}:
                shapes.append((args[-2].shape[-1], tuple(out.shape)))
            if out.dim() >= 2 and out.shape[-1] == out.shape[-2] == num_tokens > block_size:
                raise AssertionError(f"{func} made a {tuple(out.shape)} tensor")
            return out

    with torch.no_grad(), Log():
        tiled(x)
    scores = [shape for width, shape in shapes if width == tiled.head_dim]
    assert all(max(shape[-2:]) <= block_size for shape in scores)
    assert len(scores) == len(causal_block_pairs(num_tokens, block_size))


def test_the_causal_pairs_are_the_blocks_on_and_below_the_diagonal():
    assert causal_block_pairs(1024, 64) == [(i, j) for i in range(16) for j in range(i + 1)]
    assert len(causal_block_pairs(1024, 64)) == 136
    assert len(causal_block_pairs(10, 4)) == 6
    assert causal_block_pairs(3, 8) == [(0, 0)]


def test_dropout_acts_in_training_only():
    split, tiled = pair(dropout=0.5)
    x = torch.randn(2, 9, 8)
    with torch.no_grad():
        evaluated = tiled(x)
        torch.testing.assert_close(evaluated, split(x), atol=1e-5, rtol=0)
        tiled.train()
        torch.manual_seed(0)
        first = tiled(x)
        second = tiled(x)
    assert not torch.allclose(first, evaluated) and not torch.allclose(first, second)


def test_dropout_drops_weights_not_the_sum_so_it_equals_the_split_in_distribution():
    """Per head, the first token sees one key: its context is 0 or twice its value, never the
    value; and the mean over many draws is the evaluation-mode output (without out_proj)."""
    split, tiled = pair(num_heads=2, d_out=4, block_size=3, dropout=0.5)
    for module in (split, tiled):
        with torch.no_grad():
            module.out_proj.weight.copy_(torch.eye(4))
            module.out_proj.bias.zero_()
    torch.manual_seed(3)
    x = torch.randn(1, 7, 8)
    with torch.no_grad():
        evaluated = tiled(x)
        value = tiled.W_value(x)[0, 0]  # token 1's value, (d_out,)
        tiled.train(), split.train()
        torch.manual_seed(4)
        draws = torch.stack([tiled(x) for _ in range(3000)])
        split_draws = torch.stack([split(x) for _ in range(3000)])
    first = draws[:, 0, 0]  # (draws, d_out)
    is_zero = first.abs() < 1e-6
    is_double = (first - 2 * value).abs() < 1e-5
    assert bool((is_zero | is_double).all())
    for sample in (draws, split_draws):
        torch.testing.assert_close(sample.mean(0), evaluated, atol=0.08, rtol=0)
    torch.testing.assert_close(draws.std(0), split_draws.std(0), atol=0.08, rtol=0)


def test_gradients_flow_to_every_parameter():
    _, tiled = pair(qkv_bias=True)
    tiled.train()
    tiled(torch.randn(2, 10, 8)).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in tiled.parameters())


@pytest.mark.parametrize("block_size", [0, -3, 2.0, True, "64", None])
def test_a_block_size_that_is_not_a_positive_integer_is_refused(block_size):
    with pytest.raises(ValueError, match=r"TiledAttention: block_size must be a positive integer"):
        TiledAttention(4, 4, 8, 0.0, 2, block_size=block_size)


def test_the_usual_bad_sizes_and_inputs_are_refused_like_multi_head_attention():
    with pytest.raises(ValueError, match="TiledAttention: d_out=6 is not divisible by num_heads=4"):
        TiledAttention(4, 6, 8, 0.0, 4)
    with pytest.raises(ValueError, match="TiledAttention: dropout must be"):
        TiledAttention(4, 4, 8, 1.5, 2)
    tiled = TiledAttention(4, 4, 8, 0.0, 2)
    with pytest.raises(ValueError, match="more than context_length=8"):
        tiled(torch.randn(1, 9, 4))
    with pytest.raises(ValueError, match="Add a batch axis"):
        tiled(torch.randn(9, 4))
