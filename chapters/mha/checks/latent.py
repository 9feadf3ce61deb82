"""Chapter 8's check, a catalogue on the core: the absorbed pass, each mistake a buggy reference
(:func:`absorbed` with one step wrong), and the layers that would do the work for the reader."""

from dataclasses import replace
from functools import partial
from operator import attrgetter

import torch

from ..latent import LatentAttention
from .catalogue import Buggy, Catalogue, run_catalogue
from .core import CheckResult, describe_error, never_raises
from .shortcuts import Watch


def absorbed(s, rows="blocks", scale="head", mask=True, fold="columns", drop="weights", bias=1):
    """The absorbed output of setup ``s``'s module on its input, or one way to get it wrong."""
    m, H, hd, T = s.m, s.m.num_heads, s.m.head_dim, s.x.shape[1]
    up_key = m.W_up_key.weight  # (d_out, c)
    blocks = {
        "blocks": up_key.view(H, hd, -1),
        "strided": up_key.view(hd, H, -1).transpose(0, 1),
        "transposed": up_key.T.reshape(H, hd, -1),
    }[rows]  # (H, hd, c)
    latents = m.W_down_kv(s.x).unsqueeze(1)  # (b, 1, T, c)
    scores = m.split_heads(m.W_query(s.x)) @ blocks @ latents.mT  # (b, H, T, T)
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
    (dict(bias=0), "out_proj's bias is missing: the fold takes its weight, add the bias."),
)
ABSORBED = Catalogue(
    configurations=(),  # the check's Setups, built for each check
    right=absorbed,
    mistakes=tuple(Buggy(message, message, partial(absorbed, **kw)) for kw, message in MISTAKES),
    praise="Your absorbed pass equals forward's output; no latent expanded.",
    unknown="The output is not the absorbed one, and no catalogued mistake explains it: "
    "see hint(2).",
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


class Setup:
    """A module the check builds, seeded, and its input; the layers and methods of :data:`CALLS`
    note in ``calls`` when they run (the references never call them)."""

    def __init__(self, d_in, d_out, heads, latent, tokens, bias, seed, dropout, calls):
        torch.manual_seed(seed)
        self.m = LatentAttention(d_in, d_out, tokens, dropout, heads, latent, bias)
        self.m.train(dropout > 0)
        self.x = torch.randn(2, tokens, d_in)  # (2, tokens, d_in)
        for name in CALLS:  # an instance attribute shadows the method
            owner, method = (getattr(self.m, name), "forward") if name[0] == "W" else (self.m, name)
            spied = getattr(owner, method)
            setattr(owner, method, lambda *a, n=name, f=spied: calls.add(n) or f(*a))


@never_raises
def check_absorbed(answer):
    """Accept ``answer(module, x)`` if it is absorbed's output within :func:`.reference.same`,
    on every setup, without the book's method or the up-projections."""
    calls = set()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        setups = tuple(Setup(*config, calls) for config in CONFIGS)
        with Watch():  # dropout drops the same entries however the answer batches them
            try:
                for s in setups:
                    s.output = answer(s.m, s.x)
            except NotImplementedError:
                return CheckResult(False, START)
            except Exception as error:
                shapes = "shape" in str(error) or "size" in str(error)  # e.g. a block transposed
                return CheckResult(
                    False, f"Your function failed: {describe_error(error)}" + SHAPES * shapes
                )
            if calls:
                return CheckResult(
                    False, f"Your function {next(CALLS[n] for n in CALLS if n in calls)}"
                )
            return run_catalogue(replace(ABSORBED, configurations=setups), attrgetter("output"))
