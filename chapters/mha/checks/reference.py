"""Attention from the reader's layers, right or buggy (:class:`Recipe`), and :func:`same`."""

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from ..attention import PROJECTIONS  # W_query, W_key, W_value
from .core import same as same  # re-exported: the one tolerance, where references are


@dataclass(frozen=True)
class Recipe:
    """One way to compute attention from a module's own layers. The defaults are correct."""

    projections: tuple = PROJECTIONS  # the layers that make the queries, keys and values
    bias: bool = True  # False: x @ W.weight.T, as if the projections had no bias
    split: str = "blocks"  # or "no transpose" (one view), "strided", "transposed first"
    merge: str = "blocks"  # or "no transpose", "reversed" (last head first), "interleaved"
    scale: object = "sqrt head_dim"  # or "sqrt d_out", "head_dim", "none", "times", a number,
    # "sqrt sqrt" (hd ** 0.25), "sqrt num_tokens", "after softmax" (the weights divided)
    mask: str = "-inf before softmax"  # or "none", "0 before softmax", "0 after softmax",
    # "-inf after softmax", "diagonal too", "inverted" (only later tokens), "added tril" (+1 seen),
    # "shifted": self.mask[:T, -T:], the last T columns (a check turns it into "shift C - T"),
    # "transposed" (the earlier tokens hidden), "added" (+1 where hidden), "diagonal, nan to 0"
    softmax_dim: int = -1  # each query's weights sum to 1 over the keys
    out_proj: int = True  # apply the module's out_proj (2: twice), when it has one
    dropout: object = None  # a function applied to the attention weights (e.g. nn.Dropout)
    dropout_at: str = "weights"  # or "scores", "masked" (scores), "values", "context", "output"
    first: str = ""  # sequence 0's "keys" (and values) for every sequence, or its "output";
    # "folded": the batch folded into the token axis, (1, b * T, d_in)
    mix: str = "weights"  # or "transposed": weights.mT @ values

    def but(self, **changes):
        """This recipe with some ingredients changed."""
        return replace(self, **changes)


CORRECT = Recipe()


def project(module, x, recipe=CORRECT):
    """The queries, keys and values ``recipe`` computes from ``module``'s projections."""
    layers = [getattr(module, name) for name in recipe.projections]  # each gives (b, T, width)
    return [F.linear(x, la.weight, la.bias if recipe.bias else None) for la in layers]


def attend(queries, keys, values, recipe=CORRECT, steps=None):
    """Causal attention over the last two axes, ``(..., num_tokens, head_dim)``, per ``recipe``
    ("sqrt d_out": the width of all heads, a head axis being axis 1; a number divides by it);
    ``steps``, a dict, gets the scores (raw, masked, scaled), weights and context on the way."""
    num_tokens, head_dim = queries.shape[-2:]
    heads = queries.shape[1] if queries.dim() == 4 else 1
    roots = {"sqrt head_dim": head_dim**0.5, "sqrt d_out": (heads * head_dim) ** 0.5}
    roots |= {"head_dim": head_dim, "none": 1.0, "times": head_dim**-0.5}  # times: × √head_dim
    roots |= {"head_dim / 2": head_dim / 2, "2 head_dim": 2 * head_dim}  # hd ** 1/2, read as /
    roots |= {"sqrt sqrt": head_dim**0.25, "sqrt num_tokens": num_tokens**0.5, "after softmax": 1}
    scale = roots.get(recipe.scale, recipe.scale)
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=queries.device)
    shift = int(recipe.mask[6:]) if recipe.mask.startswith("shift ") else 0  # [:T, -T:] of C
    future = ones.triu(0 if recipe.mask.startswith("diagonal") else 1 - shift)  # True: hidden
    future = ~future if recipe.mask == "inverted" else future  # the past and itself hidden
    future = ones.tril(-1) if recipe.mask == "transposed" else future  # the past hidden
    drop, at = recipe.dropout or (lambda t: t), recipe.dropout_at
    if recipe.first == "keys":  # (b, ..., T, hd): sequence 0's for all
        keys, values = keys[:1].expand_as(keys), values[:1].expand_as(values)
    raw = scores = queries @ keys.transpose(-2, -1)  # (..., num_tokens, num_tokens)
    scores = drop(scores) if at == "scores" else scores
    fill, after = 0.0 if recipe.mask.startswith("0") else -torch.inf, "after" in recipe.mask
    if recipe.mask not in ("none", "added tril", "added") and not after:
        scores = scores.masked_fill(future, fill)
    scores = scores + future if recipe.mask == "added" else scores  # True as 1
    scores = scores + ~future * scale if recipe.mask == "added tril" else scores  # a float mask
    scores = drop(scores) if at == "masked" else scores
    values = drop(values) if at == "values" else values
    weights = torch.softmax(scores / scale, dim=recipe.softmax_dim)
    if after:
        weights = weights.masked_fill(future, fill)
    weights = weights.nan_to_num(0.0) if "nan to 0" in recipe.mask else weights
    weights = weights / head_dim**0.5 if recipe.scale == "after softmax" else weights
    steps = {} if steps is None else steps
    steps.update(scores=(raw, scores, raw / scale, scores / scale), weights=weights)
    weights = weights.mT if recipe.mix == "transposed" else weights
    context = (drop(weights) if at == "weights" else weights) @ values  # (..., T, head_dim)
    steps["context"] = drop(context) if at == "context" else context
    return steps["context"]


def head_output(head, x, recipe=CORRECT):
    """What one ``CausalAttention`` head computes on ``x`` from its own weights."""
    return attend(*project(head, x, recipe), recipe)  # (b, num_tokens, d_out)


#: ``(b, num_tokens, d_out)`` → ``(b, num_heads, num_tokens, head_dim)``, right or wrong.
SPLITS = {
    "blocks": lambda t, h: t.unflatten(-1, (h, -1)).transpose(1, 2),
    "no transpose": lambda t, h: t.reshape(t.shape[0], h, t.shape[1], -1),  # tokens and heads mixed
    "strided": lambda t, h: t.unflatten(-1, (-1, h)).permute(0, 3, 1, 2),  # head h: h, h + H, ...
    "transposed first": lambda t, h: t.transpose(1, 2).reshape(t.shape[0], h, t.shape[1], -1),
}
#: ``(b, num_heads, num_tokens, head_dim)`` → ``(b, num_tokens, d_out)``, right or wrong.
MERGES = {
    "blocks": lambda c: c.transpose(1, 2).flatten(2),
    "no transpose": lambda c: c.reshape(c.shape[0], c.shape[2], -1),
    "reversed": lambda c: c.flip(1).transpose(1, 2).flatten(2),  # the last head first
    "interleaved": lambda c: c.permute(0, 2, 3, 1).flatten(2),  # column j * H + h: head h's j
    "averaged": lambda c: c.mean(1).repeat(1, 1, c.shape[1]),  # the heads' mean, H times
}


def split_attention(module, x, num_heads, recipe=CORRECT, steps=None):
    """A weight-split pass over ``module``'s projections (and ``out_proj``), per ``recipe``;
    ``steps`` gets :func:`attend`'s and the merged context."""
    (b, T, _), steps = x.shape, {} if steps is None else steps
    x = x.reshape(1, b * T, -1) if recipe.first == "folded" else x  # (1, b * T, d_in)
    splits = ("blocks",) * 2 + ("no transpose",) if recipe.split == "values viewed" else None
    made = project(module, x, recipe)  # (b, T, d_out) × 3
    queries, keys, values = (
        SPLITS[s](t, num_heads) for s, t in zip(splits or [recipe.split] * 3, made)
    )
    steps["merged"] = MERGES[recipe.merge](attend(queries, keys, values, recipe, steps))
    out_proj, output = getattr(module, "out_proj", None), steps["merged"]  # (b, T, d_out)
    bias = None if recipe.out_proj == "no bias" else getattr(out_proj, "bias", None)
    for _ in range({False: 0, 2: 2}.get(recipe.out_proj, 1) if out_proj else 0):  # 2: twice
        output = F.linear(output, out_proj.weight, bias)  # (b, num_tokens, d_out)
    output = output + steps["merged"] if recipe.out_proj == "residual" else output
    output = output.reshape(b, T, -1) if recipe.first == "folded" else output
    output = output[:1].expand_as(output) if recipe.first == "output" else output
    return recipe.dropout(output) if recipe.dropout and recipe.dropout_at == "output" else output
