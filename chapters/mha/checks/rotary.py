"""Chapter 9's check, a catalogue on the core: a cached step of RotaryAttention, each mistake a
buggy reference (:func:`step`) that turns the new query and key (or more) another way."""

from functools import partial
from unittest import mock

import torch

from .. import rotary
from ..rotary_cache import prefill_rotary, rotary_cache
from .core import CheckResult, never_raises
from .reference import Buggy, Catalogue, run_catalogue

#: d_in, d_out, num_heads, rotary_dim, cached tokens, base, seed: partial and whole-head turns.
CONFIGS = ((5, 12, 3, 2, 3, 10_000.0, 1), (4, 16, 2, 4, 5, 100.0, 2), (6, 24, 4, 6, 2, 500.0, 3))


def setup(d_in, d_out, heads, rotary_dim, cached, base, seed):
    """A seeded module, its cache holding ``cached`` turned keys, and the next token."""
    torch.manual_seed(seed)
    m = rotary.RotaryAttention(d_in, d_out, cached + 1, 0.0, heads, False, rotary_dim, base).eval()
    x = torch.randn(2, cached + 1, d_in)  # (b, cached + 1, d_in)
    cache = rotary_cache(m, 2, cached + 1)
    prefill_rotary(m, x[:, :cached], cache)
    return m, x[:, cached:], cache  # the new token: (2, 1, d_in)


def turn(t, start, m, width="rotary", layout="half", swap=False, sign=1, base=None):
    """``t`` (..., T, n) turned from ``start``, or one ingredient wrong: the angles' ``width``
    ("head", "whole head", "d_out", "all"), ``layout``, sin and cos ``swap``-ped, ``sign`` -1,
    a fixed ``base`` instead of the module's."""
    r = {"whole head": m.head_dim, "all": t.shape[-1]}.get(width, m.rotary_dim)
    over = {"head": m.head_dim, "d_out": m.d_out}.get(width, r)  # the angles' denominator
    i = torch.arange(r // 2)  # (r / 2,)
    a, b = (i, i + r // 2) if layout == "half" else (2 * i, 2 * i + 1)
    positions = torch.arange(start, start + t.shape[-2], dtype=torch.float64)[:, None]
    angles = (sign * positions * (base or m.base) ** (-2 * i / over)).float()  # (T, r / 2)
    cos, sin = (angles.sin(), angles.cos()) if swap else (angles.cos(), angles.sin())
    out = t.clone()
    out[..., a], out[..., b] = t[..., a] * cos - t[..., b] * sin, t[..., b] * cos + t[..., a] * sin
    return out


def step(config, at=0, split_first=True, values=False, turning=True, key=True, scale=True,
         dim=-1, project=True, **how):  # fmt: skip
    """The step on a fresh ``setup(*config)``: the new query and key turned at position L + ``at``,
    after the head split or before it, the value too, the query alone or nothing turned; then
    attention with or without the scale and ``out_proj``, its softmax over ``dim``."""
    m, x, cache = setup(*config)
    turned = partial(turn, start=cache.length + at, m=m, **how)
    turns = (turning, turning and key, turning and values)  # the query's, the key's, the value's
    p = [m.W_query(x), m.W_key(x), m.W_value(x)]  # (b, 1, d_out) each
    p = [m.split_heads(turned(t) if j and not split_first else t) for j, t in zip(turns, p)]
    q, k, v = [turned(t) if j and split_first else t for j, t in zip(turns, p)]  # (b, H, 1, hd)
    keys, all_values = cache.append(k, v)  # (b, H, L + 1, hd) each
    weights = torch.softmax(q @ keys.mT / (m.head_dim**0.5 if scale else 1), dim=dim)
    context = (weights @ all_values).transpose(1, 2).flatten(2)  # (b, 1, d_out)
    return m.out_proj(context) if project else context


SPLIT = "You turn before the head split: turn each head's (b, H, 1, head_dim) query and key."
WIDTH = "The angles are computed over {w}: pair i turns by p * base ** (-2i / rotary_dim)."
START = ("Nothing turns: the starting code, or a turn at position 0 (positions counted from 0 in "
         "a cached step turn the new token by angle 0). Which vectors turn, at which position? "
         "hint(1)")  # fmt: skip
MISTAKES = (  # what each buggy reference does differently, and what to tell the reader
    (dict(turning=False), START),
    (dict(width="d_out"), WIDTH.format(w="d_out, all heads' width")),
    (dict(width="head"), WIDTH.format(w="head_dim; only rotary_dim entries turn, so use that")),
    (dict(width="whole head"), "Only each head's first rotary_dim entries turn; the rest pass."),
    (dict(layout="interleaved"), "Pairs (2i, 2i + 1) are the other layout: here (i, i + r/2)."),
    (dict(swap=True), "sin and cos are swapped: x1·cos − x2·sin, x2·cos + x1·sin."),
    (dict(sign=-1), "The turn goes the wrong way: x1·cos − x2·sin, x2·cos + x1·sin, not +, −."),
    (dict(values=True), "Values never turn: only the query and the key carry positions."),
    (dict(key=False), "Only the query turns: turn the new key too, at L, before cache.append."),
    (dict(base=10_000.0), "The angles use base 10,000: use module.base, each model has its own."),
    (dict(scale=False), "The scores are not divided by √head_dim (module.head_dim ** 0.5)."),
    (dict(dim=-2), "Softmax over dim=-2: a query's weights sum to 1 over the keys, dim=-1."),
    (dict(project=False), "No out_proj: the heads' joined context goes through module.out_proj."),
    (dict(at=1), "Position L + 1: read cache.length before the append, not after."),
    (dict(at=-1), "Position L − 1: the new token's position is L, cache.length itself."),
    *((dict(split_first=False, width=w), SPLIT) for w in ("rotary", "all")),
)
PRAISE = "Your step equals RotaryAttention's forward at position L on every setup."
UNKNOWN = "Not RotaryAttention's output, and no catalogued mistake explains it: see hint(2)."
BOOK = "Your step calls the book's turn (rotate, module.turn, module(x), rotary_step): write yours."


@never_raises
def check_rotary_step(answer):
    """Accept ``answer(module, x, cache)`` if it computes the cached step of RotaryAttention."""
    calls = []

    def watched(config):
        m, x, cache = setup(*config)
        with mock.patch.object(rotary, "check_start", lambda s: calls.append(s)):
            return answer(m, x, cache)

    with torch.random.fork_rng(devices=[]), torch.no_grad():
        mistakes = tuple(Buggy(told, told, partial(step, **kw)) for kw, told in MISTAKES)
        found = Catalogue(CONFIGS, step, mistakes, PRAISE, UNKNOWN)
        result = run_catalogue(found, watched)
    return CheckResult(False, BOOK) if calls and result.feedback != START else result
