"""Chapter 8's check: :mod:`.latent_catalogue` on the core, the tensors an answer makes watched
(:class:`Made`) for keys or values formed and the step that first differs; book helpers named."""

import contextlib
from functools import partial
from unittest import mock

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ..latent import LatentAttention, LatentCache
from .core import CheckResult, attempt, describe_error, never_raises
from .latent_catalogue import MISTAKES, absorbed
from .reference import Buggy, Catalogue, run_catalogue, same
from .shortcuts import Watch, book_calls

PRAISE = "Your absorbed pass equals forward's output; W_up_key and W_up_value never ran as layers."
HINTS = {"absorbed queries": 1, "scores": 2, "weights": 2, "combined latents": 2, "output": 3}
#: d_in, d_out, heads, latent_dim, tokens, context_length, qkv_bias, seed, dropout, training.
CONFIGS = (
    (5, 12, 3, 6, 5, 5, False, 1, 0.0, False),
    (4, 8, 4, 3, 4, 6, True, 2, 0.5, False),  # eval with dropout, an input shorter than the mask
    (6, 12, 4, 5, 5, 5, False, 3, 0.5, True),
)
CALLS = {  # what a function that runs these, which do the work for it, is told
    "LatentAttention.absorbed": "calls module.absorbed, the book's own method.",
    "LatentAttention.forward": "calls module(x), the book's forward.",
    "MultiHeadAttention.forward": "runs a MultiHeadAttention, as as_multi_head(module) builds: "
    "keys formed from composed weights, the opposite of a fold.",
    "LatentCache.append": "runs latent_step or generate_latent, the book's own steps.",
    "LatentAttention.up_key_blocks": "calls module.up_key_blocks(): cut the blocks yourself.",
    "LatentAttention.value_out_blocks": "calls module.value_out_blocks(), the book's value fold.",
    "keys": "formed the keys: fold W_up_key into the queries instead.",
    "values": "formed the values: fold W_up_value into out_proj instead.",
}
HELPERS = ((LatentAttention, "up_key_blocks"), (LatentAttention, "value_out_blocks"),
           (LatentCache, "append"))  # fmt: skip
START = "The starting code: which weight turns head h's query into a latent's partner? See hint(1)."
SHORT = "Your function fails on an input shorter than context_length ({error}): use mask[:T, :T]."


class Made(TorchFunctionMode):
    """While on, keeps every tensor made in ``tensors`` (a watch: it changes nothing)."""

    def __init__(self):
        super().__init__()
        self.tensors = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.tensors.append(made := func(*args, **(kwargs or {})))
        return made


def among(reference, made):
    """Whether ``made`` holds ``reference``, (b, H, T, n): in that layout, with tokens before
    heads, or one head's (b, T, n), as a loop over heads makes them."""
    forms = (reference, reference.transpose(1, 2), *reference.unbind(1))
    return any(same(t, form) for t in made for form in forms)


def setup(d_in, d_out, heads, latent, tokens, context, bias, seed, dropout, training):
    """A module, seeded, and its input."""
    torch.manual_seed(seed)
    m = LatentAttention(d_in, d_out, context, dropout, heads, latent, bias).train(training)
    return m, torch.randn(2, tokens, d_in)  # x: (2, tokens, d_in)


def where(s, made):
    """The step after the last one the answer got right on setup ``s`` (``made``: its tensors)."""
    absorbed(s, stages=(stages := {}))
    names = list(HINTS)
    last = max((i for i, n in enumerate(names[:-1]) if among(stages[n], made)), default=-1)
    right = f"Your {names[last]} are right, but your" if last >= 0 else "Your"
    step = names[last + 1]
    return f"{right} {step} differ, and no catalogued mistake explains it: see hint({HINTS[step]})."


@never_raises
def check_absorbed(answer):
    """Accept ``answer(module, x)`` if it computes absorbed's output on every setup, by itself:
    no book forward or helper, no keys or values formed."""
    runs = []

    def run(s):  # the answer on setup s, the tensors it makes kept
        with Made() as made:
            runs.append((s, attempt(answer, *s), made.tensors))
        return runs[-1][1]

    with torch.random.fork_rng(devices=[]), torch.no_grad(), Watch(), book_calls() as calls:
        with contextlib.ExitStack() as noting:  # the book's helpers that do the work, noted
            for cls, name in HELPERS:
                told, method = f"{cls.__name__}.{name}", getattr(cls, name)
                noted = partial(lambda t, f, *a: calls.append(t) or f(*a), told, method)
                noting.enter_context(mock.patch.object(cls, name, noted))
            setups = tuple(setup(*config) for config in CONFIGS)  # Watch: the dropout
            start = isinstance(attempt(answer, *setups[0]), NotImplementedError)
            mistakes = tuple(Buggy(told, told, partial(absorbed, **kw)) for kw, told in MISTAKES)
            found = run_catalogue(Catalogue(setups, absorbed, mistakes, PRAISE, ""), run)
        for (m, x), _, made in runs:  # the setup's keys and values, formed by the answer?
            latents = m.W_down_kv(x)  # (b, T, c)
            for name, layer in (("keys", m.W_up_key), ("values", m.W_up_value)):
                if among(m.split_heads(F.linear(latents, layer.weight)), made):
                    calls.append(name)
        (m, x), error = setups[1], runs[1][1]  # the input shorter than the mask
        full = attempt(answer, m, torch.randn(2, len(m.mask), x.shape[-1]))  # one as long
        short = isinstance(error, Exception) and not isinstance(full, Exception)
        short = short and SHORT.format(error=describe_error(error))
        wrong = next((r for r in runs if not same(r[1], attempt(absorbed, r[0]))), runs[0])
        told = next((f"Your function {CALLS[n]}" for n in CALLS if n in calls), None)
        told = START if start else told or short or found.feedback or where(wrong[0], wrong[2])
    return CheckResult(found.passed and told == found.feedback, told)
