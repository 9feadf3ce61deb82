"""Chapter 3's catalogue: :func:`split`, what the answer raised, mistakes as buggy references."""

import itertools

from .reference import CORRECT, PROJECTIONS, same, split_attention
from .runs import LAYERS, Run
from .shortcuts import dropped


def split(r, num_heads=None, drop=False, **changes):
    """The output of the run ``r``'s module from its own layers, or one catalogued mistake's;
    with ``drop``, the check's dropout drops attention weights."""
    recipe = CORRECT.but(dropout=(lambda t: dropped(t, r.p)) if drop else None, **changes)
    return split_attention(r.module, r.x, num_heads or r.kwargs["num_heads"], recipe)


def other_head_count(f):
    """A forward that raises but works for k heads of the same width: ``{"k": k}``, or None."""
    head_dim = f["d_out"] // f["num_heads"]
    for k in (k for k in range(2, 9) if f["raised"] and k != f["num_heads"]):
        kwargs = dict(f["run"].kwargs, d_out=k * head_dim, num_heads=k)
        run = Run(type(f["run"].module), kwargs, f["T"], f["run"].seed)
        if run.error is None and same(run.output, split(run)):
            return {"k": k}
    return None


def keys_swapped(f):
    """The failing product multiplied (b, h, t, d) by (b, t, h, d): keys.transpose(1, 2)."""
    shapes = f["shapes"]
    if not f["raised"] or "matmul" not in f["op"] or len(shapes) != 2 or len(shapes[0]) != 4:
        return False
    return shapes[1] == tuple(shapes[0][i] for i in (0, 2, 1, 3))


# fmt: off
HARD = ("Built with num_heads={num_heads}, your class computes as if it had {k} heads: the count "
        "is in the code. Use num_heads.")
EARLY = (  # before the output's values: what the forward built, or the call that failed
    LAYERS,
    (keys_swapped, "Your scores product failed ({error}): the keys were transposed on axes 1 and 2,"
     " which swaps heads and tokens here. Swap the last two axes: keys.transpose(2, 3)."),
    (other_head_count, HARD))
SPLIT = ("Your heads are split wrong (one view straight to (b, num_heads, num_tokens, head_dim) "
         "mixes tokens and heads; every num_heads-th column is not a head): each head owns a "
         "block of head_dim consecutive columns. View by token first, then .transpose(1, 2).")
MERGE = ("Every head computes the right context, but the merge puts it in the wrong columns "
         "(without transposing back, reversed or interleaved): .transpose(1, 2) first, then "
         ".contiguous().view(b, num_tokens, d_out), head 1's block of head_dim columns first.")
SCALE = ("The scores are not scaled by √head_dim: a head's dot products have head_dim terms. "
         "Divide them by self.head_dim ** 0.5, not by 1, head_dim or another width's root.")
MASKED = ("There is no causal mask, or it is filled with 0 instead of -inf, or the mask is applied "
          "after the softmax: fill the later tokens' scores with -inf before the softmax, so they "
          "get no weight and the visible ones sum to 1.")
AXIS = "The softmax runs over the wrong axis: a query's weights over the keys sum to 1, dim=-1."
STEPS = (  # the steps after the scores, as chapter 3 (and 6, on its own reference) names them
    (dict(scale="none"), SCALE),
    *((dict(mask=how), MASKED) for how in ("none", "0 before softmax", "0 after softmax",
                                          "-inf after softmax")),
    *((dict(softmax_dim=d), AXIS) for d in (-2, 1, 0)))
MASK = ("Your mask hides the wrong tokens (the diagonal too, or the past instead of the future): "
        "the skeleton's self.mask is True on the later tokens, the ones to hide. Use it as is.")
MISTAKES = (  # in eval mode: what each buggy reference changes, and what to tell the reader
    (dict(drop=True), "Your forward gives a different output each time, even in eval mode: "
     "its dropout ignores the module's mode (F.dropout defaults to training=True). Use "
     "self.dropout."),
    *((dict(num_heads=k), HARD.replace("{k}", str(k))) for k in range(1, 13)),
    (dict(bias=False), "Your output is right without biases but wrong with qkv_bias=True: the "
     "projections skip the biases, as x @ W.weight.T does. Call the layers: self.W_query(x)."),
    *((dict(projections=used), "A projection is used in the wrong place. Queries come from "
       "W_query, keys from W_key and values from W_value.")
      for used in itertools.product(PROJECTIONS, repeat=3) if used != PROJECTIONS),
    *((dict(split=how), SPLIT) for how in ("no transpose", "strided")),
    (dict(split="no transpose", merge="no transpose"), SPLIT),
    (dict(split="strided", merge="interleaved"), SPLIT),
    *((dict(merge=how), MERGE) for how in ("no transpose", "reversed", "interleaved")),
    *((dict(scale=scale), SCALE) for scale in ("sqrt d_out", "head_dim")),
    *STEPS,
    *((dict(mask=mask), MASK) for mask in ("diagonal too", "inverted")),
    (dict(out_proj=False), "Your class defines out_proj, but the forward never applies it to the "
     "context."),
    "split, scores, mask with -inf, softmax of scores / √head_dim over the keys, merge in head "
    "order, out_proj.")
# fmt: on
