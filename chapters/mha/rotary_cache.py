"""Generating with positions: chapter 6's key/value cache, holding keys that
are already turned.

A key turned at its position never needs turning again, so the cache keeps
it turned. A new token sits at position L, the number of tokens cached
before it: ``rotary_step`` turns its query and key there, and so equals
``RotaryAttention``'s forward token by token.
"""

import torch

from .gqa import KVCache, check_one_token


def rotary_cache(module, batch, max_tokens):
    """Chapter 6's ``KVCache`` for a ``RotaryAttention``: (b, H, n, hd)."""
    return KVCache(module, batch, max_tokens)


def prefill_rotary(module, prompt, cache):
    """Store the turned keys and the values of a (b, P, d_in) prompt, the
    tokens at positions cache.length, cache.length + 1, ..."""
    keys = module.split_heads(module.W_key(prompt))  # (b, H, P, hd)
    values = module.split_heads(module.W_value(prompt))  # (b, H, P, hd)
    cache.append(module.turn(keys, cache.length), values)


def rotary_step(module, x, cache, position=None):
    """The output for one new token x, (b, 1, d_in), at position L (the
    tokens cached before it); its turned key and its value join the cache.
    ``position`` turns it elsewhere instead, to show what a wrong one does."""
    check_one_token(x)
    b = x.shape[0]
    position = cache.length if position is None else position
    query = module.split_heads(module.W_query(x))  # (b, H, 1, hd)
    key = module.split_heads(module.W_key(x))  # (b, H, 1, hd)
    value = module.split_heads(module.W_value(x))  # (b, H, 1, hd)
    query = module.turn(query, position)  # (b, H, 1, hd)
    keys, values = cache.append(module.turn(key, position), value)

    attn_scores = query @ keys.transpose(2, 3)  # (b, H, 1, L + 1)
    attn_weights = torch.softmax(attn_scores / module.head_dim**0.5, dim=-1)
    context = attn_weights @ values  # (b, H, 1, hd)
    context = context.transpose(1, 2).reshape(b, 1, module.d_out)
    return module.out_proj(context)  # (b, 1, d_out)


def generate_rotary(module, inputs, cache):
    """Feed (b, T, d_in) inputs one token at a time; return (b, T, d_out)."""
    steps = [rotary_step(module, inputs[:, t : t + 1], cache) for t in range(inputs.shape[1])]
    return torch.cat(steps, dim=1)  # (b, T, d_out)
