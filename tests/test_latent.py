"""LatentAttention: its absorbed path, its latent cache and its MHA twin
compute the same outputs as its forward, within ``ATOL`` (1e-5, absolute,
float32; the gaps seen are about 1e-7), on several seeds and sizes."""

import pytest
import torch

from mha.attention import MultiHeadAttention
from mha.latent import (
    ATOL,
    LatentAttention,
    LatentCache,
    as_multi_head,
    generate_latent,
    latent_step,
    prefill_latents,
    rotate_pairs,
)

#: (d_in, d_out, num_heads, latent_dim, num_tokens, qkv_bias, seed)
SIZES = [
    (6, 12, 3, 4, 8, False, 0),
    (5, 8, 4, 2, 5, True, 1),
    (3, 8, 2, 16, 7, False, 2),  # a latent wider than 2 * d_out
    (10, 6, 6, 1, 4, True, 3),  # head_dim 1, latent 1
    (16, 32, 4, 8, 12, False, 4),
]


def build(d_in, d_out, num_heads, latent_dim, num_tokens, qkv_bias, seed, dropout=0.0):
    torch.manual_seed(seed)
    module = LatentAttention(d_in, d_out, num_tokens, dropout, num_heads, latent_dim, qkv_bias)
    x = torch.randn(2, num_tokens, d_in)  # (b, T, d_in)
    return module.eval(), x


@pytest.mark.parametrize("size", SIZES)
def test_absorbed_equals_forward(size):
    module, x = build(*size)
    with torch.no_grad():
        assert module(x).shape == (2, size[4], size[1])
        torch.testing.assert_close(module.absorbed(x), module(x), atol=ATOL, rtol=0)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("absorbed", [False, True])
def test_cached_steps_equal_forward_token_by_token(size, absorbed):
    module, x = build(*size)
    with torch.no_grad():
        cache = LatentCache(module, batch=2, max_tokens=size[4])
        steps = generate_latent(module, x, cache, absorbed=absorbed)
        torch.testing.assert_close(steps, module(x), atol=ATOL, rtol=0)
    assert cache.length == size[4]
    assert cache.latents.shape == (2, size[4], size[3])


def test_prefill_then_steps_equal_forward():
    module, x = build(*SIZES[0])
    with torch.no_grad():
        cache = LatentCache(module, batch=2, max_tokens=8)
        prefill_latents(module, x[:, :5], cache)
        rest = generate_latent(module, x[:, 5:], cache, absorbed=True)
        torch.testing.assert_close(rest, module(x)[:, 5:], atol=ATOL, rtol=0)


@pytest.mark.parametrize("size", SIZES)
def test_latent_attention_is_multi_head_with_rank_limited_projections(size):
    module, x = build(*size)
    twin = as_multi_head(module)
    assert isinstance(twin, MultiHeadAttention)
    up_down = module.W_up_key.weight @ module.W_down_kv.weight
    torch.testing.assert_close(twin.W_key.weight, up_down)
    latent_dim, d_out, d_in = size[3], size[1], size[0]
    assert torch.linalg.matrix_rank(twin.W_key.weight) <= min(latent_dim, d_out, d_in)
    with torch.no_grad():
        torch.testing.assert_close(twin(x), module(x), atol=ATOL, rtol=0)


def test_a_wrong_fold_is_detected():
    """The equivalence tests can fail: transposing each head's W_up_key
    block (the natural slip) gives outputs far outside the tolerance."""
    module, x = build(*SIZES[0])
    with torch.no_grad():
        right = module.absorbed(x)
        hd, c = module.head_dim, module.latent_dim
        wrong = module.W_up_key.weight.view(module.num_heads, c, hd).transpose(1, 2)
        module.W_up_key.weight.copy_(wrong.reshape(-1, c))
        assert (module.absorbed(x) - right).abs().max() > 100 * ATOL


def test_cache_bytes_count_latents_only():
    module, _ = build(*SIZES[0])
    cache = LatentCache(module, batch=3, max_tokens=10)
    assert cache.nbytes == 3 * 10 * module.latent_dim * 4  # float32


def test_cache_refuses_overflow_and_step_refuses_many_tokens():
    module, x = build(*SIZES[0])
    cache = LatentCache(module, batch=2, max_tokens=2)
    with pytest.raises(ValueError, match="max_tokens >= 3"):
        generate_latent(module, x[:, :3], cache)
    with pytest.raises(ValueError, match=r"x\[:, t : t \+ 1\]"):
        latent_step(module, x, LatentCache(module, 2, 8))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(latent_dim=0), "latent_dim must be a positive integer, got 0"),
        (dict(latent_dim=2.5), "latent_dim must be a positive integer"),
        (dict(latent_dim=True), "latent_dim must be a positive integer"),
        (dict(num_heads=5), "d_out=12 is not divisible by num_heads=5"),
        (dict(dropout=1.0), "dropout must be a number in [0, 1)"),
        (dict(d_in=0), "d_in must be a positive integer"),
    ],
)
def test_bad_arguments_raise_value_error_saying_what_to_change(kwargs, words):
    arguments = dict(d_in=6, d_out=12, context_length=8, dropout=0.0, num_heads=3, latent_dim=4)
    with pytest.raises(ValueError) as raised:
        LatentAttention(**{**arguments, **kwargs})
    message = str(raised.value)
    assert message.startswith("LatentAttention:")
    assert words in message
    if "latent_dim" in kwargs:
        assert "choose" in message


def test_bad_input_raises_value_error():
    module, x = build(*SIZES[0])
    with pytest.raises(ValueError, match="context_length >= 9"):
        module(torch.randn(1, 9, 6))
    with pytest.raises(ValueError, match="d_in=6"):
        module.absorbed(torch.randn(1, 3, 5))


def test_dropout_in_train_mode_drops_attention_weights_in_both_paths():
    module, x = build(*SIZES[0], dropout=0.5)
    module.train()
    torch.manual_seed(7)
    dropped = module(x)
    torch.manual_seed(7)
    dropped_absorbed = module.absorbed(x)
    torch.testing.assert_close(dropped_absorbed, dropped, atol=ATOL, rtol=0)
    with torch.no_grad():
        assert (dropped - module.eval()(x)).abs().max() > 100 * ATOL


def test_rotation_keeps_lengths_and_breaks_the_fold():
    torch.manual_seed(0)
    t = torch.randn(2, 5, 8)
    turned = rotate_pairs(t, torch.arange(5))
    torch.testing.assert_close(turned.norm(dim=-1), t.norm(dim=-1))
    torch.testing.assert_close(turned[:, 0], t[:, 0])  # position 0 turns by 0
    # Scores of rotated queries and keys depend on both positions, so no
    # fixed matrix folded into the query reproduces them.
    q, k = torch.randn(8), torch.randn(8)
    rows = torch.stack([q] * 4)
    turned_q = rotate_pairs(rows, torch.tensor([0, 1, 2, 3]))
    turned_k = rotate_pairs(torch.stack([k] * 4), torch.tensor([0, 1, 2, 3]))
    same_offset = (turned_q * turned_k).sum(-1)  # positions (p, p)
    torch.testing.assert_close(same_offset, same_offset[:1].expand(4))
    shifted = (turned_q[3] * turned_k[0]).sum()
    assert (shifted - same_offset[0]).abs() > 100 * ATOL
    with pytest.raises(ValueError, match="even"):
        rotate_pairs(torch.randn(3, 5), torch.arange(3))
