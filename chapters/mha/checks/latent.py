"""Chapter 8's check: :mod:`.latent_catalogue` on the core, the tensors an answer makes watched
(:class:`.core.Seen`) for keys or values formed and the step that first differs; helpers named."""

from functools import partial

import torch
import torch.nn.functional as F

from ..latent import LatentAttention
from .catalogue import Buggy, Catalogue, run_catalogue
from .core import CheckResult, Seen, Step, attempt, describe_error, never_raises
from .latent_catalogue import MISTAKES, absorbed
from .shortcuts import book_calls
from .watch import Watch

PRAISE = "Your absorbed pass equals forward's output, and it formed no keys and no values."
HINTS = {"absorbed queries": 1, "scores": 2, "weights": 2, "combined latents": 2, "output": 3}
#: d_in, d_out, heads, latent_dim, tokens, context_length, qkv_bias, seed, dropout, training.
CONFIGS = ((5, 12, 3, 6, 5, 5, False, 1, 0.0, False),
           (4, 8, 4, 3, 4, 6, True, 2, 0.25, False),  # eval with dropout; x shorter than the mask
           (6, 12, 4, 5, 5, 5, False, 3, 0.25, True))  # fmt: skip  # p ≠ 0.5: see watch.mask_for
CALLS = {  # what a function that runs these, which do the work for it, is told
    "LatentAttention.absorbed": "calls module.absorbed, the book's own method.",
    "LatentAttention.forward": "calls module(x), the book's forward.",
    "MultiHeadAttention.forward": "runs the MultiHeadAttention that as_multi_head(module) builds:"
    " it forms keys from the composed weights, the opposite of a fold.",
    "LatentCache.append": "runs latent_step or generate_latent, the book's own steps.",
    "LatentAttention.up_key_blocks": "calls module.up_key_blocks(): cut the blocks yourself.",
    "LatentAttention.value_out_blocks": "calls module.value_out_blocks(), the book's value fold.",
    "keys and values": "formed the keys and the values: fold W_up_key into the queries and "
    "W_up_value into out_proj instead.",
    "keys": "formed the keys: fold W_up_key into the queries instead.",
    "values": "formed the values: fold W_up_value into out_proj instead.",
}
START = "The starting code: what must head h's query q become to score the latents? See hint(1)."
SHORT = "Your function fails on an input shorter than context_length ({error}): use mask[:T, :T]."


def forms(t, turned=False):
    """``t`` (b, H, T, n) as an answer may make it: so, with tokens before heads, or one head's;
    ``turned``, each with its last two axes swapped too (keys made as B.T @ latents.T)."""
    found = (t, t.transpose(1, 2), *t.unbind(1)) if t.dim() == 4 else (t,)
    return found + tuple(f.mT for f in found) if turned else found


def stage(name, s):
    """Step ``name`` of the absorbed pass on setup ``s``, each of its tensors in :func:`forms`."""
    absorbed(s, stages=(found := {}))
    return [f for t in (found[name] if name == "scores" else [found[name]]) for f in forms(t)]


STEPS = tuple(Step(f"the {name}", hint, partial(stage, name)) for name, hint in HINTS.items())
UNKNOWN = "Your output is not forward's, and no catalogued mistake explains it."
# fmt: off
TURNED = (" Your blocks of W_up_key are turned, (H, latent_dim, head_dim): a head's query "
          "(head_dim wide) multiplies its block as view(H, hd, -1) gives it, (hd, latent_dim).")
HEADLESS = (" Your latents have no head axis: (b, T, c) against the heads' (b, H, T, c) pairs "
            "the batch with the heads. latents.unsqueeze(1), (b, 1, T, c), serves every head.")
SHAPES = (
    " The shapes: queries (b, H, T, hd) @ W_up_key's blocks (H, hd, c) → (b, H, T, c); @ "
    "latents turned (b, 1, c, T) → scores (b, H, T, T); weights @ latents (b, 1, T, c) → "
    "(b, H, T, c); @ the folds (H, d_out, c) turned → (b, H, T, d_out), summed over H."
)
# fmt: on


def failed_product(failed, m, x):
    """What a failed product of setup ``(m, x)`` shows: a block turned, latents with no head
    axis (named from the two shapes it was given), else every step's shapes."""
    (op, shapes), (b, T), (H, hd, c) = failed, x.shape[:2], (m.num_heads, m.head_dim, m.latent_dim)
    given = shapes[1] if "matmul" in op and len(shapes) == 2 else None
    named = {(H, c, hd): TURNED, (b, c, T): HEADLESS, (b, T, c): HEADLESS}
    return named.get(given, SHAPES)


def setup(d_in, d_out, heads, latent, tokens, context, bias, seed, dropout, training):
    """A module, seeded, and its input."""
    torch.manual_seed(seed)
    m = LatentAttention(d_in, d_out, context, dropout, heads, latent, bias).train(training)
    return m, torch.randn(2, tokens, d_in)  # x: (2, tokens, d_in)


@never_raises
def check_absorbed(answer):
    """Accept ``answer(module, x)`` if it computes absorbed's output on every setup, by itself:
    no book forward or helper, no keys or values formed."""
    outputs = []

    def run(s):  # the answer on setup s, the keys and values it forms noted
        m, x = s
        latents = m.W_down_kv(x)  # (b, T, c)
        layers = (("keys", m.W_up_key), ("values", m.W_up_value))
        made = {n: forms(m.split_heads(F.linear(latents, la.weight)), True) for n, la in layers}
        with Seen(made) as w:
            outputs.append(attempt(answer, m, x))
        both = ["keys and values"] if len(w.appeared) == 2 else []
        calls.extend([*w.appeared, *both])  # "keys", "values"
        return outputs[-1]

    watch = Watch(p=CONFIGS[-1][8])  # the training configuration's dropout, by hand too
    with torch.random.fork_rng(devices=[]), torch.no_grad(), watch, book_calls() as calls:
        setups = tuple(setup(*config) for config in CONFIGS)  # Watch: the dropout
        mistakes = tuple(Buggy(told, told, partial(absorbed, **kw)) for kw, told in MISTAKES)
        catalogue = Catalogue(setups, absorbed, mistakes, PRAISE, UNKNOWN, steps=STEPS)
        found = run_catalogue(catalogue, run)
        if watch.failed and any(isinstance(o, Exception) for o in outputs):  # a torch call
            failing = setups[next(i for i, o in enumerate(outputs) if isinstance(o, Exception))]
            found = CheckResult(False, found.feedback + failed_product(watch.failed, *failing))
        (m, x), error = setups[1], outputs[1]  # the input shorter than the mask
        full = attempt(answer, m, torch.randn(2, len(m.mask), x.shape[-1]))  # one as long
        short = isinstance(error, Exception) and not isinstance(full, Exception)
        short = short and SHORT.format(error=describe_error(error))
        told = next((f"Your function {CALLS[n]}" for n in CALLS if n in calls), short)
        told = START if isinstance(outputs[0], NotImplementedError) else told or found.feedback
    return CheckResult(found.passed and told == found.feedback, told)
