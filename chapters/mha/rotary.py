"""Rotary position embeddings (RoPE): each head's queries and keys turned by
their token's position, after the head split.

``rotate`` turns the first ``rotary_dim`` entries of every head in pairs:
pair i of the token at position p by the angle ``p * base ** (-2 i /
rotary_dim)``. ``layout`` says which entries pair up: ``"half"`` pairs
``(i, i + rotary_dim / 2)`` (GPT-NeoX, Hugging Face's ``rotate_half``),
``"interleaved"`` pairs ``(2 i, 2 i + 1)`` (RoFormer, Meta's Llama code).
``to_half_layout`` reorders a checkpoint's rows from the second to the first.
"""

import torch

from .attention import MultiHeadAttention, check_input, invalid

LAYOUTS = ("half", "interleaved")


def check_rotary(owner, head_dim, rotary_dim, base=10_000.0, layout="half"):
    """The rotary width (``None`` means ``head_dim``), or ``ValueError``."""
    width = head_dim if rotary_dim is None else rotary_dim
    if isinstance(width, bool) or not isinstance(width, int):
        raise invalid(owner, f"rotary_dim must be an integer, got {width!r}.")
    if width < 2 or width > head_dim or width % 2:
        given = f"head_dim={width}" if rotary_dim is None else f"rotary_dim={width}"
        raise invalid(
            owner,
            f"{given} cannot be turned in pairs within a head of "
            f"head_dim={head_dim}: choose an even rotary_dim from 2 to "
            f"{head_dim - head_dim % 2} (or an even head_dim).",
        )
    if layout not in LAYOUTS:
        raise invalid(owner, f"layout must be 'half' or 'interleaved', got {layout!r}.")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 0:
        raise invalid(owner, f"base must be a positive number (e.g. 10_000.0), got {base!r}.")
    return width


def check_start(start):
    """Raise ``ValueError`` unless the first token's position is an int >= 0."""
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(
            f"rotate: start is the first token's position, a whole number "
            f"from 0 (the tokens already cached), got {start!r}."
        )


def angles(num_tokens, start, rotary_dim, base=10_000.0):
    """(T, rotary_dim / 2): (start + j) * base ** (-2 i / rotary_dim)."""
    positions = torch.arange(start, start + num_tokens, dtype=torch.float64)
    pairs = torch.arange(0, rotary_dim, 2, dtype=torch.float64)  # 2 i
    rates = base ** (-pairs / rotary_dim)  # (rotary_dim / 2,)
    return (positions[:, None] * rates).float()  # (num_tokens, rotary_dim / 2)


def rotate(t, start=0, rotary_dim=None, base=10_000.0, layout="half"):
    """``t``, (..., num_tokens, head_dim), with each token's first
    ``rotary_dim`` entries turned in pairs; the others pass through."""
    check_start(start)
    head_dim, num_tokens = t.shape[-1], t.shape[-2]
    r = check_rotary("rotate", head_dim, rotary_dim, base, layout)
    turn = angles(num_tokens, start, r, base).to(t.dtype)  # (T, r / 2)
    cos, sin = turn.cos(), turn.sin()
    turned, rest = t[..., :r], t[..., r:]
    if layout == "half":
        x1, x2 = turned[..., : r // 2], turned[..., r // 2 :]  # (..., T, r/2)
        pairs = (x1 * cos - x2 * sin, x2 * cos + x1 * sin)
        return torch.cat([*pairs, rest], dim=-1)  # (..., T, head_dim)
    x1, x2 = turned[..., 0::2], turned[..., 1::2]  # (..., T, r / 2) each
    pairs = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return torch.cat([pairs.flatten(-2), rest], dim=-1)  # (..., T, head_dim)


def half_order(head_dim, rotary_dim):
    """Where row j of a head in the half layout comes from in the
    interleaved one: 0, 2, 4, ..., then 1, 3, 5, ..., then the rest."""
    evens, odds = range(0, rotary_dim, 2), range(1, rotary_dim, 2)
    return torch.tensor([*evens, *odds, *range(rotary_dim, head_dim)])


def to_half_layout(weight, num_heads, rotary_dim=None):
    """A ``W_query`` or ``W_key`` weight (or bias), whose rows pair up as
    ``(2i, 2i + 1)`` in each head, reordered so that they pair up as ``(i, i
    + rotary_dim / 2)``: a ``"half"`` module with it equals an
    ``"interleaved"`` one with the original. Each head's rows move only
    within its own block of head_dim rows."""
    if not isinstance(weight, torch.Tensor) or weight.dim() not in (1, 2):
        raise invalid("to_half_layout", "expected a weight (d_out, d_in) or a bias (d_out,).")
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise invalid("to_half_layout", f"num_heads must be a positive integer, got {num_heads!r}.")
    if len(weight) % num_heads:
        raise invalid(
            "to_half_layout",
            f"the weight has {len(weight)} rows, which num_heads={num_heads} "
            "cannot split into equal head blocks: pass the model's num_heads.",
        )
    head_dim = len(weight) // num_heads
    r = check_rotary("to_half_layout", head_dim, rotary_dim)
    blocks = weight.unflatten(0, (num_heads, head_dim))  # (H, hd, ...)
    return blocks[:, half_order(head_dim, r)].flatten(0, 1)  # (d_out, ...)


class RotaryAttention(MultiHeadAttention):
    """MultiHeadAttention whose queries and keys turn by position in each
    head, after the split; values do not. ``forward(x, start)`` puts the
    tokens at positions start, start + 1, ... (a cached step: start is the
    number of tokens before). ``num_kv_groups = num_heads``: one key/value
    block per head, so chapter 6's ``KVCache`` holds its keys and values."""

    def __init__(
        self,
        d_in,
        d_out,
        context_length,
        dropout,
        num_heads,
        qkv_bias=False,
        rotary_dim=None,
        base=10_000.0,
        layout="half",
    ):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.rotary_dim = check_rotary(self, self.head_dim, rotary_dim, base, layout)
        self.base, self.layout = float(base), layout
        self.num_kv_groups = num_heads

    @classmethod
    def from_wrapper(cls, wrapper):
        """Refused: a wrapper's heads have no positions to turn by."""
        raise invalid(cls.__name__, "a wrapper's heads do not turn: build it directly.")

    def to_wrapper(self):
        """Refused: chapter 1's heads would drop the turn."""
        raise invalid(self, "chapter 1's heads cannot turn by position.")

    def turn(self, t, start):
        """Queries or keys, (b, H, T, head_dim), turned from position start."""
        return rotate(t, start, self.rotary_dim, self.base, self.layout)

    def forward(self, x, start=0):
        check_input(self, x)
        check_start(start)
        b, num_tokens, _ = x.shape
        # (b, num_heads, num_tokens, head_dim)
        queries = self.turn(self.split_heads(self.W_query(x)), start)
        keys = self.turn(self.split_heads(self.W_key(x)), start)
        values = self.split_heads(self.W_value(x))  # values never turn

        # (b, num_heads, num_tokens, num_tokens)
        attn_scores = queries @ keys.transpose(2, 3)
        future = self.mask[:num_tokens, :num_tokens]
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # (b, num_tokens, num_heads, head_dim)
        context = (attn_weights @ values).transpose(1, 2)
        context = context.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)  # (b, num_tokens, d_out)
