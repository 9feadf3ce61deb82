"""RotaryAttention, to_half_layout, the cached step and the decoupled latent
key, against a rotation written independently from the formula: pair
(a, b) of position p turns by p * base ** (-2 i / rotary_dim), as
x_a cos - x_b sin, x_b cos + x_a sin. Float32 outputs agree within ATOL
(1e-5 absolute; the gaps seen are about 1e-7)."""

import math

import pytest
import torch

import mha
from mha.rotary import RotaryAttention, rotate, to_half_layout
from mha.rotary_cache import generate_rotary, prefill_rotary, rotary_cache
from mha.rotary_latent import RotaryLatentAttention, RotaryLatentCache, rotary_latent_step

ATOL = 1e-5


def by_formula(t, start, rotary_dim, base, layout):
    """The turn, one pair and one position at a time, in float64."""
    out = t.double().clone()
    half = rotary_dim // 2
    for j in range(t.shape[-2]):
        for i in range(half):
            a, b = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
            angle = (start + j) * base ** (-2 * i / rotary_dim)
            xa, xb = t[..., j, a].double(), t[..., j, b].double()
            out[..., j, a] = xa * math.cos(angle) - xb * math.sin(angle)
            out[..., j, b] = xb * math.cos(angle) + xa * math.sin(angle)
    return out


def attention_by_formula(m, x, start):
    """RotaryAttention's output, with by_formula's turn and its own attention."""
    split = lambda t: t.double().unflatten(-1, (m.num_heads, -1)).transpose(1, 2)  # noqa: E731
    turn = lambda t: by_formula(t, start, m.rotary_dim, m.base, m.layout)  # noqa: E731
    q, k, v = split(m.W_query(x)), split(m.W_key(x)), split(m.W_value(x))
    q, k = turn(q), turn(k)
    scores = q @ k.mT / m.head_dim**0.5  # (b, H, T, T)
    T = x.shape[1]
    scores = scores.masked_fill(torch.ones(T, T).triu(1).bool(), -torch.inf)
    context = (scores.softmax(-1) @ v).transpose(1, 2).flatten(2)  # (b, T, d_out)
    return context @ m.out_proj.weight.double().T + m.out_proj.bias.double()


CASES = [  # d_in, d_out, heads, rotary_dim, layout, start, base
    (5, 12, 3, None, "half", 0, 10_000.0),
    (5, 12, 3, 2, "half", 3, 10_000.0),
    (4, 16, 2, None, "interleaved", 5, 100.0),
    (4, 16, 2, 4, "interleaved", 0, 500_000.0),
    (6, 24, 4, 4, "half", 11, 10_000),
]


@pytest.mark.parametrize("d_in, d_out, heads, rotary_dim, layout, start, base", CASES)
def test_attention_equals_the_formula(d_in, d_out, heads, rotary_dim, layout, start, base):
    torch.manual_seed(sum(CASES[0][:3]) + start)
    m = RotaryAttention(d_in, d_out, 7, 0.0, heads, True, rotary_dim, base, layout)
    x = torch.randn(2, 7, d_in)
    with torch.no_grad():
        got, expected = m(x, start), attention_by_formula(m, x, start)
    assert torch.allclose(got.double(), expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("rotary_dim", [None, 2, 6])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotate_equals_the_formula_and_keeps_the_rest(rotary_dim, layout):
    t = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(4))
    got = rotate(t, 7, rotary_dim, 10_000.0, layout)
    assert torch.allclose(got.double(), by_formula(t, 7, rotary_dim or 8, 1e4, layout), atol=ATOL)
    assert torch.equal(got[..., rotary_dim or 8 :], t[..., rotary_dim or 8 :])


@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_to_half_layout_makes_half_equal_interleaved(rotary_dim):
    torch.manual_seed(8)
    inter = RotaryAttention(6, 24, 8, 0.0, 3, True, rotary_dim, layout="interleaved")
    half = RotaryAttention(6, 24, 8, 0.0, 3, True, rotary_dim, layout="half")
    half.load_state_dict(inter.state_dict())
    x = torch.randn(2, 8, 6)
    with torch.no_grad():
        misread = half(x)
        for name in ("W_query", "W_key"):
            for p in ("weight", "bias"):
                old = getattr(getattr(inter, name), p)
                getattr(getattr(half, name), p).copy_(to_half_layout(old, 3, rotary_dim))
        assert not torch.allclose(misread, inter(x), atol=1e-3)
        assert torch.allclose(half(x), inter(x), atol=ATOL, rtol=0)


def test_a_cached_step_equals_the_forward():
    torch.manual_seed(2)
    m = RotaryAttention(5, 12, 9, 0.0, 3, rotary_dim=2).eval()
    x = torch.randn(2, 9, 5)
    with torch.no_grad():
        cache = rotary_cache(m, 2, 9)
        prefill_rotary(m, x[:, :4], cache)
        steps = generate_rotary(m, x[:, 4:], cache)
        assert torch.allclose(steps, m(x)[:, 4:], atol=ATOL, rtol=0)
        cache.rewind(4)  # a step that starts from position 0 differs
        assert not torch.allclose(m(x[:, 4:5])[:, 0], steps[:, 0], atol=1e-3)


def test_the_decoupled_key_folds_and_caches_latent_plus_rope():
    torch.manual_seed(3)
    m = RotaryLatentAttention(5, 12, 8, 0.0, 3, latent_dim=6, rope_dim=4, qkv_bias=True).eval()
    x = torch.randn(2, 8, 5)
    calls = []
    for layer in (m.W_up_key, m.W_up_value):
        layer.register_forward_hook(lambda *_: calls.append("up"))
    with torch.no_grad():
        full = m(x, 2)
        calls.clear()
        assert torch.allclose(m.absorbed(x, 2), full, atol=ATOL, rtol=0)
        cache = RotaryLatentCache(m, 2, 8)
        steps = torch.cat([rotary_latent_step(m, x[:, t : t + 1], cache) for t in range(8)], 1)
    assert calls == []
    assert torch.allclose(steps, m(x), atol=ATOL, rtol=0)
    assert cache.latents.shape[-1] == 6 + 4 and cache.nbytes == 2 * 8 * (6 + 4) * 4


REFUSED = [
    (lambda: RotaryAttention(4, 12, 6, 0.0, 3, rotary_dim=3), "even rotary_dim"),
    (lambda: RotaryAttention(4, 12, 6, 0.0, 3, rotary_dim=0), "from 2 to 4"),
    (lambda: RotaryAttention(4, 12, 6, 0.0, 3, rotary_dim=6), "head_dim=4"),
    (lambda: RotaryAttention(4, 9, 6, 0.0, 3), "or an even head_dim"),
    (lambda: RotaryAttention(4, 12, 6, 0.0, 3, rotary_dim=2.0), "integer"),
    (lambda: RotaryAttention(4, 12, 6, 0.0, 3, layout="pairs"), "'half' or 'interleaved'"),
    (lambda: RotaryAttention(4, 12, 6, 0.0, 3, base=0), "positive number"),
    (lambda: RotaryAttention(4, 10, 6, 0.0, 3), "not divisible by num_heads"),
    (lambda: RotaryAttention(4, 12, 6, 1.5, 3), "dropout"),
    (lambda: RotaryAttention(4, 12, 6, 0.0, 3)(torch.randn(1, 7, 4)), "context_length"),
    (lambda: RotaryAttention(4, 12, 6, 0.0, 3)(torch.randn(1, 2, 4), -1), "start"),
    (lambda: rotate(torch.randn(1, 2, 3, 4), 1.5), "whole number"),
    (lambda: to_half_layout(torch.randn(10, 3), 3), "num_heads=3"),
    (lambda: to_half_layout(torch.randn(12, 3), 0), "positive integer"),
    (lambda: to_half_layout([1.0], 1), "expected a weight"),
    (lambda: to_half_layout(torch.randn(12, 3), 3, rotary_dim=5), "even rotary_dim"),
    (lambda: RotaryLatentAttention(4, 12, 6, 0.0, 3, 6, rope_dim=3), "rope_dim"),
    (lambda: RotaryLatentAttention(4, 12, 6, 0.0, 3, 6, 4, base=-1.0), "base"),
    (lambda: RotaryLatentAttention(4, 12, 6, 0.0, 3, 0, 4), "latent_dim"),
]


@pytest.mark.parametrize("make, words", REFUSED)
def test_every_refusal_says_what_to_change(make, words):
    with pytest.raises(ValueError, match=words):
        make()


def test_exported():
    assert mha.RotaryAttention is RotaryAttention


def test_the_wrapper_conversions_refuse_rather_than_drop_the_turn():
    from mha import MultiHeadAttentionWrapper

    module = RotaryAttention(4, 8, 6, 0.0, 2)
    with pytest.raises(ValueError, match="cannot turn"):
        module.to_wrapper()
    with pytest.raises(ValueError, match="do not turn"):
        RotaryAttention.from_wrapper(MultiHeadAttentionWrapper(4, 4, 6, 0.0, 2))
