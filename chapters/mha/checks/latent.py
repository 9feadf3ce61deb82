"""Chapter 8's check, a catalogue on the core: each mistake a buggy reference (:func:`absorbed`)."""

from functools import partial

import torch

from ..latent import LatentAttention
from .core import CheckResult, attempt, never_raises
from .reference import Buggy, Catalogue, Recipe, attend, run_catalogue
from .shortcuts import Watch, book_calls


def absorbed(s, rows="blocks", fold="columns", on_latents=False, bias=1, **recipe):
    """The absorbed output of setup ``s`` (a module, its input), or with one step wrong: W_up_key's
    blocks (``rows``), the ``fold``, dropout ``on_latents``, the ``bias`` or ``recipe``'s."""
    (m, x), H, hd = s, s[0].num_heads, s[0].head_dim
    up_key = m.W_up_key.weight  # (d_out, c)
    blocks = up_key.view(H, hd, -1)  # (H, hd, c)
    blocks = up_key.view(hd, H, -1).transpose(0, 1) if rows == "strided" else blocks
    blocks = up_key.T.reshape(H, hd, -1) if rows == "transposed" else blocks
    latents = m.W_down_kv(x).unsqueeze(1)  # (b, 1, T, c)
    queries = m.split_heads(m.W_query(x)) @ blocks  # (b, H, T, c)
    recipe = Recipe(scale=hd**0.5, dropout=m.dropout).but(**recipe)  # √head_dim, not √c
    context = attend(queries, latents, latents, recipe)  # (b, H, T, c)
    context = m.dropout(context) if on_latents else context
    out = m.out_proj.weight  # (d_out, d_out); its column block h reads head h
    out = out.unflatten(1, (H, hd)).transpose(0, 1) if fold == "columns" else out.view(H, hd, -1).mT
    folded = out @ m.W_up_value.weight.view(H, hd, -1)  # (H, d_out, c)
    return (context @ folded.mT).sum(1) + bias * m.out_proj.bias  # (b, T, d_out)


BLOCK = "W_up_key.weight is (d_out, latent_dim): head h's block is view(H, hd, -1)[h], not strided."
DROPPED = "In training, apply module.dropout to the weights: not nothing, nor the combined latents."
MISTAKES = (  # what each buggy reference does differently, and what to tell the reader
    *((dict(rows=rows), BLOCK) for rows in ("strided", "transposed")),
    (dict(scale="sqrt head_dim"), "Scale by head_dim ** 0.5 (keys' width), not latent_dim ** 0.5."),
    (dict(mask="none"), "Tokens attend to later tokens: mask the scores before the softmax."),
    (dict(fold="rows"), "Fold W_up_value into out_proj's columns that read head h, not its rows."),
    *((dict(on_latents=on, dropout=None), DROPPED) for on in (False, True)),
    (dict(bias=0), "out_proj's bias is missing: the fold takes its weight, add the bias."),
)
PRAISE = "Your absorbed pass equals forward's output; W_up_key and W_up_value never ran as layers."
UNKNOWN = "Not the absorbed output, and no catalogued mistake explains it: see hint(2)."
FAILED = "Your function failed: {error}"
#: d_in, d_out, heads, latent_dim, tokens, qkv_bias, seed, dropout (in training mode).
CONFIGS = (
    (5, 12, 3, 6, 5, False, 1, 0.0),
    (4, 8, 2, 3, 4, True, 2, 0.0),
    (6, 8, 4, 5, 5, False, 3, 0.5),
)
CALLS = {  # what a function that calls these, which do the work for it, is told
    "LatentAttention.absorbed": "calls module.absorbed, the book's own method.",
    "LatentAttention.forward": "calls module(x), the book's forward.",
    "W_up": "up-projects the latents: fold W_up_key into queries, W_up_value into out_proj.",
}
START = "The starting code: which weight turns head h's query into a latent's partner? See hint(1)."


def setup(d_in, d_out, heads, latent, tokens, bias, seed, dropout, calls):
    """A module, seeded, whose up-projections note in ``calls`` when they run, and its input."""
    torch.manual_seed(seed)
    m = LatentAttention(d_in, d_out, tokens, dropout, heads, latent, bias).train(dropout > 0)
    for layer in (m.W_up_key, m.W_up_value):  # the references never call them
        layer.register_forward_hook(lambda *_: calls.append("W_up"))
    return m, torch.randn(2, tokens, d_in)  # x: (2, tokens, d_in)


@never_raises
def check_absorbed(answer):
    """Accept ``answer(module, x)`` if it computes absorbed's output on every setup, by itself."""
    with torch.random.fork_rng(devices=[]), torch.no_grad(), Watch(), book_calls() as calls:
        setups = tuple(setup(*config, calls) for config in CONFIGS)  # Watch: the check's dropout
        start = isinstance(attempt(answer, *setups[0]), NotImplementedError)
        mistakes = tuple(Buggy(told, told, partial(absorbed, **kw)) for kw, told in MISTAKES)
        found = Catalogue(setups, absorbed, mistakes, PRAISE, UNKNOWN, FAILED)
        result = run_catalogue(found, lambda s: answer(*s))
    told = next((f"Your function {CALLS[n]}" for n in CALLS if n in calls), None)
    return CheckResult(False, START) if start else CheckResult(False, told) if told else result
