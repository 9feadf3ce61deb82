"""What attention computes, the right way and each known wrong way, from the reader's own layers
(so a module with any weights can be checked): a :class:`Recipe`'s defaults are right, a buggy
reference changes one ingredient; the causal mask is built here, never read from the reader's
``mask``. :func:`same` is the one tolerance of every check."""

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

#: The three projections every attention module in the book has, in this order.
PROJECTIONS = ("W_query", "W_key", "W_value")


@dataclass(frozen=True)
class Recipe:
    """One way to compute attention from a module's own layers. The defaults are correct."""

    projections: tuple = PROJECTIONS  # the layers that make the queries, keys and values
    bias: bool = True  # False: x @ W.weight.T, as if the projections had no bias
    split: str = "blocks"  # or "no transpose" (view straight to heads), "strided" (h::num_heads)
    merge: str = "blocks"  # or "no transpose", "reversed" (last head first), "interleaved"
    scale: object = "sqrt head_dim"  # or "sqrt d_out", "head_dim", "none", or a number
    mask: str = "-inf before softmax"  # or "none", "0 before softmax", "0 after softmax",
    # "-inf after softmax", "diagonal too", "inverted" (only later tokens)
    softmax_dim: int = -1  # each query's weights sum to 1 over the keys
    out_proj: bool = True  # apply the module's out_proj, when it has one
    dropout: object = None  # a function applied to the attention weights (e.g. nn.Dropout)

    def but(self, **changes):
        """This recipe with some ingredients changed."""
        return replace(self, **changes)


CORRECT = Recipe()


def future_mask(num_tokens, device=None, diagonal=1):
    """``True`` where a query may not look: keys after it (and itself, with ``diagonal=0``)."""
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    return ones.triu(diagonal)  # (num_tokens, num_tokens)


def project(module, x, recipe=CORRECT):
    """The queries, keys and values ``recipe`` computes from ``module``'s projections."""
    outputs = []
    for name in recipe.projections:
        layer = getattr(module, name)
        bias = layer.bias if recipe.bias else None
        outputs.append(F.linear(x, layer.weight, bias))  # (b, num_tokens, width)
    return outputs


def attend(queries, keys, values, recipe=CORRECT):
    """Causal attention over the last two axes, ``(..., num_tokens, head_dim)``, per ``recipe``.
    The "sqrt d_out" scale's ``d_out`` is the width of all heads (a head axis is axis 1); a
    number as the recipe's scale divides the scores by it."""
    num_tokens, head_dim = queries.shape[-2:]
    heads = queries.shape[1] if queries.dim() == 4 else 1
    scale = {
        "sqrt head_dim": head_dim**0.5,
        "sqrt d_out": (heads * head_dim) ** 0.5,
        "head_dim": head_dim,
        "none": 1.0,
    }.get(recipe.scale, recipe.scale)
    future = future_mask(num_tokens, queries.device)
    if recipe.mask == "diagonal too":
        future = future_mask(num_tokens, queries.device, diagonal=0)
    if recipe.mask == "inverted":  # the past and the token itself hidden, the future visible
        future = ~future
    scores = queries @ keys.transpose(-2, -1)  # (..., num_tokens, num_tokens)
    fill = 0.0 if recipe.mask.startswith("0") else -torch.inf
    if recipe.mask in ("diagonal too", "inverted") or recipe.mask.endswith("before softmax"):
        scores = scores.masked_fill(future, fill)
    weights = torch.softmax(scores / scale, dim=recipe.softmax_dim)
    if recipe.mask.endswith("after softmax"):
        weights = weights.masked_fill(future, fill)
    weights = weights if recipe.dropout is None else recipe.dropout(weights)
    return weights @ values  # (..., num_tokens, head_dim)


def head_output(head, x, recipe=CORRECT):
    """What one ``CausalAttention`` head computes on ``x`` from its own weights."""
    return attend(*project(head, x, recipe), recipe)  # (b, num_tokens, d_out)


def split_heads(t, num_heads, how="blocks"):
    """``(b, num_tokens, d_out)`` → ``(b, num_heads, num_tokens, head_dim)``, right or wrong."""
    b, num_tokens, d_out = t.shape
    head_dim = d_out // num_heads
    if how == "no transpose":  # mixes tokens and heads
        return t.reshape(b, num_heads, num_tokens, head_dim)
    if how == "strided":  # head h takes columns h, h + num_heads, ...
        return t.reshape(b, num_tokens, head_dim, num_heads).permute(0, 3, 1, 2)
    return t.reshape(b, num_tokens, num_heads, head_dim).transpose(1, 2)


def merge_heads(context, how="blocks"):
    """``(b, num_heads, num_tokens, head_dim)`` → ``(b, num_tokens, d_out)``, right or wrong."""
    b, num_heads, num_tokens, head_dim = context.shape
    if how == "no transpose":
        return context.reshape(b, num_tokens, num_heads * head_dim)
    if how == "interleaved":  # column j * num_heads + h holds head h's value j
        return context.permute(0, 2, 3, 1).reshape(b, num_tokens, num_heads * head_dim)
    context = context.flip(1) if how == "reversed" else context
    return context.transpose(1, 2).reshape(b, num_tokens, num_heads * head_dim)


def split_attention(module, x, num_heads, recipe=CORRECT):
    """A weight-split pass over ``module``'s projections (and ``out_proj``), per ``recipe``."""
    queries, keys, values = (
        split_heads(t, num_heads, recipe.split) for t in project(module, x, recipe)
    )  # each (b, num_heads, num_tokens, head_dim)
    context = merge_heads(attend(queries, keys, values, recipe), recipe.merge)
    out_proj = getattr(module, "out_proj", None)
    if recipe.out_proj and out_proj is not None:
        return out_proj(context)  # (b, num_tokens, d_out)
    return context  # (b, num_tokens, d_out)


def same(output, expected):
    """Equal shapes and values up to float32 rounding, with nan where ``expected`` has nan; an
    output that is nan everywhere matches nothing (it says only that something made nan).
    The one tolerance of every check: relative 1e-4 and absolute 1e-5, compared in float64, so
    a right answer computed in another order, or on another CPU code path, is never called
    wrong, while every catalogued mistake differs by far more."""
    return (
        isinstance(output, torch.Tensor)
        and isinstance(expected, torch.Tensor)
        and output.shape == expected.shape
        and output.is_floating_point()
        and not bool(output.isnan().all())
        and torch.allclose(output.double(), expected.double(), rtol=1e-4, atol=1e-5, equal_nan=True)
    )
