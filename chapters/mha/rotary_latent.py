"""Chapter 8's latent attention with positions: the decoupled rotary key.

A key turned by its position cannot be folded into the query (chapter 9
shows why), so ``RotaryLatentAttention`` splits each head's query and key:
``head_dim`` entries without position, scored through the latent exactly
as in ``LatentAttention``, and ``rope_dim`` entries that turn. The turned
key is one ``rope_dim``-wide vector for all heads, made by the
down-projection beside the latent and cached turned: a token costs
``latent_dim + rope_dim`` cached numbers (DeepSeek-V2 and V3: 512 + 64).
Each head keeps its own ``rope_dim`` turned query entries.
"""

import torch
from torch import nn

from .attention import check_config, check_heads_divide, check_input, invalid
from .latent import LatentAttention, LatentCache, check_latent_dim
from .rotary import check_start, rotate


class RotaryLatentAttention(LatentAttention):
    """LatentAttention plus a shared, turned key of ``rope_dim`` entries.

    ``W_down_kv`` makes latent_dim + rope_dim numbers a token: the latent,
    then the key that turns. ``W_query_rope`` makes each head's rope_dim
    query entries that turn. Scores add both parts and are scaled by
    √(head_dim + rope_dim), the width of a whole query.
    Shapes: b batch, T tokens, H heads, hd head_dim, c latent_dim, r rope_dim.
    """

    def __init__(
        self,
        d_in,
        d_out,
        context_length,
        dropout,
        num_heads,
        latent_dim,
        rope_dim,
        qkv_bias=False,
        base=10_000.0,
    ):
        check_config(self, d_in, d_out, context_length, dropout, num_heads)
        check_heads_divide(self, d_out, num_heads)
        check_latent_dim(self, latent_dim)
        if (
            isinstance(rope_dim, bool)
            or not isinstance(rope_dim, int)
            or rope_dim < 2
            or rope_dim % 2
        ):
            problem = f"rope_dim must be an even integer from 2, got {rope_dim!r} (DeepSeek: 64)."
            raise invalid(self, problem)
        if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 0:
            raise invalid(self, f"base must be a positive number (e.g. 10_000.0), got {base!r}.")
        super().__init__(d_in, d_out, context_length, dropout, num_heads, latent_dim, qkv_bias)
        self.rope_dim, self.base = rope_dim, float(base)
        self.W_down_kv = nn.Linear(d_in, latent_dim + rope_dim, bias=qkv_bias)
        self.W_query_rope = nn.Linear(d_in, num_heads * rope_dim, bias=qkv_bias)

    def parts(self, x, start):
        """Position-free queries (b, H, T, hd), turned queries (b, H, T, r),
        latents (b, T, c) and the shared turned keys (b, 1, T, r)."""
        b, num_tokens, _ = x.shape
        down = self.W_down_kv(x)  # (b, T, c + r)
        latents, rope_keys = down.split([self.latent_dim, self.rope_dim], dim=-1)
        rope_queries = self.W_query_rope(x).view(b, num_tokens, self.num_heads, -1)
        rope_queries = rotate(rope_queries.transpose(1, 2), start, base=self.base)
        rope_keys = rotate(rope_keys.unsqueeze(1), start, base=self.base)  # (b, 1, T, r)
        return self.split_heads(self.W_query(x)), rope_queries, latents, rope_keys

    def attend(self, scores, values_of):
        """Mask, softmax over √(hd + r), dropout; ``values_of(weights)``."""
        num_tokens = scores.shape[-1]
        future = self.mask[:num_tokens, :num_tokens]  # (T, T)
        scores = scores.masked_fill(future, -torch.inf)
        weights = torch.softmax(scores / (self.head_dim + self.rope_dim) ** 0.5, dim=-1)
        return values_of(self.dropout(weights))

    def forward(self, x, start=0):
        """Up-project the latents into keys and values, then attend."""
        check_input(self, x)
        check_start(start)
        queries, rope_queries, latents, rope_keys = self.parts(x, start)
        keys = self.split_heads(self.W_up_key(latents))  # (b, H, T, hd)
        values = self.split_heads(self.W_up_value(latents))  # (b, H, T, hd)
        scores = queries @ keys.mT + rope_queries @ rope_keys.mT  # (b, H, T, T)
        context = self.attend(scores, lambda w: w @ values).transpose(1, 2)  # (b, T, H, hd)
        return self.out_proj(context.reshape(*x.shape[:2], self.d_out))  # (b, T, d_out)

    def absorbed(self, x, start=0):
        """The same output, scored against the latents and the turned keys:
        no head's position-free keys or values are ever formed."""
        check_input(self, x)
        check_start(start)
        queries, rope_queries, latents, rope_keys = self.parts(x, start)
        latents = latents.unsqueeze(1)  # (b, 1, T, c)
        absorbed_queries = queries @ self.up_key_blocks()  # (b, H, T, c)
        scores = absorbed_queries @ latents.mT + rope_queries @ rope_keys.mT  # (b, H, T, T)
        latent_context = self.attend(scores, lambda w: w @ latents)  # (b, H, T, c)
        per_head = latent_context @ self.value_out_blocks().mT  # (b, H, T, d_out)
        return per_head.sum(dim=1) + self.out_proj.bias  # (b, T, d_out)


class RotaryLatentCache(LatentCache):
    """Per token, the latent and the turned shared key side by side:
    (b, max_tokens, latent_dim + rope_dim)."""

    def __init__(self, module, batch, max_tokens):
        shape = (batch, max_tokens, module.latent_dim + module.rope_dim)
        self.latents = torch.zeros(shape, dtype=module.W_down_kv.weight.dtype)
        self.length = 0


def rotary_latent_step(module, x, cache):
    """Absorbed generation of one token x, (b, 1, d_in), at position L (the
    tokens cached before it): its latent and turned key join the cache."""
    check_input(module, x)
    if x.shape[1] != 1:
        raise invalid(module, f"a step takes one token, (b, 1, d_in), got {tuple(x.shape)}.")
    queries, rope_queries, latent, rope_key = module.parts(x, cache.length)
    cached = cache.append(torch.cat([latent, rope_key.squeeze(1)], dim=-1))  # (b, L+1, c+r)
    latents, rope_keys = cached.unsqueeze(1).split([module.latent_dim, module.rope_dim], -1)
    absorbed_queries = queries @ module.up_key_blocks()  # (b, H, 1, c)
    scores = absorbed_queries @ latents.mT + rope_queries @ rope_keys.mT  # (b, H, 1, L+1)
    weights = torch.softmax(scores / (module.head_dim + module.rope_dim) ** 0.5, dim=-1)
    per_head = (weights @ latents) @ module.value_out_blocks().mT  # (b, H, 1, d_out)
    return per_head.sum(dim=1) + module.out_proj.bias  # (b, 1, d_out)
