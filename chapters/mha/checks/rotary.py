"""Chapter 9's check, a catalogue on the core: a cached step of RotaryAttention, each mistake a
buggy reference (:func:`step`) that turns the new query and key (or more) another way."""

from functools import partial
from unittest import mock

import torch

from .. import rotary
from .catalogue import Buggy, Catalogue, run_catalogue
from .core import CheckResult, Step, never_raises, same
from .rotary_reference import setup, step
from .watch import Watch

#: d_in, d_out, num_heads, rotary_dim, cached tokens, base, dropout (in eval mode), seed: partial
#: and whole-head turns; 299 cached tokens, where a table of angles in low precision is off.
CONFIGS = ((5, 12, 3, 2, 299, 10_000.0, 0.0, 1), (4, 16, 2, 4, 5, 100.0, 0.5, 2),
           (6, 24, 4, 6, 2, 500.0, 0.0, 3))  # fmt: skip


def stage(name, config):
    """Step ``name`` of the right step on a fresh ``setup(*config)`` (:func:`step`'s record)."""
    found = {}
    step(config, record=found)
    return found[name]


#: Where an answer no entry explains first differs (:func:`.core.first_difference`).
STEPS = tuple(Step(f"the {told}", hint, partial(stage, name)) for name, told, hint in (
    ("query", "new query turned at L", 2), ("key", "new key turned at L", 2),
    ("scores", "scores over the L + 1 keys", 3), ("weights", "weights (scale, softmax)", 3),
    ("context", "heads' joined context", 3)))  # fmt: skip


def stored(m, x, cache, length):
    """What is wrong with the cache after a step from ``length`` cached tokens, or None."""
    key = m.split_heads(m.W_key(x))  # (b, H, 1, hd), unturned
    if cache.length != length + 1:
        return APPENDS[min(cache.length - length, 2)]
    kept = cache.keys[:, :, length : length + 1]
    return UNTURNED if same(kept, key) else None if same(kept, m.turn(key, length)) else OTHER


SPLIT = "You turn before the head split: turn each head's (b, H, 1, head_dim) query and key."
WIDTH = "The angles are computed over {w}: pair i turns by p * base ** (-2i / rotary_dim)."
RATES = "Your rates {w}. Pair i turns by p * base ** (-2i / rotary_dim), i = 0, 1, ..."
START = ("Nothing turns: this is the starting code, or your turn is at position 0, which leaves a "
         "vector as it is. Which vectors turn, at which position? hint(1)")  # fmt: skip
# fmt: off
MISTAKES = (  # what each buggy reference does differently, and what to tell the reader
    (dict(turning=False), START),
    (dict(width="d_out"), WIDTH.format(w="d_out, all heads' width")),
    (dict(width="head"), WIDTH.format(w="head_dim; only rotary_dim entries turn, so use that")),
    (dict(width="whole head"), "Only each head's first rotary_dim entries turn; the rest pass."),
    (dict(layout="interleaved"), "Pairs (2i, 2i + 1) are the other layout: here (i, i + r/2)."),
    (dict(swap=True), "sin and cos are swapped: x1·cos − x2·sin, x2·cos + x1·sin."),
    (dict(sign=-1), "The turn goes the wrong way: x1·cos − x2·sin, x2·cos + x1·sin, not +, −."),
    (dict(values=True), "Values never turn: only the query and the key carry positions."),
    (dict(key=False), "Only the query turns: turn the new key too, at L, before cache.append."),
    (dict(base=10_000.0), "The angles use base 10,000: use module.base, each model has its own."),
    (dict(scale=0), "The scores are not divided by √head_dim (module.head_dim ** 0.5)."),
    *((dict(scale=w), f"The scores are divided by {shown}: divide by √head_dim, module.head_dim "
       "** 0.5.") for w, shown in (("d_out", "√d_out"), ("rotary_dim", "√rotary_dim"),
                                   (1, "head_dim"))),
    (dict(query=False), "Only the key turns: turn the new query too, at L, as the key."),
    (dict(attend="buffer"), "You attend to cache.keys' empty slots too: use what append returns."),
    (dict(low=True), "Angles in bfloat16 are off by a radian at position 299: use float32."),
    (dict(width="2r"), WIDTH.format(w="2 · rotary_dim, the 2 of 2i left out")),
    (dict(width="r/2"), WIDTH.format(w="rotary_dim / 2; i counts pairs and 2i doubles it")),
    (dict(dim=-2), "Softmax over dim=-2: a query's weights sum to 1 over the keys, dim=-1."),
    (dict(project=False), "No out_proj: the heads' joined context goes through module.out_proj."),
    (dict(at=1), "Position L + 1: read cache.length before the append, not after."),
    (dict(at=-1), "Position L − 1: the new token's position is L, cache.length itself."),
    (dict(at=1, key_at=-1), "The query turns at L + 1: read L before the append, for both alike."),
    (dict(key_at=1), "The key turns at L + 1: the query and the key both turn at L."),
    *((dict(at=at), f"The position is {told}; the new token's is L, cache.length.") for at, told
      in (("capacity", "the cache's room, not its length"), ("batch", "x.shape[0], the batch"),
          ("tokens", "x.shape[1], the one new token"))),
    (dict(heads_axis=True), "Turned along the heads axis: turn the (b, H, 1, hd) of split_heads."),
    (dict(again=True), "The cached keys turn again: they are stored turned; use them as they are."),
    (dict(attend="first"), "Only key 0 is attended (mask row 0): the token sees all L + 1 keys."),
    (dict(attend="self"), "Only the new key is attended: attend to all L + 1 keys append returns."),
    (dict(attend="cached"), "The new key is left out: the new token attends to all L + 1 keys."),
    (dict(values="key"), "The value is the turned key: the value comes from W_value, unturned."),
    (dict(row0=True), "Every batch row gets row 0's output: each row of x is its own sequence."),
    (dict(rates="reversed"), RATES.format(w="run backwards (the last pair turns fastest)")),
    (dict(rates="+2i"), RATES.format(w="grow with i (the exponent is +2i / rotary_dim)")),
    (dict(rates="from 1"), RATES.format(w="start at i = 1 (pair 0's rate is base ** 0 = 1)")),
    (dict(degrees=True), "Your angles are read as degrees: p * base ** (-2i / r) is in radians."),
    (dict(rest="dropped"), "The entries from rotary_dim on are lost: they pass through unturned."),
    (dict(rest="first"), "The untouched rest comes first: it goes after the turned pairs."),
    (dict(inplace=True), "x1 is overwritten in place before x2 uses it: use the old x1 for both."),
    (dict(flip=-1), "One sign is wrong: x2·cos + x1·sin, not − (a turn, not a reflection)."),
    (dict(layout="head half"), "Pair i is (i, i + rotary_dim / 2), not (i, i + head_dim / 2)."),
    *((dict(drop=p), "Dropout ran in eval mode: use module.dropout, which model.eval() stops.")
      for p in (True, 0.1)),
    *((dict(split_first=False, width=w), SPLIT) for w in ("rotary", "all")),
)
# fmt: on
PRAISE = "Your step equals RotaryAttention's forward at position L on every setup."
UNKNOWN = "Not RotaryAttention's output, and no catalogued mistake explains it."
BOOK = "Your step calls the book's turn (rotate, module.turn, module(x), rotary_step): write yours."
APPENDS = ("Your step leaves the cache as it was: cache.append(key, value) stores the new token's "
           "turned key and value, which every later step reads.", None,
           "Your step appends more than once: one cache.append(key, value) per token.")  # fmt: skip
UNTURNED = ("The cache holds the new key unturned: append the key turned at L, as the cache keeps "
            "every key; later steps read it as it is.")  # fmt: skip
OTHER = "Your output is right, but the cache holds another key than the new one turned at L."


@never_raises
def check_rotary_step(answer):
    """Accept ``answer(module, x, cache)`` if it computes the cached step of RotaryAttention."""
    calls, caches = [], []

    def watched(config):
        m, x, cache = setup(*config)
        length = cache.length
        with mock.patch.object(rotary, "check_start", lambda s: calls.append(s)):
            output = answer(m, x, cache)
        caches.append(stored(m, x, cache, length))
        return output

    with torch.random.fork_rng(devices=[]), torch.no_grad(), Watch():  # Watch: the dropout
        mistakes = tuple(Buggy(told, told, partial(step, **kw)) for kw, told in MISTAKES)
        found = Catalogue(CONFIGS, step, mistakes, PRAISE, UNKNOWN, steps=STEPS)
        result = run_catalogue(found, watched)
    if calls and result.feedback != START:
        return CheckResult(False, BOOK)
    unknown = result.feedback.startswith(UNKNOWN)  # a cache told only if it explains the output
    told = [c for c in caches if c and (result.passed or unknown and c != OTHER)]
    return CheckResult(False, told[0]) if told else result
