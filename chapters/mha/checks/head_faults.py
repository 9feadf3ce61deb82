"""What one head of chapter 2's wrapper computes and how it was built, in words: the facts of
:class:`.wrapper_args.Attempt` about a single head (:func:`is_head`, :func:`reshaped`,
:func:`head_fault`)."""

import torch

from .core import describe_error, listed
from .reference import PROJECTIONS, Recipe, attend, project, same

#: The chapter's batch: two sequences of six tokens three values wide.
PROBE = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(2024))  # (b, tokens, d_in)


def is_head(module):
    """Whether ``module`` has its own query, key and value projections, as a head has."""
    layers = [getattr(module, name, None) for name in PROJECTIONS]
    return isinstance(module, torch.nn.Module) and all(
        isinstance(x, torch.nn.Linear) for x in layers
    )


def reshaped(heads):
    """How the heads differ from what the constructor builds, in words, or ``None``."""
    layers = [[getattr(head, name) for name in PROJECTIONS] for head in heads]
    for n, head in enumerate(layers, 1):
        for name, layer in zip(PROJECTIONS, head):
            if (rows := layer.weight.shape[0]) != (width := layer.out_features):
                has = f"its weight has {rows} row" + "s" * (rows != 1)
                return f"head {n}'s {name} says out_features={width}, but {has}"
    widths = [[layer.out_features for layer in head] for head in layers]
    for n, (q, k, v) in enumerate(widths, 1):
        if not q == k == v:
            return f"head {n}'s W_query, W_key and W_value are {q}, {k} and {v} values wide"
    if len({w[0] for w in widths}) > 1:
        numbers = listed(str(n) for n in range(1, len(widths) + 1))
        return f"heads {numbers} are {listed(str(w[0]) for w in widths)} values wide"
    return None


def head_fault(heads, refs, alone):
    """``(head number, how)`` for the first head that does not compute causal attention: from
    each head's right output (``refs``) and its own outputs on the batch and on the batch with
    its last token changed (``alone``), where earlier tokens must not see the change."""
    changed = "no longer computes causal attention as it was built to:"
    for n, (head, right, (own, moved)) in enumerate(zip(heads, refs, alone), 1):
        if isinstance(own, Exception):
            return n, f"{changed} run on its own, it raised {describe_error(own)}"
        if own.shape == moved.shape and not same(own[:, :-1], moved[:, :-1]):
            return n, "lets tokens attend to later tokens: its causal mask was removed or altered"
        if not same(own, right):
            return n, f"{changed} {how_it_differs(head, own, len(heads))}"
    return None


def how_it_differs(head, own, num_heads):
    """The one change to causal attention that gives the head's output ``own``, in words."""
    with torch.no_grad():
        q, k, v = project(head, PROBE)  # each (b, num_tokens, d_out)
    d, total = k.shape[-1], num_heads * k.shape[-1]
    cut = "it cuts its queries and keys to their {} {} of {} columns before the scores: a narrower "
    cut += "head comes from a smaller d_out, not from slicing"
    ends = [("first", n, slice(0, n)) for n in range(1, d)]
    ends += [("last", n, slice(d - n, d)) for n in range(1, d)]
    tries = [(cut.format(end, n, d), part, s) for end, n, part in ends for s in (n**0.5, d**0.5)]
    scaled = "its scores are {}, where causal attention divides them by √d_out = √" + str(d)
    whole = f"divided by √{total}, the square root of the whole output's width"
    scales = [
        (f"divided by d_out = {d}", d),
        (whole, total**0.5),
        ("divided by √d_in = √3", 3**0.5),
    ]
    tries += [(scaled.format(what), slice(None), s) for what, s in scales]
    for how, part, scale in tries:
        if same(own, attend(q[..., part], k[..., part], v, Recipe(scale=scale))):
            return how
    return "its output differs from the softmax of its own scaled, causally masked scores"
