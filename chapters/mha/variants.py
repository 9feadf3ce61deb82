"""More ways to compute the same multi-head attention, timed in chapter 5.

Every class takes ``(d_in, d_out, context_length, dropout, num_heads,
qkv_bias=False)``, like ``MultiHeadAttention``, and ``d_out`` is the width of
the whole output. ``copy_weights`` gives two implementations the same
weights, so they compute the same function and a timing compares like with
like.
"""

import torch
import torch.nn.functional as F
from torch import nn

from .attention import (
    PROJECTIONS,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    check_config,
    check_heads_divide,
    check_input,
    copy_pairs,
    head_blocks,
    invalid,
)


class MultiHeadAttentionCombinedQKV(nn.Module):
    """``MultiHeadAttention`` with one ``Linear(d_in, 3 * d_out)`` for q, k, v.

    One matrix multiplication replaces three; the attention itself is still
    written out (scores, mask, softmax, weighted sum), so every intermediate
    can be inspected.
    """

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False
    ):
        super().__init__()
        check_config(self, d_in, d_out, context_length, dropout, num_heads)
        check_heads_divide(self, d_out, num_heads)
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        ones = torch.ones(context_length, context_length)
        self.register_buffer("mask", torch.triu(ones, diagonal=1).bool())

    def forward(self, x):
        check_input(self, x)
        b, num_tokens, _ = x.shape
        # (b, num_tokens, 3, num_heads, head_dim)
        qkv = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim)
        # 3 × (b, num_heads, num_tokens, head_dim)
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4)

        # (b, num_heads, num_tokens, num_tokens)
        attn_scores = queries @ keys.transpose(2, 3)
        future = self.mask[:num_tokens, :num_tokens]
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # (b, num_tokens, num_heads, head_dim)
        context = (attn_weights @ values).transpose(1, 2)
        context = context.reshape(b, num_tokens, self.d_out)
        return self.out_proj(context)  # (b, num_tokens, d_out)


class FusedMultiHeadAttention(nn.Module):
    """The book's fastest module: combined QKV, then a fused attention kernel.

    ``scaled_dot_product_attention(..., is_causal=True)`` does scores, mask,
    softmax and the weighted sum in one kernel, without storing the
    ``(num_tokens, num_tokens)`` weights, and can skip the blocks the causal
    mask hides. It needs no mask buffer, so any input length works;
    ``context_length`` is checked only to keep the signature of the others.
    Dropout on the weights applies only in training mode.
    """

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False
    ):
        super().__init__()
        check_config(self, d_in, d_out, context_length, dropout, num_heads)
        check_heads_divide(self, d_out, num_heads)
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout_p = dropout  # the fused kernel applies dropout itself

    def forward(self, x):
        check_input(self, x)
        b, num_tokens, _ = x.shape
        # (b, num_tokens, 3, num_heads, head_dim)
        qkv = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim)
        # 3 × (b, num_heads, num_tokens, head_dim)
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4)

        dropout_p = self.dropout_p if self.training else 0.0
        context = F.scaled_dot_product_attention(
            queries, keys, values, dropout_p=dropout_p, is_causal=True
        )  # (b, num_heads, num_tokens, head_dim)
        # the heads side by side again: (b, num_tokens, d_out)
        context = context.transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.out_proj(context)


class TorchMultiheadAttentionAdapter(nn.Module):
    """``torch.nn.MultiheadAttention`` behind the book's constructor.

    It is called the way a fair comparison needs: ``batch_first``, a causal
    mask (with the ``is_causal`` hint) and ``need_weights=False``. Its fast
    path (evaluation mode, no gradients, an even head count) ignores the hint
    and applies the mask, expanded to every head, as given.
    ``nn.MultiheadAttention`` has one ``bias`` switch for its input and output
    projections, while the book's modules always give ``out_proj`` a bias;
    with ``qkv_bias=False`` the input bias is therefore held at zero (frozen).
    """

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False
    ):
        super().__init__()
        check_config(self, d_in, d_out, context_length, dropout, num_heads)
        check_heads_divide(self, d_out, num_heads)
        if d_in != d_out:
            raise invalid(
                self,
                "nn.MultiheadAttention projects queries from inputs as wide "
                f"as its output, but d_in={d_in} and d_out={d_out}. Use "
                "d_in == d_out, or one of the book's own modules.",
            )
        self.num_heads = num_heads
        self.qkv_bias = qkv_bias
        self.attention = nn.MultiheadAttention(
            d_out, num_heads, dropout=dropout, bias=True, batch_first=True
        )
        if not qkv_bias:
            with torch.no_grad():
                self.attention.in_proj_bias.zero_()
            self.attention.in_proj_bias.requires_grad_(False)
        ones = torch.ones(context_length, context_length)
        self.register_buffer("mask", torch.triu(ones, diagonal=1).bool())

    def forward(self, x):
        check_input(self, x)
        num_tokens = x.shape[1]
        future = self.mask[:num_tokens, :num_tokens]
        context, _ = self.attention(
            x, x, x, attn_mask=future, need_weights=False, is_causal=True
        )
        return context  # (b, num_tokens, d_out)


#: Every implementation chapter 5 times, fastest-to-write first. The keys
#: name them in tables and CSVs.
IMPLEMENTATIONS = {
    "wrapper": MultiHeadAttentionWrapper,
    "split": MultiHeadAttention,
    "combined_qkv": MultiHeadAttentionCombinedQKV,
    "fused": FusedMultiHeadAttention,
    "torch_mha": TorchMultiheadAttentionAdapter,
}


def build(
    name, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False
):
    """Build implementation ``name`` with a *total* output width ``d_out``.

    The wrapper's ``d_out`` is per head, so it is built with
    ``d_out // num_heads``: otherwise it would do ``num_heads`` times the work
    of the others and a timing would compare unlike things.
    """
    if name not in IMPLEMENTATIONS:
        choices = ", ".join(IMPLEMENTATIONS)
        raise ValueError(
            f"Unknown implementation {name!r}; choose one of {choices}."
        )
    if name == "wrapper":
        who = "build('wrapper')"
        check_config(who, d_in, d_out, context_length, dropout, num_heads)
        check_heads_divide(who, d_out, num_heads)
        d_out //= num_heads
    cls = IMPLEMENTATIONS[name]
    return cls(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


def head_weights(module):
    """Each head's query, key and value ``(weight, bias)``, as views.

    ``head_weights(m)[h]`` lists head ``h``'s query, key and value: each a
    ``(head_dim, d_in)`` weight and a bias (``None`` without ``qkv_bias``).
    Writing into a view writes ``module``'s parameters.
    """
    if isinstance(module, MultiHeadAttentionWrapper):
        return [
            [(layer.weight, layer.bias) for layer in _projections(head)]
            for head in module.heads
        ]
    if isinstance(module, MultiHeadAttention):
        layers = _projections(module)
        projections = [(layer.weight, layer.bias) for layer in layers]
    else:
        # A (3 * d_out, d_in) matrix: the query rows, the key rows, the value
        # rows.
        weight, bias = _in_projection(module)
        biases = [None] * 3 if bias is None else bias.chunk(3)
        projections = zip(weight.chunk(3), biases, strict=True)
    blocks = [
        head_blocks(weight, bias, module.num_heads)
        for weight, bias in projections
    ]
    return [list(head) for head in zip(*blocks, strict=True)]


def _projections(module):
    return [getattr(module, name) for name in PROJECTIONS]


def _in_projection(module):
    """The ``(weight, bias)`` of a combined query/key/value projection."""
    if isinstance(
        module, (MultiHeadAttentionCombinedQKV, FusedMultiHeadAttention)
    ):
        return module.qkv.weight, module.qkv.bias
    if isinstance(module, TorchMultiheadAttentionAdapter):
        attention = module.attention
        bias = attention.in_proj_bias if module.qkv_bias else None
        return attention.in_proj_weight, bias
    names = ", ".join(cls.__name__ for cls in IMPLEMENTATIONS.values())
    raise ValueError(
        f"copy_weights: {type(module).__name__} is not one of the book's "
        f"implementations ({names})."
    )


def out_weights(module):
    """The ``(weight, bias)`` of ``module``'s output projection.

    A wrapper has none: it reads as the identity with a zero bias.
    """
    if isinstance(module, MultiHeadAttentionWrapper):
        weight = head_weights(module)[0][0][0]
        width = weight.shape[0] * module.num_heads
        like = dict(dtype=weight.dtype, device=weight.device)
        return torch.eye(width, **like), torch.zeros(width, **like)
    if isinstance(module, TorchMultiheadAttentionAdapter):
        out_proj = module.attention.out_proj
    else:
        out_proj = module.out_proj
    return out_proj.weight, out_proj.bias


def copy_weights(source, target):
    """Give ``target`` the weights of ``source`` (any two implementations).

    Afterwards both compute the same function, up to floating-point rounding.
    A wrapper has no ``out_proj``, so it can only receive weights whose output
    projection is the identity with a zero bias. Raises ``ValueError`` when
    the weights cannot fit ``target`` exactly; returns ``target``.
    """
    sources, targets = head_weights(source), head_weights(target)
    who = f"copy_weights into {type(target).__name__}"
    if len(sources) != len(targets):
        raise ValueError(
            f"{who}: the source has {len(sources)} heads, the target "
            f"{len(targets)}. Build the target with the same num_heads."
        )
    (weight, bias), (target_weight, target_bias) = sources[0][0], targets[0][0]
    if weight.shape != target_weight.shape:
        raise ValueError(
            f"{who}: a source head's query weight is {tuple(weight.shape)} "
            f"(head_dim, d_in), a target head's {tuple(target_weight.shape)}. "
            "Build both with the same d_in and total d_out."
        )
    if (bias is None) != (target_bias is None):
        raise ValueError(
            f"{who}: one module has qkv_bias=True, the other qkv_bias=False. "
            "Build both with the same qkv_bias."
        )
    pairs = [pair for head in sources for pair in head]
    target_pairs = [pair for head in targets for pair in head]
    out, target_out = out_weights(source), out_weights(target)
    if not isinstance(target, MultiHeadAttentionWrapper):
        pairs.append(out)
        target_pairs.append(target_out)
    elif not all(map(torch.equal, out, target_out)):
        raise ValueError(
            f"{who}: a wrapper has no output projection, so it can only take "
            "weights whose out_proj is the identity with zero bias (for "
            "example from MultiHeadAttention.from_wrapper). Compare with the "
            "output before out_proj instead."
        )
    copy_pairs(pairs, target_pairs)
    return target


def equivalent_modules(
    names, d_in, d_out, context_length, num_heads, qkv_bias=False, *, seed=123
):
    """Build each of ``names``, all computing one function, in eval mode.

    The weights come from a seeded wrapper (total width ``d_out``), so every
    module's ``out_proj`` is the identity and even the wrapper takes part.
    """
    torch.manual_seed(seed)
    reference = build(
        "wrapper", d_in, d_out, context_length, 0.0, num_heads, qkv_bias
    )
    modules = {}
    for name in names:
        if name == "wrapper":
            modules[name] = reference.eval()
        else:
            module = build(
                name, d_in, d_out, context_length, 0.0, num_heads, qkv_bias
            )
            modules[name] = copy_weights(reference, module).eval()
    return modules
