"""Multi-head latent attention: cache one small latent per token, not keys.

``LatentAttention`` projects each token *down* to a ``latent_dim``-wide
latent, and splits per-head keys and values back *out* of it with
``W_up_key`` and ``W_up_value``, whose rows are partitioned per head as
chapter 3 partitions ``W_key`` and ``W_value``. Its ``forward`` is
multi-head attention whose key and value projections are the products
``W_up_key.weight @ W_down_kv.weight`` and ``W_up_value.weight @
W_down_kv.weight``, so their rank is at most ``latent_dim``.

``absorbed`` computes the same output without forming any head's keys or
values: head h's block of ``W_up_key`` is folded into its query, so scores
are taken against the latents; its block of ``W_up_value`` is folded into
``out_proj``, so values are combined in the latent space. ``LatentCache``,
``prefill_latents`` and ``latent_step`` generate one token at a time while
caching only the latents (DeepSeek-V2 and V3 cache this way).
"""

import torch
from torch import nn

from .attention import (
    MultiHeadAttention,
    check_config,
    check_heads_divide,
    check_input,
    invalid,
)


def check_latent_dim(owner, latent_dim):
    """Raise ``ValueError`` unless ``latent_dim`` is a positive integer."""
    if isinstance(latent_dim, bool) or not isinstance(latent_dim, int) or latent_dim < 1:
        raise invalid(
            owner,
            f"latent_dim must be a positive integer, got {latent_dim!r}. It "
            "is the width of the latent each token is cached as; choose one "
            "smaller than 2 * d_out to save memory (e.g. d_out // 2).",
        )


class LatentAttention(nn.Module):
    """Multi-head attention whose keys and values come from one latent.

    Shapes: b batch, T tokens, H heads, hd head_dim, c latent_dim.
    """

    def __init__(
        self,
        d_in,
        d_out,
        context_length,
        dropout,
        num_heads,
        latent_dim,
        qkv_bias=False,
    ):
        super().__init__()
        check_config(self, d_in, d_out, context_length, dropout, num_heads)
        check_heads_divide(self, d_out, num_heads)
        check_latent_dim(self, latent_dim)
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.latent_dim = latent_dim
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_down_kv = nn.Linear(d_in, latent_dim, bias=qkv_bias)
        self.W_up_key = nn.Linear(latent_dim, d_out, bias=False)
        self.W_up_value = nn.Linear(latent_dim, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        ones = torch.ones(context_length, context_length)
        self.register_buffer("mask", torch.triu(ones, diagonal=1).bool())

    def split_heads(self, t):
        """(b, num_tokens, d_out) → (b, num_heads, num_tokens, head_dim)."""
        b, num_tokens, _ = t.shape
        t = t.view(b, num_tokens, self.num_heads, self.head_dim)
        return t.transpose(1, 2)

    def forward(self, x):
        """Up-project every latent into keys and values, then attend."""
        check_input(self, x)
        b, num_tokens, _ = x.shape
        latents = self.W_down_kv(x)  # (b, T, c)
        queries = self.split_heads(self.W_query(x))  # (b, H, T, hd)
        keys = self.split_heads(self.W_up_key(latents))  # (b, H, T, hd)
        values = self.split_heads(self.W_up_value(latents))  # (b, H, T, hd)

        attn_scores = queries @ keys.transpose(2, 3)  # (b, H, T, T)
        future = self.mask[:num_tokens, :num_tokens]  # (T, T)
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context = (attn_weights @ values).transpose(1, 2)  # (b, T, H, hd)
        context = context.reshape(b, num_tokens, self.d_out)  # (b, T, d_out)
        return self.out_proj(context)  # (b, T, d_out)

    def up_key_blocks(self):
        """Head h's block of W_up_key, as (H, hd, c): rows h * hd onwards."""
        weight = self.W_up_key.weight  # (d_out, c)
        return weight.unflatten(0, (self.num_heads, self.head_dim))

    def value_out_blocks(self):
        """Head h's block of W_up_value folded into out_proj, (H, d_out, c).

        out_proj reads head h's context from its columns h * hd onwards, and
        that context is its block of W_up_value times a latent: the product
        of the two blocks maps a latent straight to the output.
        """
        H, hd = self.num_heads, self.head_dim
        up = self.W_up_value.weight.unflatten(0, (H, hd))  # (H, hd, c)
        out = self.out_proj.weight.unflatten(1, (H, hd))  # (d_out, H, hd)
        return out.transpose(0, 1) @ up  # (H, d_out, c)

    def absorbed(self, x):
        """The same output as ``forward``, scored against the latents: no
        head's keys or values of the sequence are ever formed."""
        check_input(self, x)
        num_tokens = x.shape[1]
        latents = self.W_down_kv(x).unsqueeze(1)  # (b, 1, T, c)
        queries = self.split_heads(self.W_query(x))  # (b, H, T, hd)
        absorbed_queries = queries @ self.up_key_blocks()  # (b, H, T, c)

        attn_scores = absorbed_queries @ latents.transpose(2, 3)  # (b, H, T, T)
        future = self.mask[:num_tokens, :num_tokens]  # (T, T)
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        latent_context = attn_weights @ latents  # (b, H, T, c)
        per_head = latent_context @ self.value_out_blocks().transpose(1, 2)
        return per_head.sum(dim=1) + self.out_proj.bias  # (b, T, d_out)


class LatentCache:
    """The latents of the tokens seen so far, for one LatentAttention layer.

    Room for max_tokens tokens is allocated once, (b, max_tokens, c), and
    ``length`` says how many are filled. Every head reads the same latents.
    """

    def __init__(self, module, batch, max_tokens):
        shape = (batch, max_tokens, module.latent_dim)
        dtype = module.W_down_kv.weight.dtype
        self.latents = torch.zeros(shape, dtype=dtype)  # (b, max_tokens, c)
        self.length = 0

    @property
    def nbytes(self):
        """The memory the cache holds, in bytes."""
        return self.latents.nbytes

    def append(self, latents):
        """Store new (b, n, c) latents after the others; return all of them
        so far, (b, length, c)."""
        start, end = self.length, self.length + latents.shape[1]
        if end > self.latents.shape[1]:
            raise ValueError(
                f"LatentCache: {end} tokens do not fit in a cache built for "
                f"{self.latents.shape[1]}. Build it with max_tokens >= {end}."
            )
        self.latents[:, start:end] = latents
        self.length = end
        return self.latents[:, :end]  # (b, length, c)

    def rewind(self, length):
        """Forget every token after the first ``length`` (kept in place)."""
        if not 0 <= length <= self.length:
            raise ValueError(
                f"LatentCache: cannot rewind to {length} tokens; the cache holds "
                f"{self.length}. Pass a length from 0 to {self.length}."
            )
        self.length = length


def prefill_latents(module, prompt, cache):
    """Store the latents of a (b, P, d_in) prompt in ``cache``."""
    cache.append(module.W_down_kv(prompt))  # (b, P, c)


def latent_step(module, x, cache, absorbed=False):
    """The output for one new token x, (b, 1, d_in), which sees every cached
    token and itself; its latent joins the cache, which then holds L tokens.

    absorbed=False up-projects the whole cache into keys and values at every
    step; absorbed=True scores against the latents and never does. Its
    values are combined as latents, and only that one (b, H, 1, c) result
    meets each head's block of W_up_value: the same product as folding the
    blocks into out_proj, in an order that costs no (H, d_out, c) fold.
    """
    if x.dim() != 3 or x.shape[1] != 1:
        raise ValueError(
            f"latent_step takes one token, shape (b, 1, d_in), got "
            f"{tuple(x.shape)}. Pass x[:, t : t + 1] for token t."
        )
    b = x.shape[0]
    H, hd = module.num_heads, module.head_dim
    latents = cache.append(module.W_down_kv(x))  # (b, L, c)
    query = module.W_query(x).view(b, H, 1, hd)  # (b, H, 1, hd)
    if absorbed:
        query = query @ module.up_key_blocks()  # (b, H, 1, c)
        attn_scores = query @ latents.transpose(1, 2).unsqueeze(1)  # (b, H, 1, L)
        attn_weights = torch.softmax(attn_scores / hd**0.5, dim=-1)
        latent_context = attn_weights @ latents.unsqueeze(1)  # (b, H, 1, c)
        up_value = module.W_up_value.weight.unflatten(0, (H, hd))  # (H, hd, c)
        context = latent_context @ up_value.transpose(1, 2)  # (b, H, 1, hd)
        context = context.reshape(b, 1, module.d_out)  # (b, 1, d_out)
        return module.out_proj(context)  # (b, 1, d_out)
    keys = module.split_heads(module.W_up_key(latents))  # (b, H, L, hd)
    values = module.split_heads(module.W_up_value(latents))  # (b, H, L, hd)
    attn_scores = query @ keys.transpose(2, 3)  # (b, H, 1, L)
    attn_weights = torch.softmax(attn_scores / hd**0.5, dim=-1)
    context = attn_weights @ values  # (b, H, 1, hd)
    context = context.reshape(b, 1, module.d_out)  # (b, 1, d_out)
    return module.out_proj(context)  # (b, 1, d_out)


def generate_latent(module, inputs, cache, absorbed=False):
    """Feed (b, T, d_in) inputs one token at a time; return (b, T, d_out)."""
    steps = [
        latent_step(module, inputs[:, t : t + 1], cache, absorbed) for t in range(inputs.shape[1])
    ]
    return torch.cat(steps, dim=1)  # (b, T, d_out)


def as_multi_head(module):
    """A MultiHeadAttention computing what ``module`` computes: its key and
    value weights are the rank-limited products up-projection @ down."""
    d_in = module.W_query.in_features
    has_bias = module.W_query.bias is not None
    mha = MultiHeadAttention(
        d_in,
        module.d_out,
        len(module.mask),
        module.dropout.p,
        module.num_heads,
        has_bias,
    )
    down = module.W_down_kv
    with torch.no_grad():
        mha.W_query.load_state_dict(module.W_query.state_dict())
        mha.out_proj.load_state_dict(module.out_proj.state_dict())
        pairs = ((mha.W_key, module.W_up_key), (mha.W_value, module.W_up_value))
        for target, up in pairs:
            target.weight.copy_(up.weight @ down.weight)  # (d_out, d_in)
            if has_bias:
                target.bias.copy_(up.weight @ down.bias)  # (d_out,)
    return mha.train(module.training)


def rotate_pairs(t, positions, base=100.0):
    """Rotate consecutive pairs of t's last axis by angles that grow with
    the token's position, as rotary position embeddings do.

    t is (..., T, d) with d even; positions is (T,). Pair i of token p turns
    by p * base ** (-2 i / d).
    """
    d = t.shape[-1]
    if d % 2:
        raise ValueError(
            f"rotate_pairs: the last axis has {d} entries; it must be even "
            "so that they form pairs. Pass a tensor with an even width."
        )
    rates = base ** (-torch.arange(0, d, 2, dtype=t.dtype) / d)  # (d/2,)
    angles = positions.to(t.dtype)[:, None] * rates  # (T, d/2)
    cos, sin = angles.cos(), angles.sin()  # (T, d/2) each
    even, odd = t[..., 0::2], t[..., 1::2]  # (..., T, d/2) each
    turned = torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1)
    return turned.flatten(-2)  # (..., T, d)


#: How far apart two float32 computations of the same output may be, in
#: absolute terms: the folds reorder sums of products, which moves the last
#: bits (the largest gap seen on small sizes is about 1e-7).
ATOL = 1e-5


def step_multiply_adds(d_in, d_out, num_heads, latent_dim, cached):
    """Multiply-adds of one generation step (batch 1) that sees ``cached``
    tokens, for the three ways to run it: a KV cache of full multi-head
    attention, MLA up-projecting its latent cache, and absorbed MLA.

    Each term is (rows x inner x columns) of one matrix product; softmax,
    masking and the bias are left out, as they cost no multiply-adds.
        ``cached`` counts every token the step attends to, its own included.
    """
    H, c, L = num_heads, latent_dim, cached
    hd = d_out // H
    shared = d_in * d_out + d_out * d_out  # the query and out_proj
    attend = 2 * H * L * hd  # scores and the weighted sum, every head
    return {
        "MHA + KV cache": shared + 2 * d_in * d_out + attend,
        "MLA, up-projecting": shared + d_in * c + 2 * L * c * d_out + attend,
        "MLA, absorbed": shared + d_in * c + 2 * H * hd * c + 2 * H * L * c,
    }
