"""Weight splits compute what the wrapper computes: from_wrapper and to_wrapper are exact inverses.

Shapes include d_in != d_out (an einsum bug once hid behind d_in == d_out), a single head,
one-token inputs, inputs shorter than context_length, and projections with biases.
"""

import pytest
import torch

from mha import MultiHeadAttention, MultiHeadAttentionWrapper

# (d_in, d_out per head, num_heads, context_length, num_tokens)
SHAPES = [
    (3, 2, 2, 6, 6),
    (3, 1, 2, 6, 6),
    (5, 4, 3, 8, 5),
    (16, 4, 4, 10, 1),
    (7, 3, 1, 7, 7),
    (4, 8, 2, 5, 3),
    (12, 2, 6, 9, 9),
    (2, 5, 3, 4, 4),
]
SEEDS = [0, 1, 2]
CASES = [
    pytest.param(shape, seed, bias, id=f"{shape}-seed{seed}-{'bias' if bias else 'nobias'}")
    for shape in SHAPES
    for seed in SEEDS
    for bias in (False, True)
]


def seeded_wrapper(shape, seed, bias):
    d_in, d_out, num_heads, context_length, _ = shape
    torch.manual_seed(seed)
    return MultiHeadAttentionWrapper(d_in, d_out, context_length, 0.0, num_heads, qkv_bias=bias)


def seeded_input(shape, seed, batch=3):
    d_in, _, _, _, num_tokens = shape
    torch.manual_seed(1000 + seed)
    return torch.randn(batch, num_tokens, d_in)  # (batch, num_tokens, d_in)


def context_before_out_proj(module, x):
    """The merged heads, exactly as ``module.forward`` hands them to ``out_proj``."""
    captured = []
    handle = module.out_proj.register_forward_pre_hook(lambda _, args: captured.append(args[0]))
    try:
        module(x)
    finally:
        handle.remove()
    return captured[0]  # (batch, num_tokens, d_out)


@pytest.mark.parametrize("shape, seed, bias", CASES)
def test_weight_split_equals_wrapper_when_weights_are_copied(shape, seed, bias):
    wrapper = seeded_wrapper(shape, seed, bias)
    x = seeded_input(shape, seed)
    with torch.no_grad():
        expected = wrapper(x)
        got = MultiHeadAttention.from_wrapper(wrapper)(x)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-6)


@pytest.mark.parametrize("shape, seed, bias", CASES)
def test_to_wrapper_equals_the_weight_split_before_out_proj(shape, seed, bias):
    d_in, d_out, num_heads, context_length, _ = shape
    torch.manual_seed(seed)
    split = MultiHeadAttention(
        d_in, d_out * num_heads, context_length, 0.0, num_heads, qkv_bias=bias
    )
    x = seeded_input(shape, seed)
    with torch.no_grad():
        assert torch.allclose(split.to_wrapper()(x), context_before_out_proj(split, x), atol=1e-6)


@pytest.mark.parametrize("shape, seed, bias", CASES)
def test_wrapper_to_split_to_wrapper_gives_back_every_weight(shape, seed, bias):
    wrapper = seeded_wrapper(shape, seed, bias)
    back = MultiHeadAttention.from_wrapper(wrapper).to_wrapper()
    original, returned = dict(wrapper.named_parameters()), dict(back.named_parameters())
    assert original.keys() == returned.keys()
    for name, value in original.items():
        assert torch.equal(value, returned[name]), name


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("bias", (False, True), ids=("nobias", "bias"))
def test_split_to_wrapper_to_split_keeps_the_projections_and_makes_out_proj_the_identity(
    shape, bias
):
    d_in, d_out, num_heads, context_length, _ = shape
    torch.manual_seed(0)
    split = MultiHeadAttention(
        d_in, d_out * num_heads, context_length, 0.0, num_heads, qkv_bias=bias
    )
    again = MultiHeadAttention.from_wrapper(split.to_wrapper())
    for name in ("W_query", "W_key", "W_value"):
        assert torch.equal(getattr(split, name).weight, getattr(again, name).weight)
        if bias:
            assert torch.equal(getattr(split, name).bias, getattr(again, name).bias)
    assert torch.equal(again.out_proj.weight, torch.eye(split.d_out))
    assert torch.equal(again.out_proj.bias, torch.zeros(split.d_out))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_head_h_of_the_wrapper_is_column_block_h_of_the_combined_matrix(shape):
    wrapper = seeded_wrapper(shape, 0, True)
    split = MultiHeadAttention.from_wrapper(wrapper)
    head_dim = split.head_dim
    for h, head in enumerate(wrapper.heads):
        block = slice(h * head_dim, (h + 1) * head_dim)
        for name in ("W_query", "W_key", "W_value"):
            # x @ W uses weight.T: (d_in, d_out), so a head is a block of columns
            assert torch.equal(
                getattr(split, name).weight.T[:, block], getattr(head, name).weight.T
            )
            assert torch.equal(getattr(split, name).bias[block], getattr(head, name).bias)


def test_d_out_is_per_head_in_the_wrapper_and_total_in_the_weight_split():
    wrapper = seeded_wrapper((3, 2, 3, 6, 6), 0, False)
    split = MultiHeadAttention.from_wrapper(wrapper)
    assert wrapper.heads[0].d_out == 2
    assert (split.d_out, split.num_heads, split.head_dim) == (6, 3, 2)


def test_from_wrapper_keeps_the_wrappers_dtype_and_mode():
    wrapper = seeded_wrapper((5, 4, 3, 8, 5), 0, True).double().train()
    split = MultiHeadAttention.from_wrapper(wrapper)
    assert split.W_query.weight.dtype == torch.float64 and split.training
    x = seeded_input((5, 4, 3, 8, 5), 0).double()
    with torch.no_grad():
        assert torch.allclose(split(x), wrapper(x), atol=1e-12)
    assert not MultiHeadAttention.from_wrapper(wrapper.eval()).training


def test_to_wrapper_keeps_the_modules_dtype_and_mode():
    split = MultiHeadAttention(4, 6, 5, 0.0, num_heads=3).double().eval()
    wrapper = split.to_wrapper()
    assert wrapper.heads[0].W_query.weight.dtype == torch.float64 and not wrapper.training


def test_from_wrapper_rejects_anything_but_a_wrapper_with_a_clear_error():
    with pytest.raises(ValueError, match="MultiHeadAttentionWrapper, got MultiHeadAttention"):
        MultiHeadAttention.from_wrapper(MultiHeadAttention(3, 4, 6, 0.0, num_heads=2))
