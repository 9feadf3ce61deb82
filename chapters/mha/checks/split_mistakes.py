"""Chapter 3's catalogue: :func:`split`, what the answer raised, mistakes as buggy references."""

import itertools

from .reference import CORRECT, PROJECTIONS, split_attention
from .watch import dropped, kept, mask_for


def split(r, num_heads=None, drop=False, steps=None, **changes):
    """The output of run ``r``'s module from its own layers, or one catalogued mistake's."""
    once, num_heads = (lambda t: dropped(t, r.p)), num_heads or r.kwargs["num_heads"]
    dropout = {  # the check's, at p; or scaled by 1, by 1 / p, or rows summing to 1 again
        False: None,
        True: once,
        "twice": lambda t: once(once(t)),
        "unscaled": lambda t: t * kept(t),
        "inverted": lambda t: t * mask_for(t, r.p, r.p) / (1 - r.p),  # kept with chance p
        "over p": lambda t: t * kept(t) / r.p,
        "renormalised": lambda t: once(t) / once(t).sum(-1, keepdim=True),
    }.get(drop, lambda t: dropped(t, drop))  # a number: dropout at that rate, not p
    if changes.get("scale") in ("sqrt d_in", "sqrt num_heads"):  # widths the recipe cannot know
        changes["scale"] = r.kwargs[changes["scale"].removeprefix("sqrt ")] ** 0.5
    if changes.get("mask") == "shifted":  # the last T of context_length columns
        changes["mask"] = f"shift {r.kwargs['context_length'] - r.x.shape[1]}"
    return split_attention(r.module, r.x, num_heads, CORRECT.but(dropout=dropout, **changes), steps)


def projections(used):
    """What a forward whose queries, keys and values come from ``used`` is told."""
    roles = zip(("queries", "keys", "values"), used, PROJECTIONS)
    wrong = " and ".join(f"{role} come from {u}" for role, u, right in roles if u != right)
    return f"Your {wrong}: queries come from W_query, keys from W_key, values from W_value."


SWAPPED = ("W_key", "W_query", "W_value")  # the same output as keys @ queries.T
# fmt: off
HARD = ("Built with num_heads={num_heads}, your class computes as if it had {k} heads: the count "
        "is in the code. Use num_heads.")
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
#: Mistakes chapter 6's reference (heads_reference.grouped) computes its own way, or not at all.
SPLIT_ONLY = [dict(split="values viewed"), dict(first="folded"), dict(scale="after softmax"),
              dict(out_proj="no bias"), dict(out_proj="residual")]
SPLIT = "Each head owns a block of head_dim consecutive columns: view by token first, then "
MISTAKES = (  # in eval mode: what each buggy reference changes, and what to tell the reader
    (dict(drop=True), "Your forward gives a different output each time, even in eval mode: "
     "its dropout ignores the module's mode (F.dropout defaults to training=True). Use "
     "self.dropout."),
    *((dict(num_heads=k), HARD.replace("{k}", str(k))) for k in range(1, 13)),
    (dict(bias=False), "Your output is right without biases but wrong with qkv_bias=True: the "
     "projections skip the biases, as x @ W.weight.T does. Call the layers: self.W_query(x)."),
    (dict(projections=SWAPPED), "Your scores are keys @ queries.T, each key's row (or the "
     "queries come from W_key, the keys from W_query): they are queries @ keys.transpose(2, 3), "
     "one row per query, queries from W_query."),
    *((dict(projections=used), projections(used))
      for used in itertools.product(PROJECTIONS, repeat=3) if used not in (PROJECTIONS, SWAPPED)),
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
    (dict(scale="sqrt sqrt"), "The scores are divided by √√head_dim, a root of a root: divide "
     "by self.head_dim ** 0.5, once."),
    (dict(scale="sqrt num_tokens"), "The scores are divided by √num_tokens: a head's dot products "
     "have head_dim terms, whatever the length. Divide by self.head_dim ** 0.5."),
    (dict(scale="after softmax"), "The weights are divided by √head_dim after the softmax, so "
     "they no longer sum to 1: divide the scores before it."),
    (dict(mask="transposed"), "Your mask is transposed (self.mask.T): it hides the earlier tokens "
     "and keeps the later ones. Use self.mask[:num_tokens, :num_tokens] as it is."),
    (dict(mask="added"), "Your mask is added to the scores as numbers (True is 1), which hides "
     "nothing: fill the hidden scores, masked_fill(mask, -torch.inf)."),
    (dict(mask="diagonal, nan to 0"), "Your mask hides the diagonal too, each token's own key, "
     "so the first token sees no key (nan, which nan_to_num hides): hide only later tokens."),
    (dict(mix="transposed"), "Each head mixes its values with its weights transposed: a query's "
     "row of weights mixes them, attn_weights @ values."),
    (dict(split="values viewed"), "Your values are one view straight to (b, num_heads, "
     "num_tokens, head_dim), which mixes tokens and heads: split them as the keys, view by "
     "token first, then .transpose(1, 2)."),
    (dict(merge="averaged"), "Your heads' contexts are averaged, not placed side by side: "
     ".transpose(1, 2), then view to (b, num_tokens, d_out), head 1's block first."),
    (dict(first="folded"), "Your sequences attend to each other: the batch is folded into the "
     "tokens (b * num_tokens), so later sequences see earlier ones. Keep b its own axis."),
    (dict(out_proj="no bias"), "out_proj's bias is missing: call self.out_proj(context)."),
    (dict(out_proj="residual"), "Your output adds the merged context to out_proj's (a "
     "residual): the block that holds attention adds that; return self.out_proj(context)."),
    (dict(out_proj=False), "Your forward never applies out_proj to the merged context."),
    (dict(out_proj=2), "Your forward applies out_proj twice: once, to the merged context."),
    "split, scores, mask with -inf, softmax of scores / √head_dim over the keys, merge in head "
    "order, out_proj.")
# fmt: on
