"""Chapter 9's reference, :func:`step`: a cached step of RotaryAttention on a fresh
:func:`setup`, right or with one mistake of :data:`.rotary.MISTAKES` made (its keywords)."""

from functools import partial

import torch

from .. import rotary
from ..rotary_cache import prefill_rotary, rotary_cache
from .shortcuts import dropped


def setup(d_in, d_out, heads, rotary_dim, cached, base, dropout, seed):
    """A seeded module, its cache (room for 3 more) holding ``cached`` turned keys, the next
    token."""
    torch.manual_seed(seed)
    m = rotary.RotaryAttention(d_in, d_out, cached + 3, dropout, heads, False, rotary_dim, base)
    x = torch.randn(2, cached + 1, d_in)  # (b, cached + 1, d_in)
    cache = rotary_cache(m.eval(), 2, cached + 3)  # eval mode: its dropout is off
    prefill_rotary(m, x[:, :cached], cache)
    return m, x[:, cached:], cache  # the new token: (2, 1, d_in)


def turn(t, start, m, width="rotary", layout="half", swap=False, sign=1, base=None, low=False,
         flip=1):  # fmt: skip
    """``t`` (..., T, n) turned from ``start``, or one ingredient wrong: the angles' ``width``
    ("head", "whole head", "d_out", "all", "2r": the 2 of 2i left out, "r/2": i doubled again),
    ``layout`` ("head half": i with i + head_dim / 2), sin and cos ``swap``-ped, ``sign`` -1, a
    fixed ``base`` instead of the module's, angles in ``low`` precision (bfloat16), the second
    entry's sin term with its sign ``flip``-ped (-1)."""
    r = {"whole head": m.head_dim, "all": t.shape[-1]}.get(width, m.rotary_dim)
    over = {"head": m.head_dim, "d_out": m.d_out, "2r": 2 * r, "r/2": r / 2}.get(width, r)
    i = torch.arange(r // 2)  # (r / 2,)
    pairs = {"half": (i, i + r // 2), "head half": (i, i + m.head_dim // 2)}
    a, b = pairs.get(layout, (2 * i, 2 * i + 1))  # else interleaved
    positions = torch.arange(start, start + t.shape[-2], dtype=torch.float64)[:, None]
    angles = (sign * positions * (base or m.base) ** (-2 * i / over)).float()  # (T, r / 2)
    angles = angles.bfloat16().float() if low else angles
    cos, sin = (angles.sin(), angles.cos()) if swap else (angles.cos(), angles.sin())
    out = t.clone()
    first, second = t[..., a] * cos - t[..., b] * sin, t[..., b] * cos + flip * t[..., a] * sin
    out[..., a], out[..., b] = first, second
    return out


def step(config, at=0, split_first=True, values=False, turning=True, key=True, query=True,
         scale=0.5, dim=-1, project=True, drop=False, buffer=False, late=False, **how):  # fmt: skip
    """The step on a fresh ``setup(*config)``: the new query and key turned at position L + ``at``,
    after the head split or before it, the value too, the query or key alone or nothing turned; then
    attention (over the whole ``buffer``?) divided by head_dim ** ``scale`` (or a width's root),
    with or without ``out_proj``, its softmax over ``dim``, dropout left on in eval (``drop``)."""
    m, x, cache = setup(*config)
    turned = partial(turn, start=cache.length + at, m=m, **how)
    turns = (turning and query, turning and key, turning and values)  # q's, k's, v's
    p = [m.W_query(x), m.W_key(x), m.W_value(x)]  # (b, 1, d_out) each
    p = [m.split_heads(turned(t) if j and not split_first else t) for j, t in zip(turns, p)]
    q, k, v = [turned(t) if j and split_first else t for j, t in zip(turns, p)]  # (b, H, 1, hd)
    q = turn(p[0], cache.length + 1, m, **how) if late else q  # after the append, at L + 1
    keys, all_values = cache.append(k, v)  # (b, H, L + 1, hd) each
    keys, all_values = (cache.keys, cache.values) if buffer else (keys, all_values)
    root = getattr(m, scale) ** 0.5 if isinstance(scale, str) else m.head_dim**scale  # a width
    weights = torch.softmax(q @ keys.mT / root, dim=dim)
    weights = dropped(weights, m.dropout.p) if drop else weights
    context = (weights @ all_values).transpose(1, 2).flatten(2)  # (b, 1, d_out)
    return m.out_proj(context) if project else context
