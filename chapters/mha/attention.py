"""The book's attention modules: one head, heads in a loop, and heads as weight splits.

Constructor signatures, attribute names and the order in which parameters are created follow
the reference book (rasbt/LLMs-from-scratch, chapter 3), so a seeded run prints its numbers.
"""

import torch
from torch import nn


def check_config(d_in, d_out, context_length, dropout, num_heads=1, *, who):
    """Raise ``ValueError`` for constructor arguments that cannot make a working module."""
    for name, value in (("d_in", d_in), ("d_out", d_out), ("context_length", context_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{who}: {name} must be a positive integer, got {value!r}.")
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(
            f"{who}: num_heads must be a positive integer, got {num_heads!r}; "
            "use num_heads=1 for a single head."
        )
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"{who}: dropout must be a number in [0, 1), got {dropout!r}.")


def check_heads_divide(d_out, num_heads, *, who):
    """Raise ``ValueError`` unless ``num_heads`` column blocks of equal width fill ``d_out``."""
    if d_out % num_heads != 0:
        raise ValueError(
            f"{who}: d_out={d_out} is not divisible by num_heads={num_heads}, so the heads cannot "
            f"split it evenly. Choose d_out as a multiple of num_heads (e.g. {num_heads * max(1, d_out // num_heads)})."
        )


def check_input(x, d_in, context_length, *, who):
    """Raise ``ValueError`` unless ``x`` is a ``(batch, num_tokens, d_in)`` tensor that fits the mask."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{who}: expected a torch.Tensor, got {type(x).__name__}.")
    if x.dim() != 3:
        hint = " Add a batch axis with x.unsqueeze(0)." if x.dim() == 2 else ""
        raise ValueError(
            f"{who}: expected input of shape (batch, num_tokens, d_in), "
            f"got {x.dim()}-D shape {tuple(x.shape)}.{hint}"
        )
    num_tokens, width = x.shape[1], x.shape[2]
    if width != d_in:
        raise ValueError(
            f"{who}: the last dimension of the input is {width}, but the module was built "
            f"with d_in={d_in}. Build it with d_in={width}, or pass inputs of width {d_in}."
        )
    if num_tokens > context_length:
        raise ValueError(
            f"{who}: the input has {num_tokens} tokens, more than context_length={context_length}, "
            f"the size of the causal mask. Build the module with context_length >= {num_tokens}, "
            "or pass a shorter sequence."
        )


class CausalAttention(nn.Module):
    """One causal self-attention head: a complete attention unit on its own."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        check_config(d_in, d_out, context_length, dropout, who="CausalAttention")
        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

    def forward(self, x):
        check_input(x, self.d_in, self.context_length, who="CausalAttention")
        num_tokens = x.shape[1]
        queries = self.W_query(x)  # (b, num_tokens, d_out)
        keys = self.W_key(x)  # (b, num_tokens, d_out)
        values = self.W_value(x)  # (b, num_tokens, d_out)

        attn_scores = queries @ keys.transpose(1, 2)  # (b, num_tokens, num_tokens)
        future = self.mask[:num_tokens, :num_tokens].bool()  # (num_tokens, num_tokens)
        attn_scores = attn_scores.masked_fill(future, -torch.inf)  # (b, num_tokens, num_tokens)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)  # (b, num_tokens, num_tokens)
        attn_weights = self.dropout(attn_weights)  # (b, num_tokens, num_tokens)
        return attn_weights @ values  # (b, num_tokens, d_out)


class MultiHeadAttentionWrapper(nn.Module):
    """Several independent heads, run one after another; ``d_out`` is the width of *each* head."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        check_config(d_in, d_out, context_length, dropout, num_heads, who="MultiHeadAttentionWrapper")
        self.num_heads = num_heads
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x):
        head_outputs = [head(x) for head in self.heads]  # num_heads × (b, num_tokens, d_out)
        return torch.cat(head_outputs, dim=-1)  # (b, num_tokens, num_heads * d_out)


class MultiHeadAttention(nn.Module):
    """All heads at once: one weight matrix per projection, split into ``num_heads`` column blocks.

    ``d_out`` is the width of the *whole* output; each head gets ``head_dim = d_out // num_heads``.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        check_config(d_in, d_out, context_length, dropout, num_heads, who="MultiHeadAttention")
        check_heads_divide(d_out, num_heads, who="MultiHeadAttention")
        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

    def split_heads(self, t):
        """``(b, num_tokens, d_out)`` → ``(b, num_heads, num_tokens, head_dim)``."""
        b, num_tokens, _ = t.shape
        t = t.view(b, num_tokens, self.num_heads, self.head_dim)  # (b, num_tokens, num_heads, head_dim)
        return t.transpose(1, 2)  # (b, num_heads, num_tokens, head_dim)

    def forward(self, x):
        check_input(x, self.d_in, self.context_length, who="MultiHeadAttention")
        b, num_tokens, _ = x.shape
        queries = self.split_heads(self.W_query(x))  # (b, num_heads, num_tokens, head_dim)
        keys = self.split_heads(self.W_key(x))  # (b, num_heads, num_tokens, head_dim)
        values = self.split_heads(self.W_value(x))  # (b, num_heads, num_tokens, head_dim)

        attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
        future = self.mask[:num_tokens, :num_tokens].bool()  # (num_tokens, num_tokens)
        attn_scores = attn_scores.masked_fill(future, -torch.inf)  # (b, num_heads, num_tokens, num_tokens)
        attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)  # (b, num_heads, num_tokens, num_tokens)
        attn_weights = self.dropout(attn_weights)  # (b, num_heads, num_tokens, num_tokens)

        context = (attn_weights @ values).transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
        context = context.contiguous().view(b, num_tokens, self.d_out)  # (b, num_tokens, d_out)
        return self.out_proj(context)  # (b, num_tokens, d_out)

    @classmethod
    def from_wrapper(cls, wrapper):
        """A weight-split module that computes exactly what ``wrapper`` computes.

        Head ``h``'s query/key/value weights (and biases) become column block ``h`` of the
        combined projections, and ``out_proj`` is the identity, so the output is the wrapper's
        concatenation unchanged.
        """
        if not isinstance(wrapper, MultiHeadAttentionWrapper):
            raise ValueError(
                f"from_wrapper expects a MultiHeadAttentionWrapper, got {type(wrapper).__name__}."
            )
        first = wrapper.heads[0]
        qkv_bias = first.W_query.bias is not None
        module = cls(
            first.d_in,
            first.d_out * wrapper.num_heads,
            first.context_length,
            first.dropout.p,
            wrapper.num_heads,
            qkv_bias,
        )
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                combined = getattr(module, name)
                # nn.Linear stores weight as (out, in): head blocks are row blocks of .weight.
                combined.weight.copy_(torch.cat([getattr(h, name).weight for h in wrapper.heads], dim=0))
                if qkv_bias:
                    combined.bias.copy_(torch.cat([getattr(h, name).bias for h in wrapper.heads], dim=0))
            module.out_proj.weight.copy_(torch.eye(module.d_out))
            module.out_proj.bias.zero_()
        return module.to(first.W_query.weight).train(wrapper.training)  # the wrapper's dtype and device

    def to_wrapper(self):
        """The inverse of ``from_wrapper``: one ``CausalAttention`` per column block.

        The wrapper's output equals this module's output *before* ``out_proj``.
        """
        qkv_bias = self.W_query.bias is not None
        wrapper = MultiHeadAttentionWrapper(
            self.d_in, self.head_dim, self.context_length, self.dropout.p, self.num_heads, qkv_bias
        )
        with torch.no_grad():
            for h, head in enumerate(wrapper.heads):
                block = slice(h * self.head_dim, (h + 1) * self.head_dim)
                for name in ("W_query", "W_key", "W_value"):
                    getattr(head, name).weight.copy_(getattr(self, name).weight[block])
                    if qkv_bias:
                        getattr(head, name).bias.copy_(getattr(self, name).bias[block])
        return wrapper.to(self.W_query.weight).train(self.training)  # this module's dtype and device
