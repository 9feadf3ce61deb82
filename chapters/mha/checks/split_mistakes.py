"""Chapter 3's catalogue: :func:`split`, what the answer raised, mistakes as buggy references."""

import itertools
from functools import partial

from .core import Step
from .reference import CORRECT, PROJECTIONS, same, split_attention
from .runs import LAYERS, UNTRANSPOSED, Run, keys_swapped, untransposed
from .watch import dropped


def split(r, num_heads=None, drop=False, steps=None, **changes):
    """The output of run ``r``'s module from its own layers, or one catalogued mistake's."""
    once, num_heads = (lambda t: dropped(t, r.p)), num_heads or r.kwargs["num_heads"]
    dropout = {False: None, True: once, "twice": lambda t: once(once(t))}[drop]  # the check's
    if changes.get("scale") in ("sqrt d_in", "sqrt num_heads"):  # widths the recipe cannot know
        changes["scale"] = r.kwargs[changes["scale"].removeprefix("sqrt ")] ** 0.5
    if changes.get("mask") == "shifted":  # the last T of context_length columns
        changes["mask"] = f"shift {r.kwargs['context_length'] - r.x.shape[1]}"
    return split_attention(r.module, r.x, num_heads, CORRECT.but(dropout=dropout, **changes), steps)


def other_head_count(f):
    """A forward that raises but works for k heads of the same width: ``{"k": k}``, or None."""
    head_dim = f["d_out"] // f["num_heads"]
    for k in (k for k in range(2, 9) if f["raised"] and k != f["num_heads"]):
        kwargs = dict(f["run"].kwargs, d_out=k * head_dim, num_heads=k)
        run = Run(type(f["run"].module), kwargs, f["T"], f["run"].seed)
        if run.error is None and same(run.output, split(run)):
            return {"k": k}
    return None


def at(step, r):
    """A :class:`.core.Step`'s right tensors on run ``r``: whole, and head 1's as a loop has it."""
    found, _ = {}, r.module.eval()
    found["output"] = split(r, steps=found)
    forms = found[step] if isinstance(found[step], tuple) else (found[step],)
    return [*forms, *(t[:, 0] for t in forms if t.dim() == 4)]


def projections(used):
    """What a forward whose queries, keys and values come from ``used`` is told."""
    roles = zip(("queries", "keys", "values"), used, PROJECTIONS)
    wrong = " and ".join(f"{role} come from {u}" for role, u, right in roles if u != right)
    return f"Your {wrong}: queries come from W_query, keys from W_key, values from W_value."


# fmt: off
HARD = ("Built with num_heads={num_heads}, your class computes as if it had {k} heads: the count "
        "is in the code. Use num_heads.")
EARLY = (  # before the output's values: what the forward built, or the call that failed
    LAYERS,
    (keys_swapped, "Your scores product failed ({error}): the keys were transposed on axes 1 and 2,"
     " which swaps heads and tokens here. Swap the last two axes: keys.transpose(2, 3)."),
    (untransposed, UNTRANSPOSED),
    (other_head_count, HARD))
SCALE = ("The scores are not scaled by √head_dim: a head's dot products have head_dim terms. "
         "Divide them by self.head_dim ** 0.5, not by 1, head_dim or another width's root.")
STEPS = (  # the steps after the scores, as chapter 3 (and 6, on its own reference) names them
    (dict(scale="none"), "The scores are not scaled by √head_dim at all: divide them by "
     "self.head_dim ** 0.5 before the softmax."),
    (dict(mask="none"), "There is no causal mask: fill the later tokens' scores with -inf."),
    (dict(mask="0 before softmax"), "The mask fills the later tokens' scores with 0 instead of "
     "-inf: e^0 = 1, so they still get weight after the softmax."),
    (dict(mask="0 after softmax"), "The mask zeroes the weights after the softmax, so the visible "
     "ones no longer sum to 1: fill the scores with -inf before it."),
    (dict(mask="-inf after softmax"), "The mask fills the weights with -inf after the softmax: "
     "fill the scores with -inf before it."),
    (dict(softmax_dim=-2), "The softmax runs over the queries (dim=-2): a query's weights over the "
     "keys sum to 1, dim=-1."),
    *((dict(softmax_dim=d), f"The softmax runs over axis {d} (heads or batch), not the keys: "
       "dim=-1.") for d in (1, 0)))
SPLIT = "Each head owns a block of head_dim consecutive columns: view by token first, then "
MISTAKES = (  # in eval mode: what each buggy reference changes, and what to tell the reader
    (dict(drop=True), "Your forward gives a different output each time, even in eval mode: "
     "its dropout ignores the module's mode (F.dropout defaults to training=True). Use "
     "self.dropout."),
    *((dict(num_heads=k), HARD.replace("{k}", str(k))) for k in range(1, 13)),
    (dict(bias=False), "Your output is right without biases but wrong with qkv_bias=True: the "
     "projections skip the biases, as x @ W.weight.T does. Call the layers: self.W_query(x)."),
    (dict(projections=("W_key", "W_query", "W_value")), "Your scores are keys @ queries.T, each "
     "key's row: they are queries @ keys.transpose(2, 3), one row per query."),
    *((dict(projections=used), projections(used))
      for used in itertools.product(PROJECTIONS, repeat=3) if used != PROJECTIONS),
    *((dict(split=split, **m), f"Your heads are {how} (b, num_heads, num_tokens, head_dim), "
       "which mixes tokens and heads. " + SPLIT + ".transpose(1, 2).")
      for split, how, m in (("no transpose", "one view straight to", {}),  # the merge back alike
                            ("no transpose", "one view straight to", dict(merge="no transpose")),
                            ("transposed first", "a transpose(1, 2), then one view to", {}))),
    *((dict(split="strided", **m), "Your head h takes every num_heads-th column (h, h + num_heads, "
       "...). " + SPLIT + "move the head axis.") for m in ({}, dict(merge="interleaved"))),
    (dict(merge="no transpose"), "Every head's context is right, but the merge views (b, "
     "num_heads, num_tokens, head_dim) as (b, num_tokens, d_out) without .transpose(1, 2) first."),
    (dict(merge="reversed"), "Every head's context is right, but the merge puts the last head "
     "first: head 1's block of head_dim columns comes first."),
    (dict(merge="interleaved"), "Every head's context is right, but the merge interleaves the "
     "heads' columns: .transpose(1, 2), then view, head 1's block of head_dim columns first."),
    *((dict(scale=f"sqrt {w}"), f"The scores are divided by √{w}, {whose}: a head's dot "
       "products have head_dim terms, so divide by self.head_dim ** 0.5.") for w, whose in
      (("d_out", "all heads' width"), ("d_in", "the input's width"), ("num_heads", "a count"))),
    (dict(scale="head_dim"), "The scores are divided by head_dim: divide by its square root, "
     "self.head_dim ** 0.5."),
    (dict(scale="times"), "The scores are multiplied by √head_dim: divide them by it."),
    (dict(first="keys"), "Every sequence attends to sequence 0's keys and values: keep the batch "
     "axis, one sequence per row."),
    (dict(first="output"), "Every sequence gets sequence 0's output: compute every row of the "
     "batch, not x[0] alone."),
    *STEPS,
    *((dict(scale=w), f"The scores are divided by {w}: ** comes before /, so hd ** 1/2 is hd / 2 "
       "(and s / hd ** 1/2 is s / hd / 2). Write self.head_dim ** 0.5.")
      for w in ("head_dim / 2", "2 head_dim")),  # after "none": hd / 2 is 1 when hd is 2
    (dict(mask="diagonal too"), "Your mask hides the diagonal too, each token's own key: the "
     "skeleton's self.mask, True above the diagonal, hides only later tokens."),
    (dict(mask="inverted"), "Your mask is inverted: it hides the past and keeps the future. "
     "self.mask is True on the later tokens, the ones to hide: use it as is."),
    (dict(mask="shifted"), "Your mask is the last columns of self.mask, [:T, -T:], which on short "
     "inputs hides too much (the first tokens see no key: nan): slice its top-left corner, "
     "self.mask[:num_tokens, :num_tokens]."),
    (dict(out_proj=False), "Your forward never applies out_proj to the merged context."),
    (dict(out_proj=2), "Your forward applies out_proj twice: once, to the merged context."),
    "split, scores, mask with -inf, softmax of scores / √head_dim over the keys, merge in head "
    "order, out_proj.")
BELONGS = "Dropout belongs on the attention weights, after the softmax: self.dropout(attn_weights)."
DROPS = {"scores": "scores, before the softmax", "masked": "masked scores: -inf × 0 is nan",
         "values": "values, not weights",  # Recipe.dropout_at: where dropout went, in words
         "context": "the context (weights @ values), not the weights", "output": "the output"}
TRAINED = (  # in training mode: no dropout, dropout in another place, or twice
    (dict(), "In training mode no attention weight is ever dropped. " + BELONGS),
    *((dict(drop=True, dropout_at=at), f"Your dropout drops {what}. {BELONGS}")
      for at, what in DROPS.items()),
    (dict(drop="twice"), "Your dropout runs twice on the weights: once is enough."))
STAGES = (  # where an unknown answer first differs, and the hint on that step
    Step("the scores", 2, partial(at, "scores")),
    Step("the attention weights (mask, scale, softmax)", 3, partial(at, "weights")),
    Step("each head's context (weights @ values)", 2, partial(at, "context")),
    Step("the merged context (head 1's columns first)", 2, partial(at, "merged")),
    Step("the output (out_proj)", 3, partial(at, "output")))
# fmt: on
