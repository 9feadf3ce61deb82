"""Grouped-query attention, and the key/value cache it was made to shrink.

``GroupedQueryAttention`` keeps ``MultiHeadAttention``'s names and its query
split, but gives keys and values only ``num_kv_groups`` column blocks, each
shared by a group of consecutive heads. ``KVCache``, ``prefill`` and
``attend_to_cache`` run it one token at a time, as a model generates text:
the cache holds the keys and values of every earlier token, and its size is
what sharing them saves.
"""

import contextlib
import re

import torch
from torch import nn
from torch.nn.modules.module import (
    register_module_parameter_registration_hook,
)

from .predictions import Unreadable, read


def check_groups(d_in, d_out, context_length, num_heads, num_kv_groups):
    """Raise ``ValueError`` unless the sizes split into heads and groups."""
    sizes = dict(
        d_in=d_in,
        d_out=d_out,
        context_length=context_length,
        num_heads=num_heads,
        num_kv_groups=num_kv_groups,
    )
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            message = f"{name} must be a positive integer, got {value!r}."
            if name == "num_kv_groups":
                message += (
                    " Use num_kv_groups=1 for multi-query attention (all"
                    " heads share one key/value block), or num_kv_groups="
                    "num_heads for ordinary multi-head attention."
                )
            raise ValueError(f"GroupedQueryAttention: {message}")
    if d_out % num_heads:
        raise ValueError(
            f"GroupedQueryAttention: d_out={d_out} is not divisible by "
            f"num_heads={num_heads}, so the heads cannot split it evenly. "
            f"Choose d_out as a multiple of num_heads (e.g. "
            f"{num_heads * max(1, d_out // num_heads)})."
        )
    if num_heads % num_kv_groups:
        divisors = [g for g in range(1, num_heads + 1) if num_heads % g == 0]
        raise ValueError(
            f"GroupedQueryAttention: num_heads={num_heads} is not a multiple "
            f"of num_kv_groups={num_kv_groups}, so the heads cannot form "
            f"groups of equal size. Choose num_kv_groups among the divisors "
            f"of num_heads: {', '.join(map(str, divisors))}."
        )


def check_length(num_tokens, context_length):
    """Raise ``ValueError`` when the input is longer than the causal mask."""
    if num_tokens > context_length:
        raise ValueError(
            f"GroupedQueryAttention: the input has {num_tokens} tokens, more "
            f"than context_length={context_length}, the size of the causal "
            f"mask. Build the module with context_length >= {num_tokens}, "
            "or pass a shorter sequence."
        )


def check_one_token(x):
    """Raise ``ValueError`` unless ``x`` is one token per sequence."""
    if x.dim() != 3 or x.shape[1] != 1:
        raise ValueError(
            f"attend_to_cache takes one token, shape (b, 1, d_in), got "
            f"{tuple(x.shape)}. Pass x[:, t : t + 1] for token t."
        )


class GroupedQueryAttention(nn.Module):
    """Multi-head attention whose heads share keys and values in groups.

    The queries keep one block of head_dim columns per head, as in
    MultiHeadAttention. The keys and values have only num_kv_groups blocks;
    block g serves the group_size consecutive heads g * group_size, ...,
    (g + 1) * group_size - 1. num_kv_groups == num_heads is multi-head
    attention, num_kv_groups == 1 is multi-query attention.

    Shapes: b batch, T tokens, H heads, G key/value groups, hd head_dim.
    """

    def __init__(
        self,
        d_in,
        d_out,
        context_length,
        dropout,
        num_heads,
        num_kv_groups,
        qkv_bias=False,
    ):
        super().__init__()
        check_groups(d_in, d_out, context_length, num_heads, num_kv_groups)
        self.d_out = d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.head_dim = d_out // num_heads
        self.group_size = num_heads // num_kv_groups
        kv_width = num_kv_groups * self.head_dim
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        ones = torch.ones(context_length, context_length)
        self.register_buffer("mask", torch.triu(ones, diagonal=1).bool())

    def forward(self, x):
        b, num_tokens, _ = x.shape
        check_length(num_tokens, self.context_length)
        H, G, hd = self.num_heads, self.num_kv_groups, self.head_dim
        queries = self.W_query(x).view(b, num_tokens, H, hd)  # (b, T, H, hd)
        keys = self.W_key(x).view(b, num_tokens, G, hd)  # (b, T, G, hd)
        values = self.W_value(x).view(b, num_tokens, G, hd)  # (b, T, G, hd)
        queries = queries.transpose(1, 2)  # (b, H, T, hd)
        keys = keys.transpose(1, 2)  # (b, G, T, hd)
        values = values.transpose(1, 2)  # (b, G, T, hd)

        # Head h reads block h // group_size: each block is repeated in
        # place, once per head of its group (0, 0, 1, 1, not 0, 1, 0, 1).
        keys = keys.repeat_interleave(H // G, dim=1)  # (b, H, T, hd)
        values = values.repeat_interleave(H // G, dim=1)  # (b, H, T, hd)

        attn_scores = queries @ keys.transpose(2, 3)  # (b, H, T, T)
        future = self.mask[:num_tokens, :num_tokens]  # (T, T)
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        attn_weights = torch.softmax(attn_scores / hd**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context = (attn_weights @ values).transpose(1, 2)  # (b, T, H, hd)
        context = context.reshape(b, num_tokens, self.d_out)  # (b, T, d_out)
        return self.out_proj(context)  # (b, T, d_out)


@contextlib.contextmanager
def weights_on_meta():
    """Inside the ``with`` block, modules get parameters with shapes but no
    values: every parameter they register moves to PyTorch's "meta" device.

    So a Llama-sized layer can be counted without hundreds of MiB of weights
    and without drawing a random number. Buffers, such as the small causal
    mask, stay real. ``with torch.device("meta")`` would build the mask there
    too, and building it there runs PyTorch's Python shape checks, whose
    first use imports sympy and torch._dynamo: seconds of CPU.
    """

    def to_meta(module, name, param):
        return nn.Parameter(param.to("meta"), param.requires_grad)

    hook = register_module_parameter_registration_hook(to_meta)
    try:
        yield
    finally:
        hook.remove()


def kv_cache_bytes(
    num_layers,
    num_kv_groups,
    head_dim,
    num_tokens,
    batch=1,
    bytes_per_value=2,
):
    """Bytes of the key/value cache: keys and values of every token, for
    every layer and key/value group (2 bytes a value in 16-bit floats)."""
    values_per_token = 2 * num_layers * num_kv_groups * head_dim  # K and V
    return values_per_token * num_tokens * batch * bytes_per_value


class KVCache:
    """The keys and values of the tokens seen so far, for one attention layer.

    Room for max_tokens tokens is allocated once: keys and values are each
    (b, G, max_tokens, hd), and ``length`` says how many are filled.
    """

    def __init__(self, module, batch, max_tokens):
        shape = (batch, module.num_kv_groups, max_tokens, module.head_dim)
        dtype = module.W_key.weight.dtype
        self.keys = torch.zeros(shape, dtype=dtype)
        self.values = torch.zeros(shape, dtype=dtype)
        self.length = 0

    @property
    def nbytes(self):
        """The memory the cache holds, in bytes."""
        return self.keys.nbytes + self.values.nbytes

    def append(self, keys, values):
        """Store new (b, G, n, hd) keys and values after the others; return
        all of them so far, (b, G, length, hd) each."""
        b, g, _, hd = self.keys.shape
        for name, new in (("keys", keys), ("values", values)):
            shape = tuple(new.shape)
            if len(shape) != 4 or shape[:2] + shape[3:] != (b, g, hd):
                raise ValueError(
                    f"KVCache: {name} of shape {shape} do not fit a cache "
                    f"of ({b}, {g}, tokens, {hd}). Append (b, G, n, hd) "
                    f"{name}, here ({b}, {g}, n, {hd}): whole heads."
                )
        start, end = self.length, self.length + keys.shape[2]
        if end > self.keys.shape[2]:
            raise ValueError(
                f"KVCache: {end} tokens do not fit in a cache built for "
                f"{self.keys.shape[2]}. Build it with max_tokens >= {end}."
            )
        self.keys[:, :, start:end] = keys
        self.values[:, :, start:end] = values
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def rewind(self, length):
        """Forget every token after the first ``length`` (kept in place)."""
        if not 0 <= length <= self.length:
            raise ValueError(
                f"KVCache: cannot rewind to {length} tokens; the cache holds "
                f"{self.length}. Pass a length from 0 to {self.length}."
            )
        self.length = length


def prefill(module, prompt, cache):
    """Store the keys and values of a (b, P, d_in) prompt in ``cache``."""
    b, num_tokens, _ = prompt.shape
    G, hd = module.num_kv_groups, module.head_dim
    keys = module.W_key(prompt).view(b, num_tokens, G, hd)  # (b, P, G, hd)
    values = module.W_value(prompt).view(b, num_tokens, G, hd)
    cache.append(keys.transpose(1, 2), values.transpose(1, 2))


def attend_to_cache(module, x, cache):
    """The output for one new token x, (b, 1, d_in), which sees every cached
    token and itself. Its key and value join the cache, which then holds L
    tokens."""
    check_one_token(x)
    b = x.shape[0]
    G, n, hd = module.num_kv_groups, module.group_size, module.head_dim
    # The n heads of a group share its keys: stack their queries as the n
    # rows of one matrix per group, so that no key is copied.
    query = module.W_query(x).view(b, G, n, hd)  # (b, G, n, hd)
    key = module.W_key(x).view(b, G, 1, hd)  # (b, G, 1, hd)
    value = module.W_value(x).view(b, G, 1, hd)  # (b, G, 1, hd)
    keys, values = cache.append(key, value)  # (b, G, L, hd) each

    attn_scores = query @ keys.transpose(2, 3)  # (b, G, n, L)
    attn_weights = torch.softmax(attn_scores / hd**0.5, dim=-1)
    context = attn_weights @ values  # (b, G, n, hd)
    context = context.reshape(b, 1, module.d_out)  # (b, 1, d_out)
    return module.out_proj(context)  # (b, 1, d_out)


def generate(module, inputs, cache):
    """Feed (b, T, d_in) inputs one token at a time; return (b, T, d_out)."""
    outputs = []
    for t in range(inputs.shape[1]):
        outputs.append(attend_to_cache(module, inputs[:, t : t + 1], cache))
    return torch.cat(outputs, dim=1)  # (b, T, d_out)


def timing_verdict(name_a, times_a, name_b, times_b):
    """Compare two lists of timings, one per round: a verdict only when every
    round of one is faster than every round of the other, else inconclusive.

    Other programs can slow any round down, so rounds that overlap say
    nothing about which is faster. The speedup is given as the range of the
    round-by-round ratios (round i of one against round i of the other, timed
    side by side), not as one number: a busy round moves it.
    """
    if max(times_a) < min(times_b):
        ratios = _by_round(times_b, times_a)
        verdict = f"{name_a} is faster than {name_b} in every round"
        return f"{verdict}: {ratios}, round by round"
    if max(times_b) < min(times_a):
        ratios = _by_round(times_a, times_b)
        verdict = f"{name_b} is faster than {name_a} in every round"
        return f"{verdict}: {ratios}, round by round"
    return f"{name_a} vs {name_b}: inconclusive, their rounds overlap"


def _by_round(slower, faster, form="{:.1f}x"):
    """The range of slower[i] / faster[i], one ratio per round, as
    "2.5x to 2.9x", or one number when both ends print the same."""
    found = [s / f for s, f in zip(slower, faster, strict=True)]
    low, high = form.format(min(found)), form.format(max(found))
    return low if low == high else f"{low} to {high}"


def share_by_round(part_times, whole_times):
    """What share of whole_times[i] part_times[i] took, round by round, as
    "20% to 23%", or "22%" when every round prints the same."""
    return _by_round(part_times, whole_times, form="{:.0%}")


def scaling_verdict(what, base_times, scaled_times, factor):
    """Did ``factor`` times the work (``what``) cost less, or more, than
    ``factor`` times the time? A verdict only when every round of one side
    is below (or above) ``factor`` times every round of the other; else
    inconclusive, since other programs can slow any round down. The ratio is
    the range over rounds, as in :func:`timing_verdict`."""
    ratios = _by_round(scaled_times, base_times)
    took = f"{factor}x the {what} took {ratios} the time, round by round"
    if max(scaled_times) < factor * min(base_times):
        return f"{took}: less than {factor}x in every round"
    if min(scaled_times) > factor * max(base_times):
        return f"{took}: more than {factor}x in every round"
    return f"{took}, but the rounds overlap: inconclusive"


#: What separates the two lists in a prediction written without brackets:
#: "1 1 2 2 / 1 2 1 2", "1,1,2,2; 1,2,1,2", "1 1 2 2 and 1 2 1 2".
_LIST_BREAK = re.compile(r"\s*(?:/|;|\||\n|\band\b|\bvs\.?)\s*")


def _two_lists(text):
    """Text without brackets cut into the lists it separates; other text
    as it is."""
    if re.search(r"[\[\]()]", text):
        return text
    parts = [part for part in _LIST_BREAK.split(text.strip()) if part]
    return parts if len(parts) > 1 else text


def block_lists_match(prediction, answer):
    """Whether ``prediction`` names the blocks of ``answer``, a pair of lists
    of block numbers counted from 1 (as the chapter's figure labels them).

    The prediction is read as :func:`mha.predictions.read` reads a sequence
    ("[1, 1, 2, 2] and [1, 2, 1, 2]", "([1, 1, 2, 2], [1, 2, 1, 2])"), and
    two lists written without brackets are read too ("1 1 2 2 / 1 2 1 2").
    Counted from 0, as Python indexes them, is read too: the right answer
    uses blocks 1 and 2 in both lists, or 0 and 1 in both, so the two
    conventions cannot be confused. A prediction that is not two lists of
    block numbers ("yes") raises :class:`mha.predictions.Unreadable`: the
    reveal then says how to write one, instead of calling it wrong.
    """
    said = prediction
    if isinstance(prediction, str):
        said = _two_lists(prediction)
    from_zero = tuple([block - 1 for block in blocks] for blocks in answer)
    verdicts = []
    for convention in (tuple(answer), from_zero):
        try:
            verdicts.append(bool(read(said, convention)))
        except Unreadable:
            continue
        except Exception:  # an exotic object that cannot even be compared
            verdicts.append(False)
    if not verdicts:
        raise Unreadable(f"{prediction!r} is not two lists of block numbers")
    return any(verdicts)


#: The web page reads a typed guess with its own twin of this rule
#: (_static/guess.js).
block_lists_match.page_reader = "block_lists"
