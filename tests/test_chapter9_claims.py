"""Chapter 9's claims, run where they could fail, on more sizes than the chapter shows.

Shift invariance (the outputs at positions start, start + 1, ... equal those from 0, within
SHIFT_ATOL = 1e-4 absolute: angles near a few hundred radians carry float32 rounding), the two
layouts (a "half" module with ``to_half_layout``'s rows equals an "interleaved" one, within ATOL
= 1e-5; without it, it differs), the cached step (token by token = forward, ATOL), the decoupled
rotary latent (absorbed = forward, ATOL). Each is also run on the portable CPU code path, and
each has a test that it can fail.
"""

import os
import subprocess
import sys

import pytest
import torch

from mha.latent import ATOL
from mha.rotary import RotaryAttention, to_half_layout
from mha.rotary_cache import generate_rotary, prefill_rotary, rotary_cache, rotary_step
from mha.rotary_latent import RotaryLatentAttention

SHIFT_ATOL = 1e-4
PORTABLE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
#: d_in, d_out, num_heads, rotary_dim, base, seed
SIZES = [(3, 16, 2, None, 10_000.0, 123), (5, 24, 3, 4, 500_000.0, 1), (8, 32, 4, 6, 100.0, 2)]


def module(d_in, d_out, heads, rotary_dim, base, seed, layout="half"):
    torch.manual_seed(seed)
    m = RotaryAttention(d_in, d_out, 10, 0.0, heads, True, rotary_dim, base, layout).eval()
    return m, torch.randn(2, 10, d_in)  # x: (2, 10, d_in)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("start", [1, 100, 300])
def test_a_shift_of_every_position_leaves_the_outputs(size, start):
    m, x = module(*size)
    with torch.no_grad():
        assert torch.allclose(m(x, start), m(x), atol=SHIFT_ATOL, rtol=0)


def test_the_shift_claim_can_fail():
    """Turning the keys from another start than the queries changes the outputs."""
    m, x = module(*SIZES[0])
    with torch.no_grad():
        q, k, v = (m.split_heads(layer(x)) for layer in (m.W_query, m.W_key, m.W_value))
        s1 = m.turn(q, 0) @ m.turn(k, 0).mT
        s2 = m.turn(q, 0) @ m.turn(k, 5).mT
    assert not torch.allclose(s1, s2, atol=SHIFT_ATOL)


@pytest.mark.parametrize("size", SIZES)
def test_to_half_layout_makes_the_layouts_equal_and_without_it_they_differ(size):
    inter, x = module(*size, layout="interleaved")
    half, _ = module(*size, layout="half")
    half.load_state_dict(inter.state_dict())
    with torch.no_grad():
        assert not torch.allclose(half(x), inter(x), atol=100 * ATOL)  # the chapter's claim
        for name in ("W_query", "W_key"):
            for p in ("weight", "bias"):
                converted = to_half_layout(getattr(getattr(inter, name), p), size[2], size[3])
                getattr(getattr(half, name), p).copy_(converted)
        assert torch.allclose(half(x), inter(x), atol=ATOL, rtol=0)


@pytest.mark.parametrize("size", SIZES)
def test_the_cached_step_equals_the_forward_and_a_wrong_position_does_not(size):
    m, x = module(*size)
    with torch.no_grad():
        cache = rotary_cache(m, 2, 10)
        prefill_rotary(m, x[:, :3], cache)
        steps = generate_rotary(m, x[:, 3:], cache)
        assert torch.allclose(steps, m(x)[:, 3:], atol=ATOL, rtol=0)
        cache.rewind(3)  # the turned keys of tokens 0 to 2 stay
        at_zero = rotary_step(m, x[:, 3:4], cache, position=0)
        assert not torch.allclose(at_zero, steps[:, :1], atol=ATOL)
        cache.rewind(3)
        at_three = rotary_step(m, x[:, 3:4], cache, position=3)
        assert torch.allclose(at_three, steps[:, :1], atol=ATOL, rtol=0)


@pytest.mark.parametrize("seed", [123, 4, 5])
def test_the_decoupled_key_absorbs_exactly_and_caches_latent_plus_rope(seed):
    torch.manual_seed(seed)
    m = RotaryLatentAttention(3, 8, 6, 0.0, 4, latent_dim=5, rope_dim=2).eval()
    x = torch.randn(2, 6, 3)
    with torch.no_grad():
        assert torch.allclose(m.absorbed(x, 7), m(x, 7), atol=ATOL, rtol=0)
        with_rope = m(x)
        m.W_query_rope.weight.zero_()  # an absorbed form that dropped the turned part
        assert not torch.allclose(m(x), with_rope, atol=ATOL)
    assert m.latent_dim + m.rope_dim == 7


def test_the_claims_hold_on_the_portable_code_path():
    """This file's other tests, in a fresh pytest on the portable code path. They use no pytest
    plugin, so none is loaded (nbval's import alone, with nbformat's schema checks, costs 2.5
    CPU-s), nor pyproject.toml's ``addopts``, which name nbval's options."""
    env = {**os.environ, **PORTABLE, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    here = os.path.dirname(__file__)
    run = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        __file__,
        "-k",
        "not portable",
    ]
    done = subprocess.run(run, env=env, cwd=here, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:]
