"""Chapters 1, 3, 5 and 6's class practices: a :class:`Practice`'s data, run and judged alike."""

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .core import CheckResult, attempt, first_difference, never_raises, told_result
from .reference import same
from .runs import TROUBLE, Run
from .shortcuts import refusal, torch_message

TRAINING = "Right in eval mode, but in training mode (after module.train()) it raised {error}."
NOT_WRITTEN = ("Your forward still raises NotImplementedError: this is the starting code, and the "
               "forward pass is yours to write.")  # fmt: skip
NOT_WEIGHTS = "In training mode your output is not what dropout of whole attention weights gives"
WHERE = (f"{NOT_WEIGHTS}: no dropout (no attention weight is ever dropped), dropout on the "
         "scores (nan: -inf times 0), the values, context or output, drops twice, or is noise, not "
         "dropout.")  # fmt: skip
SAME = "In training mode two calls gave the same output: do not reseed, dropout draws anew."
UNKNOWN = "Right shape, wrong values, and no mistake this check knows."
DELEGATES = ("Your forward hands its work to the book's {calls}, so it does not compute "
             "attention itself. Write the steps in your own forward, from your class's own "
             "layers.")  # fmt: skip


@dataclass(frozen=True)
class Practice:
    """A class practice from ``start``: its configurations, references and messages."""

    start: type
    rows: tuple  # configurations: the arguments' values, then qkv_bias (0 or 1), then num_tokens
    starting: str  # when the forward raises NotImplementedError, as the starting code does
    praise: str
    own: object = None  # what the class must be built on: see :func:`.shortcuts.refusal`
    inherited: str = None  # for a class whose forward is the starting point's (None: run it)
    judge: Callable = None  # judge(p, run): what is wrong with one run, or None (None: verdict)
    reference: Callable = None  # reference(run, **changes): the output, or a buggy one
    mistakes: tuple = ()
    torch: str = ""
    kernel: bool = True
    belongs: str = ""  # where dropout belongs
    keys: tuple = ("d_in", "d_out", "context_length", "dropout", "num_heads")  # rows' arguments
    early: tuple = ()
    after: Callable = lambda run: None
    trained: tuple = ()  # in training mode: (changes, message) rows, dropout's wrong places
    steps: tuple = ()  # core.Step(name, hint, right(run)): where an unknown answer first differs
    quiet: bool = False  # the starting code told without the configuration


def verdict(p, run):
    """What is wrong with ``run``, or None: the shortcuts, then what raised or has the wrong shape
    (``(holds(facts), message)``; ``holds`` may add facts), then the output's values."""
    facts = run.facts() | dict(start=p.start.__name__)
    if run.calls:
        return DELEGATES.format(calls=" and ".join(sorted(set(run.calls))))
    if run.stage == "forward" and isinstance(run.error, NotImplementedError):
        return p.starting
    if text := torch_message(run.watch, p.torch, p.kernel):
        return text
    for holds, message in TROUBLE[:2] + p.early + TROUBLE[2:]:  # the constructor, the batch first
        if found := holds(facts):
            return message.format(**facts | (found if isinstance(found, dict) else {}))
    if text := told_result(run.output, facts["want"]):
        return text
    with torch.no_grad():
        if not follows(run.output, p, run, {}):  # a reference that cannot run: unknown
            buggy = (m for changes, m in p.mistakes[:-1] if follows(run.output, p, run, changes))
            if found := next(buggy, None):
                return found.format(**facts)
            where = first_difference(p.steps, run, lambda: run.module.eval()(run.x))
            return (UNKNOWN + (where or f" Check: {p.mistakes[-1]}")).format(**facts)
        if run.stage == "training":
            return TRAINING.format(**facts)
        if text := p.after(run):
            return text
        if not follows(run.trained, p, run, dict(drop=True)):
            buggy = (m for changes, m in p.trained if follows(run.trained, p, run, changes))
            return next(buggy, f"{WHERE} {p.belongs}").format(**facts)
        return SAME if run.p and torch.equal(run.again(seed=1), run.again(seed=2)) else None


def follows(output, p, run, changes):
    """Whether ``output`` is the buggy reference's (one that cannot run matches nothing)."""
    return same(output, attempt(p.reference, run, **changes))


def check_practice(p, cls):
    """The verdict on the reader's ``cls``: a refusal, or the first failing run's, with its
    configuration (not when the constructor raised, nor the starting code when ``p.quiet``)."""
    if text := refusal(cls, p.start, p.own, p.inherited):
        return CheckResult(False, text)
    for seed, (*values, bias, tokens) in enumerate(p.rows, 1):
        kwargs = dict(zip(p.keys, values), **{"qkv_bias": True} if bias else {})
        run = Run(cls, kwargs, tokens, seed, batch=3 if seed == len(p.rows) else 2)
        if text := (p.judge or verdict)(p, run) or run.afterwards():
            quiet = run.stage == "constructor" or p.quiet and text == p.starting
            seen = f"\n(Seen with {run.call}, on x of shape {tuple(run.x.shape)}.)"
            return CheckResult(False, text + ("" if quiet else seen))
    return CheckResult(True, p.praise)


def checker(p, name):
    """The check the reader calls, ``name(cls)``: :func:`check_practice` on ``p``; never raises."""
    doc = f"{name}(YourClass): runs your class and names the first mistake it finds."
    return never_raises(functools.partial(check_practice, p), name, doc)
