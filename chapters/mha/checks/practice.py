"""Chapters 1, 3, 5 and 6's class practices, checked alike (a :class:`Practice` is one's data):
the class is run on each configuration (:class:`.runs.Run`) and its outputs compared with buggy
references, in eval mode, then in training mode, where dropout drops fixed weights."""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .core import CheckResult
from .facts import attempt
from .reference import same
from .runs import TROUBLE, Run
from .shortcuts import refusal, torch_message

# fmt: off
CONTEXT = "In training mode dropout acts on the merged context, not on the weights."
PLACES = (  # where a training-mode output drops, as a buggy reference, and what to say
    ("values", "In training mode dropout acts on the values, not on whole attention weights."),
    ("heads", CONTEXT), ("context", CONTEXT),
    ("output", "In training mode single numbers of your output are dropped: after out_proj."),
    ("raw scores", "In training mode dropout acts before the softmax, on the scores."),
    ("twice", "In training mode kept weights are scaled by 1 / (1 - p) twice: dropout is applied "
     "twice."))
NONE = ("In training mode your output is the eval one: no dropout, although dropout={p}, so no "
        "attention weight is ever dropped.")
TRAINING = ("Your output is right in eval mode, but in training mode (after module.train()) it "
            "raised {error}.")
NAN = "In training mode your output has nan: dropout hit the masked scores (-inf times 0)."
NOISE = "In training mode your output changes, but not as dropout does. That is noise, not dropout."
SAME = "In training mode two calls gave the same output: do not reseed, dropout draws anew."
UNKNOWN = "Right shape, wrong values (largest difference {gap:.3g}), no known mistake. Check: "
# fmt: on


@dataclass(frozen=True)
class Practice:
    """A class practice from ``start`` (:func:`.shortcuts.refusal` says what ``own`` asks).
    ``judge(p, run)`` says what is wrong with a run, by default :func:`verdict`, which asks:
    ``torch(run)``, ``early`` and :data:`.runs.TROUBLE` (``(holds(facts), message)``, where
    ``holds`` may return more facts); ``reference(run)``, else which of ``mistakes``
    (``(changes, message)``, then steps) it follows; ``after(run)``; where it drops. PyTorch's
    attention is refused with ``torch`` (its fused kernel too, when ``kernel``)."""

    start: type
    own: object
    rows: tuple  # configurations: the arguments' values, then qkv_bias (0 or 1), then num_tokens
    starting: str  # when the forward raises NotImplementedError, as the starting code does
    praise: str
    inherited: str = None  # for a class whose forward is the starting point's (None: run it)
    judge: Callable = None
    reference: Callable = None  # reference(run, **changes): the output, or a buggy one
    mistakes: tuple = ()
    delegates: str = ""  # when the forward ran the book's ``{}`` (all of them: ``{calls}``)
    torch: str = ""  # what to write instead of PyTorch's attention
    kernel: bool = True  # whether its fused kernel is refused too
    belongs: str = ""  # where dropout belongs
    keys: tuple = ("d_in", "d_out", "context_length", "dropout", "num_heads")  # rows' arguments
    early: tuple = ()
    after: Callable = lambda run: None
    quiet: bool = False  # the starting code told without the configuration


def _first(pairs, holds):
    return next((message for key, message in pairs if holds(key)), None)


def _follows(output, p, run, changes):  # a buggy reference that cannot run matches nothing
    return same(output, attempt(p.reference, run, **changes))


def verdict(p, run):
    """What to say about ``run``, or None when it is right in every way ``p`` asks."""
    facts = run.facts() | dict(start=p.start.__name__, stage=run.stage)
    if run.calls:
        return p.delegates.format(run.calls[0], calls=" and ".join(sorted(set(run.calls))))
    if run.stage == "forward" and isinstance(run.error, NotImplementedError):
        return p.starting
    if text := torch_message(run.watch, p.torch, p.kernel):
        return text
    for holds, message in TROUBLE[:1] + p.early + TROUBLE[1:]:  # a constructor that raised first
        if found := holds(facts):
            return message.format(**facts | (found if isinstance(found, dict) else {}))
    with torch.no_grad():
        right = p.reference(run)
        if not same(run.output, right):
            gap = float((run.output.double() - right).abs().nan_to_num(torch.inf).max())
            found = _first(p.mistakes[:-1], lambda changes: _follows(run.output, p, run, changes))
            return (found or UNKNOWN + p.mistakes[-1]).format(gap=gap, **facts)
        if run.stage == "training":
            return TRAINING.format(**facts)
        if text := p.after(run):
            return text
        if same(run.trained, p.reference(run, drop="weights")):
            return SAME if run.p and torch.equal(run.again(seed=1), run.again(seed=2)) else None
        if same(run.trained, right):
            return NONE.format(**facts)
        found = _first(PLACES, lambda place: _follows(run.trained, p, run, {"drop": place}))
        found = found or (NAN if run.trained.isnan().any() else NOISE)
        return f"{found.format(**facts)} {p.belongs}"


def check_practice(p, cls):
    """The verdict on the reader's ``cls``: a refusal, or the first failing run's, with its
    configuration (not when the constructor raised, nor the starting code when ``p.quiet``)."""
    if text := refusal(cls, p.start, p.own, p.inherited):
        return CheckResult(False, text)
    for seed, (*values, bias, tokens) in enumerate(p.rows, 1):
        kwargs = dict(zip(p.keys, values), **{"qkv_bias": True} if bias else {})
        if text := (p.judge or verdict)(p, run := Run(cls, kwargs, tokens, seed)):
            quiet = run.stage == "constructor" or p.quiet and text == p.starting
            return CheckResult(False, text + ("" if quiet else f"\n(Seen with {run.call}.)"))
    return CheckResult(True, p.praise)
