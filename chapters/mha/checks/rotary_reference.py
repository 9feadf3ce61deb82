"""Chapter 9's reference, :func:`step`: a cached step of RotaryAttention on a fresh
:func:`setup`, right or with one mistake of :data:`.rotary.MISTAKES` made (its keywords)."""

from functools import partial

import torch

from .. import rotary
from ..rotary_cache import prefill_rotary, rotary_cache
from .watch import dropped


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
         flip=1, rates="-2i", degrees=False, rest="kept", inplace=False):  # fmt: skip
    """``t`` (..., T, n) turned from ``start``, or one ingredient wrong: the angles' ``width``
    ("head", "whole head", "d_out", "all", "2r": the 2 of 2i left out, "r/2": i doubled again),
    ``layout`` ("head half": i with i + head_dim / 2), sin and cos ``swap``-ped, ``sign`` -1, a
    fixed ``base`` instead of the module's, angles in ``low`` precision (bfloat16) or ``degrees``,
    the second entry's sin term with its sign ``flip``-ped (-1) or from the new first (``inplace``),
    the ``rates`` ("reversed", "+2i", i "from 1"), the ``rest`` "dropped" (zeros) or put "first"."""
    r = {"whole head": m.head_dim, "all": t.shape[-1]}.get(width, m.rotary_dim)
    over = {"head": m.head_dim, "d_out": m.d_out, "2r": 2 * r, "r/2": r / 2}.get(width, r)
    i = torch.arange(r // 2)  # (r / 2,)
    pairs = {"half": (i, i + r // 2), "head half": (i, i + m.head_dim // 2)}
    a, b = pairs.get(layout, (2 * i, 2 * i + 1))  # else interleaved
    e = {"reversed": i.flip(0), "+2i": -i, "from 1": i + 1}.get(rates, i)  # angle p·base^(-2e/r)
    positions = torch.arange(start, start + t.shape[-2], dtype=torch.float64)[:, None]
    angles = (sign * positions * (base or m.base) ** (-2 * e / over)).float()  # (T, r / 2)
    angles = angles.bfloat16().float() if low else angles * torch.pi / 180 if degrees else angles
    cos, sin = (angles.sin(), angles.cos()) if swap else (angles.cos(), angles.sin())
    out = t.clone()
    out[..., a] = first = t[..., a] * cos - t[..., b] * sin
    out[..., b] = t[..., b] * cos + flip * (first if inplace else t[..., a]) * sin
    out[..., r:] = 0 if rest == "dropped" else out[..., r:]
    return out.roll(t.shape[-1] - r, -1) if rest == "first" else out


def step(config, at=0, key_at=0, split_first=True, heads_axis=False, values=False, turning=True,
         key=True, query=True, again=False, attend="L + 1", scale=0.5, dim=-1, project=True,
         drop=0, row0=False, record=None, **how):  # fmt: skip
    """The step on a fresh ``setup(*config)``: the new query and key turned at position L + ``at``
    (or a length: "capacity", "batch", "tokens"; the key ``key_at`` later), after the head split
    or before it, along the ``heads_axis``, the value too (or the value is the turned "key"), the
    query or key alone or nothing turned, the cache's keys turned ``again``; then attention over
    the ``attend`` keys ("buffer", "first", "self", "cached") divided by head_dim ** ``scale`` (or
    a width's root), its softmax over ``dim``, dropout in eval (``drop``: True, the module's p),
    with or without ``out_proj``, batch row 0's output everywhere (``row0``). ``record`` (a dict)
    gets the turned query and key, the scores (raw, scaled), the weights and the context."""
    m, x, cache = setup(*config)
    lengths = {"capacity": cache.keys.shape[2], "batch": x.shape[0], "tokens": x.shape[1]}
    start = lengths[at] if isinstance(at, str) else cache.length + at
    where, turned = (start, start + key_at, start), partial(turn, m=m, **how)  # q, k, v
    turns = (turning and query, turning and key, turning and values)

    def after_split(t, start):  # along the tokens, or along the heads of (b, 1, H, hd)
        return turned(t.transpose(1, 2), start).transpose(1, 2) if heads_axis else turned(t, start)

    p = [m.W_query(x), m.W_key(x), m.W_value(x)]  # (b, 1, d_out) each
    p = [turned(t, s) if j and not split_first else t for t, j, s in zip(p, turns, where)]
    p = [m.split_heads(t) for t in p]  # (b, H, 1, hd) each
    q, k, v = [after_split(t, s) if j and split_first else t for t, j, s in zip(p, turns, where)]
    keys, vals = cache.append(k, k if values == "key" else v)  # (b, H, L + 1, hd) each
    keys = turned(keys, 0) if again else keys  # every key turned a second time
    keys, vals = (cache.keys, cache.values) if attend == "buffer" else (keys, vals)
    span = {"first": slice(0, 1), "self": slice(-1, None), "cached": slice(0, -1)}.get(attend)
    keys, vals = (keys[:, :, span], vals[:, :, span]) if span else (keys, vals)
    root = getattr(m, scale) ** 0.5 if isinstance(scale, str) else m.head_dim**scale  # a width
    weights = torch.softmax(q @ keys.mT / root, dim=dim)
    weights = dropped(weights, m.dropout.p if drop is True else drop)
    context = weights @ vals  # (b, H, 1, hd)
    record = {} if record is None else record
    record.update(query=q, key=k, scores=(q @ keys.mT, q @ keys.mT / root), weights=weights)
    out = record["context"] = context.transpose(1, 2).flatten(2)  # (b, 1, d_out)
    out = m.out_proj(out) if project else out
    return out[:1].expand_as(out) if row0 else out
