"""Chapter 8's check, a catalogue on the core: the absorbed pass, each mistake a buggy reference
(:func:`absorbed` with one step wrong), and the layers that would do the work for the reader."""

from dataclasses import replace
from functools import partial
from operator import attrgetter
from types import SimpleNamespace

import torch

from ..latent import LatentAttention
from .catalogue import Buggy, Catalogue, run_catalogue
from .core import CheckResult, describe_error, never_raises
from .reference import Recipe, attend
from .shortcuts import Watch


def absorbed(s, rows="blocks", fold="columns", on_latents=False, bias=1, **recipe):
    """The absorbed output of setup ``s``'s module on its input, or one way to get it wrong:
    head h's block of W_up_key taken otherwise (``rows``), W_up_value folded into out_proj's
    rows, dropout on the combined latents, no bias, or ``recipe``'s ingredients changed."""
    m, H, hd = s.m, s.m.num_heads, s.m.head_dim
    up_key = m.W_up_key.weight  # (d_out, c)
    blocks = {
        "blocks": up_key.view(H, hd, -1),
        "strided": up_key.view(hd, H, -1).transpose(0, 1),
        "transposed": up_key.T.reshape(H, hd, -1),
    }[rows]  # (H, hd, c)
    latents = m.W_down_kv(s.x).unsqueeze(1)  # (b, 1, T, c)
    queries = m.split_heads(m.W_query(s.x)) @ blocks  # (b, H, T, c)
    recipe = Recipe(scale=hd**0.5, dropout=m.dropout).but(**recipe)  # √head_dim, not √c
    context = attend(queries, latents, latents, recipe)  # (b, H, T, c)
    context = m.dropout(context) if on_latents else context
    out = m.out_proj.weight  # (d_out, d_out); its column block h reads head h
    out = out.unflatten(1, (H, hd)).transpose(0, 1) if fold == "columns" else out.view(H, hd, -1).mT
    folded = out @ m.W_up_value.weight.view(H, hd, -1)  # (H, d_out, c)
    return (context @ folded.mT).sum(1) + bias * m.out_proj.bias  # (b, T, d_out)


#: attend's own scale, the square root of the queries' width: here latent_dim, not head_dim.
LATENT_SCALE = dict(scale="sqrt head_dim")
MISTAKES = (  # what each buggy reference does differently, and what to tell the reader
    (dict(rows="strided"), "Head h's block of W_up_key is rows h*head_dim onwards, not strided."),
    (dict(rows="transposed"), "W_up_key.weight is (d_out, latent_dim): view it as (H, hd, c)."),
    (LATENT_SCALE, "Scale by head_dim ** 0.5, the keys' width, not latent_dim ** 0.5."),
    (dict(mask="none"), "Tokens attend to later tokens: mask the scores before the softmax."),
    (dict(fold="rows"), "Fold W_up_value into out_proj's columns that read head h, not its rows."),
    (dict(on_latents=True, dropout=None), "Dropout hits the combined latents: drop the weights."),
    (dict(dropout=None), "Nothing is dropped in training: apply module.dropout to the weights."),
    (dict(bias=0), "out_proj's bias is missing: the fold takes its weight, add the bias."),
)
ABSORBED = Catalogue(
    configurations=(),  # the check's setups, made for each check
    right=absorbed,
    mistakes=tuple(Buggy(message, message, partial(absorbed, **kw)) for kw, message in MISTAKES),
    praise="Your absorbed pass equals forward's output; no latent expanded.",
    unknown="Not the absorbed output, and no catalogued mistake explains it: see hint(2).",
)
#: d_in, d_out, heads, latent_dim, tokens, qkv_bias, seed, dropout (in training mode).
CONFIGS = (
    (5, 12, 3, 6, 5, False, 1, 0.0),
    (4, 8, 2, 3, 4, True, 2, 0.0),
    (6, 8, 4, 5, 5, False, 3, 0.5),
)
CALLS = {
    "absorbed": "calls module.absorbed, the book's own method.",
    "forward": "calls module(x), the book's forward.",
    "W_up_key": "up-projects the latents: fold W_up_key into queries.",
    "W_up_value": "up-projects the latents: fold W_up_value into out_proj.",
}
START = "The starting code: which weight turns head h's query into a latent's partner? See hint(1)."
SHAPES = " Head h's block of W_up_key.weight is (head_dim, latent_dim); is one used transposed?"


def setup(d_in, d_out, heads, latent, tokens, bias, seed, dropout, calls):
    """A module the check builds, seeded, and its input. The layers and methods of :data:`CALLS`
    note in ``calls`` when they run (the references never call them)."""
    torch.manual_seed(seed)
    m = LatentAttention(d_in, d_out, tokens, dropout, heads, latent, bias).train(dropout > 0)
    for name in CALLS:  # an instance attribute shadows the method
        owner, method = (getattr(m, name), "forward") if name[0] == "W" else (m, name)
        spied = getattr(owner, method)
        setattr(owner, method, lambda *a, n=name, f=spied: calls.add(n) or f(*a))
    return SimpleNamespace(m=m, x=torch.randn(2, tokens, d_in))  # x: (2, tokens, d_in)


@never_raises
def check_absorbed(answer):
    """Accept ``answer(module, x)`` if it computes absorbed's output (within
    :func:`.reference.same`) on every setup, without the book's method or the up-projections."""
    calls = set()
    with torch.random.fork_rng(devices=[]), torch.no_grad(), Watch():  # the check's dropout
        setups = tuple(setup(*config, calls) for config in CONFIGS)
        try:
            for s in setups:
                s.output = answer(s.m, s.x)
        except Exception as error:
            shapes = "shape" in str(error) or "size" in str(error)  # e.g. a block transposed
            failed = f"Your function failed: {describe_error(error)}" + SHAPES * shapes
            return CheckResult(False, START if isinstance(error, NotImplementedError) else failed)
        if calls:
            return CheckResult(
                False, "Your function " + next(CALLS[n] for n in CALLS if n in calls)
            )
        return run_catalogue(replace(ABSORBED, configurations=setups), attrgetter("output"))
