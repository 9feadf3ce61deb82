"""Chapters 5 and 6's references, right or buggy: :func:`fused` and :func:`grouped` split their
module's projections; :func:`finish` attends, merges and projects, dropout right or misplaced."""

from functools import partial

import torch.nn.functional as F

from .practice import NOT_WEIGHTS
from .reference import MERGES, PROJECTIONS, SPLITS, Recipe, attend, project
from .watch import dropped, mask_for

# fmt: off
MERGES = MERGES | {"flat": lambda c: c.flatten(2),  # and (b, T, H, hd) → (b, T, d_out)
                   "transposed": lambda c: c.transpose(1, 2).reshape(c.shape[0], c.shape[1], -1)}
PLACES = {False: "nothing", "values": "the values", "heads": "the context (a head's or merged)",
          "context": "the context", "output": "the output", "input": "the input x",
          "twice": "the weights, then the context again", "double": "the weights twice",
          "masked": "the masked scores (-inf × 0 is nan)",  # dropout's wrong places
          "inverted": "the weights it should keep: it keeps one with chance p, not 1 - p"}
BIAS = ("Right without biases, wrong with qkv_bias=True: x @ W.weight.T leaves out the bias. "
        "Call the layers: self.{layer}(x).")
OUT = ((dict(out=False), "Your forward never applies self.out_proj after merging the heads."),
       (dict(out="no bias"), "out_proj's bias is missing: call self.out_proj(context)."))
QKV = {  # self.qkv(x) as three (b, T, H, hd) blocks: right, or as a mistake reads it
    "3, heads": lambda t, H: t.unflatten(-1, (3, H, -1)).unbind(2),
    "heads, 3": lambda t, H: t.unflatten(-1, (H, 3, -1)).unbind(3),
    "strided": lambda t, H: t.unflatten(-1, (3, -1, H)).transpose(-1, -2).unbind(2),
    "3, tokens": lambda t, H: t.reshape(t.shape[0], 3, t.shape[1], H, -1).unbind(1)}


def finish(r, q, k, v, drop=False, merge="blocks", out=True, kernel=False, **changes):
    """The output from (b, H, T, hd) queries, keys and values: attention per the Recipe's
    ``changes`` (``kernel``: 0, not nan, where a query sees no key), merge, out_proj ("no bias":
    its weight alone; the Recipe's count of times); the check's dropout at ``drop`` (True: the
    weights; "twice": and the context; "double": the weights twice; "masked": the scores)."""

    def at(place, t):
        return dropped(t, r.p) if drop == place or (drop, place) == ("twice", "heads") else t

    once = partial(dropped, p=r.p)
    dropout = {True: once, "twice": once, "masked": once, "double": lambda t: once(once(t)),
               "inverted": lambda t: t * mask_for(t, r.p, r.p) / (1 - r.p)}  # kept by chance p
    where = {"dropout_at": "masked"} if drop == "masked" else {}
    recipe = Recipe(dropout=dropout.get(drop), **where | changes)
    context = attend(q, k, at("values", v), recipe)
    context = at("heads", context.nan_to_num(0.0) if kernel else context)  # (b, H, T, hd)
    context, o = at("context", MERGES[merge](context)), r.module.out_proj  # (b, T, d_out)
    bias = o.bias if out is True else None
    for _ in range(int(recipe.out_proj) if out else 0):  # True: once; 2: twice
        context = F.linear(context, o.weight, bias)  # (b, T, d_out)
    context = context[:1].expand_as(context) if recipe.first == "output" else context
    return at("output", context)


def misplaced(belongs):
    """:attr:`.practice.Practice.trained` rows: no dropout, or dropout at one of PLACES."""
    return tuple((dict(drop=w), f"{NOT_WEIGHTS}: yours drops {place}. {belongs}")
                 for w, place in PLACES.items())


def fused(r, split="3, heads", roles=(0, 1, 2), heads="transposed", bias=True, **changes):
    """The output of the run ``r``'s module from its own layers, or one catalogued mistake's."""
    (b, T, _), H, layer = r.x.shape, r.kwargs["num_heads"], r.module.qkv
    x = dropped(r.x, r.p) if changes.get("drop") == "input" else r.x  # (b, T, d_in)
    parts = QKV[split](F.linear(x, layer.weight, layer.bias if bias else None), H)
    q, k, v = {"transposed": [parts[i].transpose(1, 2) for i in roles], "not": parts,
               "viewed": [t.reshape(b, H, T, -1) for t in parts]}[heads]  # (b, H, T, hd)
    merge = {"merge": "flat"} if heads == "not" else {}  # (b, T, H, hd) flattened as they are
    return finish(r, q, k, v, kernel=True, **merge | changes)


def grouped(r, keys="interleave", values="interleave", split="blocks", kv=None, vs=None,
            bias=True, projections=PROJECTIONS, scale="sqrt head_dim", **changes):
    """The output of the run ``r``'s module from its own layers, or a mistake's (``kv``: a split of
    the keys and values alone; ``vs``, of the values alone)."""
    H, G = r.kwargs["num_heads"], r.kwargs["num_kv_groups"]
    hd, n = r.kwargs["d_out"] // H, H // G  # head_dim, group_size
    x = dropped(r.x, r.p) if changes.get("drop") == "input" else r.x  # (b, T, d_in)
    made = project(r.module, x, Recipe(projections=projections, bias=bias))  # (b, T, width) × 3
    if keys == "columns":  # each of the keys' and values' columns repeated, before the split
        made[1:] = [t.repeat_interleave(n, -1) for t in made[1:]]  # (b, T, d_out) each
    kv = kv or split
    q, k, v = (SPLITS[s](t, t.shape[-1] // hd) for s, t in zip((split, kv, vs or kv), made))
    spread = {"interleave": lambda t: t.repeat_interleave(n, 1),  # head h reads block h // n
              "repeat": lambda t: t.repeat(1, n, 1, 1), "columns": lambda t: t}  # block h % G
    late = hd**0.5 if scale == "after softmax" else 1  # weights / c @ values = weights @ values / c
    if changes.get("mask") == "shifted":  # the last T of context_length columns
        changes["mask"] = f"shift {r.kwargs['context_length'] - r.x.shape[1]}"
    roots = {"kv_width": (G * hd) ** 0.5, "group_size": n**0.5, "after softmax": 1,
             "head_dim ** 1.5": hd**1.5,  # the queries, the keys and the scores each scaled
             "sqrt d_in": r.kwargs["d_in"] ** 0.5, "sqrt num_heads": H**0.5}
    k, v = spread[keys](k), spread[values](v) / late  # (b, H, T, hd)
    return finish(r, q, k, v, scale=roots.get(scale, scale), **changes)
# fmt: on
