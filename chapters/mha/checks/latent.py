"""Chapter 8's check: each mistake is a buggy reference, absorbed() with one step wrong."""

import torch

from ..latent import ATOL, LatentAttention
from .core import CheckResult, describe_error, never_raises


# fmt: off
def absorbed(m, x, rows="blocks", scale="head", mask=True, fold="columns", drop="weights", bias=1):
    """The absorbed output of ``m`` on ``x``, or one catalogued way to get it wrong."""
    H, hd, T, up_key = m.num_heads, m.head_dim, x.shape[1], m.W_up_key.weight  # (d_out, c)
    latents = m.W_down_kv(x).unsqueeze(1)  # (b, 1, T, c)
    blocks = {"blocks": up_key.view(H, hd, -1), "strided": up_key.view(hd, H, -1).transpose(0, 1),
              "transposed": up_key.T.reshape(H, hd, -1)}[rows]  # (H, hd, c)
    scores = m.split_heads(m.W_query(x)) @ blocks @ latents.mT  # (b, H, T, T)
    scores = scores.masked_fill(m.mask[:T, :T], -torch.inf) if mask else scores
    weights = torch.softmax(scores / (m.latent_dim if scale == "latent" else hd) ** 0.5, -1)
    context = (m.dropout(weights) if drop == "weights" else weights) @ latents  # (b, H, T, c)
    context = m.dropout(context) if drop == "latents" else context
    out = m.out_proj.weight  # (d_out, d_out); its column block h reads head h
    out = out.unflatten(1, (H, hd)).transpose(0, 1) if fold == "columns" else out.view(H, hd, -1).mT
    folded = out @ m.W_up_value.weight.view(H, hd, -1)  # (H, d_out, c)
    return (context @ folded.mT).sum(1) + bias * m.out_proj.bias  # (b, T, d_out)

MISTAKES = (  # what each buggy reference does differently, and what to tell the reader
    (dict(rows="strided"), "Head h's block of W_up_key is rows h*head_dim onwards, not strided."),
    (dict(rows="transposed"), "W_up_key.weight is (d_out, latent_dim): view it as (H, hd, c)."),
    (dict(scale="latent"), "Scale by head_dim ** 0.5, the keys' width, not latent_dim ** 0.5."),
    (dict(mask=False), "Tokens attend to later tokens: mask the scores before the softmax."),
    (dict(fold="rows"), "Fold W_up_value into out_proj's columns that read head h, not its rows."),
    (dict(drop="latents"), "Dropout hits the combined latents; drop the attention weights."),
    (dict(drop=None), "Nothing is dropped in training: apply module.dropout to the weights."),
    (dict(bias=0), "out_proj's bias is missing: the fold takes its weight, add the bias."))
KINDS = ({}, *(kw for kw, _ in MISTAKES))  # the right reference first, then the buggy ones
CONFIGS = ((5, 12, 3, 6, 5, False, 1, 0.0), (4, 8, 2, 3, 4, True, 2, 0.0),
           (6, 8, 4, 5, 5, False, 3, 0.5))  # d_in, d_out, heads, latent, T, bias, seed, dropout
CALLS = {"absorbed": "calls module.absorbed, the book's own method.", "forward": "calls module(x), "
         "the book's forward.", "W_up_key": "up-projects the latents: fold W_up_key into queries.",
         "W_up_value": "up-projects the latents: fold W_up_value into out_proj."}
START = "The starting code: which weight turns head h's query into a latent's partner? See hint(1)."
OTHER = "The output is not the absorbed one, and no catalogued mistake explains it: see hint(2)."
SHAPES = " Head h's block of W_up_key.weight is (head_dim, latent_dim); is one used transposed?"
KEPT = lambda t: (torch.arange(t.shape[-2])[:, None] + torch.arange(t.shape[-1])) % 2 == 0  # noqa: E731

@never_raises
def check_absorbed(answer):
    """Accept ``answer(module, x)`` if it is absorbed's output within ATOL plus 1e-4 relative."""
    for d_in, d_out, heads, latent, tokens, bias, seed, dropout in CONFIGS:
        torch.manual_seed(seed)
        m = LatentAttention(d_in, d_out, tokens, dropout, heads, latent, bias).train(dropout > 0)
        if dropout:  # p = 0.5 that drops the same (query, key) entries however they are batched
            m.dropout.forward = lambda t: t * KEPT(t) * 2.0
        x, calls = torch.randn(2, tokens, d_in), set()
        spots = {n: (getattr(m, n), "forward") if n[0] == "W" else (m, n) for n in CALLS}
        for n, (owner, method) in spots.items():  # instance attributes shadow these methods
            setattr(owner, method, lambda *a, n=n, f=getattr(owner, method): calls.add(n) or f(*a))  # noqa: B008, B023
        with torch.no_grad():
            try:
                output = answer(m, x)
            except Exception as error:
                shapes = "shape" in str(error) or "size" in str(error)  # e.g. a block transposed
                failed = f"Your function failed: {describe_error(error)}" + SHAPES * shapes
                starting = isinstance(error, NotImplementedError)
                return CheckResult(False, START if starting else failed)
            finally:
                [delattr(owner, method) for owner, method in spots.values()]
            refs = [absorbed(m, x, **kind) for kind in KINDS]
        ok = [isinstance(output, torch.Tensor) and output.shape == r.shape
              and torch.allclose(output, r, rtol=1e-4, atol=ATOL) for r in refs]
        if calls or not ok[0]:
            found = [f"Your function {CALLS[n]}" for n in CALLS if n in calls]
            return CheckResult(False, (found + [s for (_, s), hit in zip(MISTAKES, ok[1:]) if hit] + [OTHER])[0])  # noqa: E501
    return CheckResult(True, "Your absorbed pass equals forward's output; no latent expanded.")
