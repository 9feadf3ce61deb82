"""The book's attention modules: one head, heads in a loop, heads as splits.

Constructor signatures, attribute names and the order in which parameters
are created follow the reference book (rasbt/LLMs-from-scratch, chapter 3),
so a seeded run prints its numbers.

``d_out`` means two things. In ``MultiHeadAttentionWrapper`` it is the width
of each head, and the output is ``num_heads * d_out`` wide. In
``MultiHeadAttention`` it is the width of the whole output, and each head
gets ``head_dim = d_out // num_heads`` columns. (The class docstrings leave
this out: the chapters show them above the questions that ask it.)
"""

import torch
from torch import nn

PROJECTIONS = ("W_query", "W_key", "W_value")


def invalid(owner, problem):
    """A ``ValueError`` that starts with the name of what was misused.

    ``owner`` is the module (its class names it, so no class types its own
    name) or, where no module exists yet, a label such as ``"build"``.
    """
    name = owner if isinstance(owner, str) else type(owner).__name__
    return ValueError(f"{name}: {problem}")


def check_config(owner, d_in, d_out, context_length, dropout, num_heads=1):
    """Raise ``ValueError`` for arguments that cannot make a working module."""
    sizes = dict(d_in=d_in, d_out=d_out, context_length=context_length)
    for name, value in dict(sizes, num_heads=num_heads).items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problem = f"{name} must be a positive integer, got {value!r}."
            raise invalid(owner, problem)
    if (
        isinstance(dropout, bool)
        or not isinstance(dropout, (int, float))
        or not 0.0 <= dropout < 1.0
    ):
        problem = f"dropout must be a number in [0, 1), got {dropout!r}."
        raise invalid(owner, problem)


def check_heads_divide(owner, d_out, num_heads):
    """Raise ``ValueError`` unless ``num_heads`` equal blocks fill d_out."""
    if d_out % num_heads != 0:
        multiple = num_heads * max(1, d_out // num_heads)
        divisors = [n for n in range(1, d_out + 1) if d_out % n == 0]
        raise invalid(
            owner,
            f"d_out={d_out} is not divisible by num_heads={num_heads}, so the "
            "heads cannot split it evenly. Choose num_heads among "
            f"{', '.join(map(str, divisors))}, or d_out as a multiple of "
            f"num_heads (e.g. {multiple}).",
        )


def check_input(module, x):
    """Raise ``ValueError`` unless ``module`` can take ``x``.

    ``x`` must be a ``(batch, num_tokens, d_in)`` tensor. ``d_in`` is the
    last axis of the module's first parameter: every module here creates its
    input projection, a ``(width, d_in)`` weight, first. A module with a
    causal mask takes at most ``context_length`` tokens, the mask's size.
    """
    if not isinstance(x, torch.Tensor):
        problem = f"expected a torch.Tensor, got {type(x).__name__}."
        raise invalid(module, problem)
    if x.dim() != 3:
        hint = " Add a batch axis with x.unsqueeze(0)." if x.dim() == 2 else ""
        raise invalid(
            module,
            "expected input of shape (batch, num_tokens, d_in), got "
            f"{x.dim()}-D shape {tuple(x.shape)}.{hint}",
        )
    num_tokens, width = x.shape[1], x.shape[2]
    d_in = next(module.parameters()).shape[-1]
    if width != d_in:
        raise invalid(
            module,
            f"the last dimension of the input is {width}, but the module was "
            f"built with d_in={d_in}. Build it with d_in={width}, or pass "
            f"inputs of width {d_in}.",
        )
    mask = getattr(module, "mask", None)
    if mask is not None and num_tokens > len(mask):
        raise invalid(
            module,
            f"the input has {num_tokens} tokens, more than context_length="
            f"{len(mask)}, the size of the causal mask. Build the module with "
            f"context_length >= {num_tokens}, or pass a shorter sequence.",
        )


def head_blocks(weight, bias, num_heads):
    """Each head's ``(weight, bias)`` in a projection for all heads, as views.

    ``nn.Linear`` stores its weight as ``(d_out, d_in)`` and computes
    ``x @ weight.T``, so head ``h``'s block of columns in ``weight.T`` is
    rows ``h * head_dim`` up to ``(h + 1) * head_dim`` of ``weight``, and the
    same entries of the bias (``None`` if there is none). Copying into a
    block writes the projection. This is the book's one map from heads to
    blocks: ``from_wrapper``, ``to_wrapper`` and ``copy_weights`` use it.
    """
    weights = weight.unflatten(0, (num_heads, -1))
    if bias is None:
        return [(w, None) for w in weights]
    return list(zip(weights, bias.unflatten(0, (num_heads, -1)), strict=True))


def copy_pairs(sources, targets):
    """Copy each ``(weight, bias)`` in ``sources`` to its match in targets."""
    pairs = zip(sources, targets, strict=True)
    with torch.no_grad():
        for (weight, bias), (to_weight, to_bias) in pairs:
            to_weight.copy_(weight)
            if to_bias is not None:
                to_bias.copy_(bias)


class CausalAttention(nn.Module):
    """One causal self-attention head: a complete attention unit on its own."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        check_config(self, d_in, d_out, context_length, dropout)
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        ones = torch.ones(context_length, context_length)
        self.register_buffer("mask", torch.triu(ones, diagonal=1).bool())

    def forward(self, x):
        check_input(self, x)
        num_tokens = x.shape[1]
        queries = self.W_query(x)  # (b, num_tokens, d_out)
        keys = self.W_key(x)
        values = self.W_value(x)

        # (b, num_tokens, num_tokens)
        attn_scores = queries @ keys.transpose(1, 2)
        future = self.mask[:num_tokens, :num_tokens]
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.d_out**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values  # (b, num_tokens, d_out)


class MultiHeadAttentionWrapper(nn.Module):
    """Several independent heads, run one after another."""

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False
    ):
        super().__init__()
        check_config(self, d_in, d_out, context_length, dropout, num_heads)
        self.num_heads = num_heads
        self.heads = nn.ModuleList(
            [
                CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                for _ in range(num_heads)
            ]
        )

    def forward(self, x):
        # num_heads tensors of shape (b, num_tokens, d_out)
        head_outputs = [head(x) for head in self.heads]
        # (b, num_tokens, num_heads * d_out)
        return torch.cat(head_outputs, dim=-1)


class MultiHeadAttention(nn.Module):
    """All heads in one module: one matrix per projection, in column blocks."""

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False
    ):
        super().__init__()
        check_config(self, d_in, d_out, context_length, dropout, num_heads)
        check_heads_divide(self, d_out, num_heads)
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
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
        check_input(self, x)
        b, num_tokens, _ = x.shape
        # (b, num_heads, num_tokens, head_dim)
        queries = self.split_heads(self.W_query(x))
        keys = self.split_heads(self.W_key(x))
        values = self.split_heads(self.W_value(x))

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

    @classmethod
    def from_wrapper(cls, wrapper):
        """A weight-split module that computes exactly what ``wrapper`` does.

        Head ``h``'s query, key and value weights (and biases) become column
        block ``h`` of the combined projections, and ``out_proj`` is the
        identity, so the output is the wrapper's concatenation unchanged.
        """
        if not isinstance(wrapper, MultiHeadAttentionWrapper):
            raise ValueError(
                "from_wrapper expects a MultiHeadAttentionWrapper, got "
                f"{type(wrapper).__name__}."
            )
        first = wrapper.heads[0]
        module = cls(
            first.W_query.in_features,
            first.d_out * wrapper.num_heads,
            len(first.mask),
            first.dropout.p,
            wrapper.num_heads,
            first.W_query.bias is not None,
        )
        module.to(first.W_query.weight)  # the wrapper's dtype and device
        for name in PROJECTIONS:
            split = getattr(module, name)
            heads = [getattr(head, name) for head in wrapper.heads]
            copy_pairs(
                [(head.weight, head.bias) for head in heads],
                head_blocks(split.weight, split.bias, module.num_heads),
            )
        with torch.no_grad():
            module.out_proj.weight.copy_(torch.eye(module.d_out))
            module.out_proj.bias.zero_()
        return module.train(wrapper.training)

    def to_wrapper(self):
        """The inverse of ``from_wrapper``: a ``CausalAttention`` per block.

        The wrapper's output equals this module's output *before*
        ``out_proj``.
        """
        wrapper = MultiHeadAttentionWrapper(
            self.W_query.in_features,
            self.head_dim,
            len(self.mask),
            self.dropout.p,
            self.num_heads,
            self.W_query.bias is not None,
        )
        wrapper.to(self.W_query.weight)  # this module's dtype and device
        for name in PROJECTIONS:
            split = getattr(self, name)
            heads = [getattr(head, name) for head in wrapper.heads]
            copy_pairs(
                head_blocks(split.weight, split.bias, self.num_heads),
                [(head.weight, head.bias) for head in heads],
            )
        return wrapper.train(self.training)
