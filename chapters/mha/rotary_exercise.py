"""Chapter 9's practice: a cached step of RotaryAttention, the turn written
by hand. The check is :func:`mha.checks.rotary.check_rotary_step`."""

import torch

from .checks.rotary import check_rotary_step
from .exercise import Exercise


def my_rotary_step(module, x, cache):
    """RotaryAttention's output for one token x, (b, 1, d_in), at position
    L = cache.length; the cache holds turned keys."""

    def turn(t, start, rotary_dim, base):
        """t (b, H, T, hd): pair (i, i + r/2) of token j turned by angle
        (start + j) * base ** (-2i / r); entries from r on pass through."""
        half = rotary_dim // 2
        i = torch.arange(half, dtype=torch.float64)  # (r/2,)
        pos = torch.arange(start, start + t.shape[-2], dtype=torch.float64)
        angles = (pos[:, None] * base ** (-2 * i / rotary_dim)).float()
        cos, sin = angles.cos(), angles.sin()  # (T, r/2) each
        x1, x2 = t[..., :half], t[..., half:rotary_dim]  # (b, H, T, r/2)
        rest = t[..., rotary_dim:]  # (b, H, T, hd - r)
        first = x1 * cos - x2 * sin  # (b, H, T, r/2)
        second = x2 * cos + x1 * sin  # (b, H, T, r/2)
        return torch.cat([first, second, rest], dim=-1)  # (b, H, T, hd)

    b, L = x.shape[0], cache.length
    r, base = module.rotary_dim, module.base
    query = module.split_heads(module.W_query(x))  # (b, H, 1, hd)
    key = module.split_heads(module.W_key(x))  # (b, H, 1, hd)
    value = module.split_heads(module.W_value(x))  # (b, H, 1, hd)
    query, key = turn(query, L, r, base), turn(key, L, r, base)
    keys, values = cache.append(key, value)  # (b, H, L + 1, hd) each
    attn_scores = query @ keys.transpose(2, 3)  # (b, H, 1, L + 1)
    scale = module.head_dim**0.5
    attn_weights = torch.softmax(attn_scores / scale, dim=-1)
    context = attn_weights @ values  # (b, H, 1, hd)
    context = context.transpose(1, 2).reshape(b, 1, module.d_out)
    return module.out_proj(context)  # (b, 1, d_out)


rotary_step_practice = Exercise(
    checker=check_rotary_step,
    hints=(
        "Two vectors carry positions, the new token's query and key, and "
        "both turn at the same position: L, the number of tokens already in "
        "the cache (cache.length before the append). The value never turns. "
        "Turn them after split_heads, so that each head's entries turn "
        "within that head.",
        "Write turn(t, start, rotary_dim, base) for t of shape (b, H, T, hd): "
        "the angles are (start + j) * base ** (-2i / rotary_dim) for i = 0, "
        "1, ..., rotary_dim / 2 - 1, a (T, rotary_dim / 2) table. x1 is "
        "t[..., :rotary_dim // 2], x2 t[..., rotary_dim // 2:rotary_dim]; "
        "return x1·cos − x2·sin, x2·cos + x1·sin and the untouched rest, "
        "joined along the last axis.",
        "Then query, key = turn(query, L, r, base), turn(key, L, r, base) "
        "with L = cache.length, r = module.rotary_dim, base = module.base, "
        "before cache.append(key, value). The scores over the L + 1 keys it "
        "returns, the weights, the joined context and out_proj stay as the "
        "starting code has them.",
    ),
    solution_code=my_rotary_step,
)
