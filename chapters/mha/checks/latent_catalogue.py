"""Chapter 8's catalogue: :func:`absorbed`, right or a step wrong, and what each mistake is told."""

from functools import partial

import torch.nn.functional as F

from .reference import MERGES, SPLITS, Recipe, attend

BLOCKS = {  # a (d_out, c) up-projection as head blocks (H, hd, c), right or wrong
    "blocks": lambda w, H: w.unflatten(0, (H, -1)),  # head h: rows h * hd onwards
    "strided": lambda w, H: w.unflatten(0, (-1, H)).transpose(0, 1),  # rows h, h + H, ...
    "transposed": lambda w, H: w.T.reshape(H, -1, w.shape[1]),  # W.T.reshape: rows scrambled
    "(H, c, hd)": lambda w, H: w.T.reshape(H, w.shape[1], -1).mT,  # scrambled too, then turned
    "W_up_key": lambda w, H: w.unflatten(0, (H, -1)),  # w is W_up_key's: the keys' blocks
}
#: Every step done right; a buggy reference changes one (its keyword names the step).
RIGHT = dict(keys="blocks", values="blocks", split=True, unbiased=(), scale="hd",
             mask="-inf before softmax", dim=-1, drop="weights", merge="blocks", fold="columns",
             bias=1)  # fmt: skip


def absorbed(s, stages=None, **wrong):
    """The absorbed output of setup ``s`` (a module, its input), or with one step wrong (each
    keyword names the step); ``stages`` (a dict), if given, gets the steps' tensors."""
    (m, x), H, hd, o = s, s[0].num_heads, s[0].head_dim, s[0].out_proj
    steps = RIGHT | wrong  # in RIGHT's order
    keys, values, split, unbiased, scale, mask, dim, drop, merge, fold, bias = steps.values()

    def project(name):  # x through the layer, its bias left out if ``unbiased`` names it
        layer = getattr(m, name)
        return F.linear(x, layer.weight, None if name in unbiased else layer.bias)

    latents = project("W_down_kv").unsqueeze(1)  # (b, 1, T, c)
    q = SPLITS["blocks" if split else "no transpose"](project("W_query"), H)  # (b, H, T, hd)
    stages = {} if stages is None else stages
    stages["absorbed queries"] = q @ BLOCKS[keys](m.W_up_key.weight, H)  # (b, H, T, c)
    root = {"hd": hd, "c": m.latent_dim, "d_out": m.d_out, "times": hd**-1}.get(scale, 1)
    dropout = {"eval": partial(F.dropout, p=m.dropout.p), "none": None}.get(drop, m.dropout)
    at = {"eval": "weights", "combined latents": "context", "twice": "weights"}.get(drop, drop)
    how = Recipe(scale=root**0.5, mask=mask, softmax_dim=dim, dropout=dropout, dropout_at=at)
    # attend fills stages: scores (raw, masked, scaled), weights, context; "after" scales it last
    context = attend(stages["absorbed queries"], latents, latents, how, stages)  # (b, H, T, c)
    stages["combined latents"] = context / (hd**0.5 if scale == "after" else 1)
    up = BLOCKS[values]((m.W_up_key if values == "W_up_key" else m.W_up_value).weight, H)
    values = stages["combined latents"] @ up.mT  # (b, H, T, hd): each head's values
    if fold == "reshaped":  # head h's V @ O, (d_out, c), reshaped (not transposed) to (c, d_out)
        vo = o.weight.unflatten(1, (H, -1)).transpose(0, 1) @ up  # (H, d_out, c)
        return (stages["combined latents"] @ vo.reshape(H, -1, m.d_out)).sum(1) + o.bias
    if fold == "per head":  # each head's output, not summed over the heads: (b, H, T, d_out)
        return values @ o.weight.unflatten(1, (H, -1)).permute(1, 2, 0)
    merged = MERGES[merge](values)  # (b, T, d_out)
    # The fold: out_proj's column block h times W_up_value's block h, summed over heads, is
    # out_proj applied to the merged values; the wrong folds, as weights for that product.
    weight = {"rows": o.weight.T, "mean": o.weight / H}.get(fold, o.weight)
    output = F.linear(merged, weight, {1: 1, 0: 0, "per head": H}[bias] * o.bias)  # (b, T, d_out)
    output = m.dropout(output) if drop in ("output", "twice") else output
    return merged if fold == "none" else o(output) if fold == "twice" else output


SIDES = {"keys": ("W_up_key", "B"), "values": ("W_up_value", "V")}  # the layer, its head block
BLOCK = "{0}.weight is (d_out, latent_dim): head h's {1}.T is its rows h * hd onwards, view(H, hd, "
BIAS = "x @ weight.T leaves out the layer's bias: call module.W_query(x) and module.W_down_kv(x)."
PLACE = "Apply module.dropout to the attention weights, after the softmax, "
# fmt: off
MISTAKES = (  # what each buggy reference does differently, and what to tell the reader
    *(({s: "strided"}, BLOCK.format(*SIDES[s]) + "-1)[h], not every H-th row.") for s in SIDES),
    *(({s: t}, BLOCK.format(*SIDES[s]) + "-1)[h]: .T.reshape scrambles it.")
      for s in SIDES for t in ("transposed", "(H, c, hd)")),
    (dict(values="W_up_key"), "Your value fold uses W_up_key's blocks: fold W_up_value's."),
    (dict(split=False), "view(b, H, T, hd) mixes tokens and heads: split with module.split_heads."),
    *((dict(unbiased=n), BIAS) for n in (("W_query",), ("W_down_kv",), ("W_query", "W_down_kv"))),
    (dict(scale="c"), "Scale by head_dim ** 0.5, the keys' width, not latent_dim ** 0.5."),
    (dict(scale="d_out"), "Scale by head_dim ** 0.5, one head's width, not d_out ** 0.5."),
    (dict(scale="none"), "The scores are not scaled: divide them by head_dim ** 0.5."),
    (dict(scale="times"), "Divide the scores by head_dim ** 0.5; yours multiplies them."),
    (dict(scale="after"), "Scale the scores before the softmax, not its weights after."),
    (dict(dim=-2), "Softmax over dim=-1, the keys: each query's weights must sum to 1."),
    (dict(mask="none"), "Tokens attend to later tokens: mask the scores before the softmax."),
    (dict(mask="diagonal too"), "Your mask hides each token from itself: triu(..., diagonal=1)."),
    (dict(mask="inverted"), "Your mask hides each token and earlier ones: hide later ones, triu."),
    (dict(mask="0 before softmax"), "Masked scores of 0 still get weight: fill with -torch.inf."),
    (dict(mask="0 after softmax"), "Mask scores before the softmax: after, rows don't sum to 1."),
    (dict(drop="none"), PLACE + "as forward does (the check runs one module in training)."),
    (dict(drop="eval"), "Dropout ran in eval mode: use module.dropout, which model.eval() stops."),
    *((dict(drop=d), f"{PLACE}not to the {w}.") for d, w in (("scores", "scores"), ("masked",
      "masked scores: -inf × 0 is nan"), ("combined latents",) * 2, ("output",) * 2,
      ("twice", "output as well"))),
    (dict(fold="rows"), "Head h's O.T is out_proj.weight's columns h * hd onwards, not its rows."),
    (dict(merge="no transpose"), "Merge heads with transpose(1, 2), then reshape(b, T, d_out)."),
    (dict(bias=0), "out_proj's bias is missing: the fold uses only its weight; add the bias."),
    (dict(bias="per head"), "Add out_proj's bias once, after summing the heads, not per head."),
    (dict(fold="mean"), "Sum the heads' outputs over dim=1; a mean divides them by num_heads."),
    (dict(fold="per head"), "You returned each head's output: sum the heads' outputs over dim=1."),
    (dict(fold="none"), "out_proj is missing: each head's combined latents go through V @ O."),
    *((dict(fold="twice", bias=b), "out_proj ran twice: the fold already applies its weight and "
       "bias.") for b in (1, 0)),  # 0: the folded sum unbiased, then out_proj
    (dict(fold="reshaped"), "Head h's V @ O is (d_out, c): turn it with .transpose, not reshape."),
)
# fmt: on
