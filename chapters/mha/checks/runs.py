"""Chapters 5 and 6's class practices, checked alike: the reader's class is built and run on each
configuration under a :class:`.shortcuts.Watch`, then judged against buggy references, in eval
mode and then in training mode. A :class:`Practice` is one exercise's data."""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .core import CheckResult, describe_error
from .reference import same
from .shortcuts import Watch, book_calls, refusal


class Run:
    """The reader's class built with ``kwargs`` (seeded) and called on a seeded input, in eval
    mode then in training mode, watched; the reader's random state left alone."""

    def __init__(self, cls, kwargs, tokens, seed):
        self.kwargs, self.tokens, self.p = kwargs, tokens, kwargs["dropout"]
        self.call = f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        seeded = torch.Generator().manual_seed(1000 + seed)
        self.x = torch.randn(2, tokens, kwargs["d_in"], generator=seeded)  # (2, tokens, d_in)
        self.module = self.output = self.trained = self.error = None
        self.watch, self.stage, self.error_text = Watch(), "constructor", ""
        with torch.random.fork_rng(devices=[]), torch.no_grad(), book_calls() as self.calls:
            try:
                torch.manual_seed(seed)
                self.module, self.stage = cls(**kwargs), "forward"
                with self.watch:
                    self.output, self.stage = self.module.eval()(self.x), "training"
                    self.trained, self.stage = self.module.train()(self.x), None
            except Exception as error:
                self.error, self.error_text = error, describe_error(error).rstrip(".")

    def again(self, bump=0.0, seed=None):
        """In eval mode with the kernel's result bumped; with a seed, in training mode for real."""
        with torch.random.fork_rng(devices=[]), torch.no_grad(), contextlib.ExitStack() as stack:
            stack.enter_context(Watch(bump)) if seed is None else torch.manual_seed(seed)
            return self.module.train(seed is not None)(self.x)

    def facts(self, layers):
        """What messages quote: sizes, ``layers`` missing, the output, the call that failed."""
        op, shapes, strides = self.watch.failed or ("", [], [])
        missing = ", ".join(name for name in layers if not hasattr(self.module, name))
        kw, raised = self.kwargs, self.stage == "forward" and str(self.error)
        H, T, ctx = kw["num_heads"], self.tokens, kw["context_length"]
        return dict(kw, H=H, hd=kw["d_out"] // H, T=T, ctx=ctx, p=self.p, module=self.module,
                    error=self.error_text, raised=raised, op=op, shapes=shapes, strides=strides,
                    heads={s[1] for s in shapes if len(s) == 4}, want=(2, T, kw["d_out"]),
                    shape=tuple(getattr(self.output, "shape", ())), call=self.call, missing=missing,
                    kind=f"a {type(self.output).__name__}",
                    unsliced=raised and T < ctx and f"({ctx})" in raised)  # fmt: skip


TROUBLE = (  # what raised or came out wrong, before the output's values: (holds, what to say)
    (lambda f: f["missing"], "The check could not use your instance's {missing}: keep them."),
    (lambda f: f["unsliced"], "On {T} tokens, fewer than context_length={ctx}, your forward raised"
     " {error}: cut the mask to the input's length, self.mask[:num_tokens, :num_tokens]."),
    (lambda f: f["raised"], "Your forward raised {error} on an input of shape (2, {T}, {d_in})."),
    (lambda f: f["shape"] in ((2, f["H"], f["T"], f["hd"]), (2, f["T"], f["H"], f["hd"])), "Your "
     "forward returned shape {shape}: the heads are still separate. Merge them: {want}."),
    (lambda f: f["shape"] != f["want"], "Your class returned {kind}, not a tensor of shape "
     "(b, num_tokens, d_out), here {want}."))  # fmt: skip
PLACES = (  # where a training-mode output drops, as a buggy reference, and what to say
    (None, "Your output is right in eval mode, but in training mode it is the same: no dropout, "
     "although the module was built with dropout={p}."),
    ("values", "In training mode dropout acts on the values, not on whole attention weights."),
    ("heads", "In training mode dropout acts on each head's context: on the merged context."),
    ("context", "In training mode dropout acts on the merged context, after the weights."),
    ("output", "In training mode single numbers of your output are dropped: after out_proj."),
)  # fmt: skip
NAN = "In training mode your output has nan: dropout hit the masked scores (-inf times 0)."
NOISE = "In training mode your output changes, but not as dropout does: noise, not dropout."
SAME = "In training mode two calls gave the same output: do not reseed, dropout draws anew."
BUILD = "Building your class as {call} raised {error}. Keep the constructor of {start}: subclass "
BUILD += "it and write only forward."
UNKNOWN = "Your output has the right shape but not the right values (largest difference {gap:.3g})"
UNKNOWN += ", and no usual mistake explains it. Check each step: "


@dataclass(frozen=True)
class Practice:
    """A class practice: the reader starts from ``start`` (subclasses it, when ``own``). A run is
    asked in order: ``torch(watch)``, ``early`` (``(holds(facts), message)`` pairs), :data:`TROUBLE`;
    is it ``reference(run)``, or which of ``mistakes`` (``(changes, message)``, then the steps)
    does it follow; ``after(run)``; dropout in training."""

    check: str
    start: type
    own: bool
    keys: tuple  # the constructor's arguments, by name
    rows: tuple  # configurations: the arguments' values, then qkv_bias, then num_tokens
    layers: tuple  # the layers the reference reads
    reference: Callable  # reference(run, **changes): the output, or a buggy one
    mistakes: tuple
    starting: str  # when the forward raises NotImplementedError, as the starting code does
    inherited: str  # for a class whose forward is the starting point's
    delegates: str  # when the forward ran the book's ``{}``
    torch: Callable  # what to say about the torch attention a watch saw, if anything
    belongs: str  # where dropout belongs
    praise: str
    early: tuple = ()
    facts: Callable = lambda facts: facts  # the exercise's own facts added
    after: Callable = lambda run: None
    quiet: bool = False  # the starting code told without the configuration


def _first(pairs, holds):
    return next((message for key, message in pairs if holds(key)), None)


def _follows(output, p, run, changes):
    try:
        return same(output, p.reference(run, **changes))
    except Exception:  # a buggy reference that cannot run on this module matches nothing
        return False


def verdict(p, run):
    """What to say about ``run``, or None when it is right in every way ``p`` asks."""
    facts = run.facts(p.layers) | dict(start=p.start.__name__)
    if run.stage == "constructor":
        return BUILD.format(**facts)
    if run.calls:
        return p.delegates.format(run.calls[0])
    if run.stage == "forward" and isinstance(run.error, NotImplementedError):
        return p.starting
    facts = p.facts(facts)
    if text := p.torch(run.watch) or _first(p.early + TROUBLE, lambda holds: holds(facts)):
        return text.format(**facts)
    with torch.no_grad():
        right = p.reference(run)
        if not same(run.output, right):
            gap = float((run.output.double() - right).abs().nan_to_num(torch.inf).max())
            found = _first(p.mistakes[:-1], lambda changes: _follows(run.output, p, run, changes))
            return (found or UNKNOWN + p.mistakes[-1]).format(gap=gap, **facts)
        if run.stage == "training":
            return f"Your output is right in eval mode; in training it raised {run.error_text}."
        if text := p.after(run):
            return text
        if same(run.trained, p.reference(run, drop="weights")):
            return SAME if run.p and torch.equal(run.again(seed=1), run.again(seed=2)) else None
        found = _first(PLACES, lambda place: _follows(run.trained, p, run, {"drop": place}))
        found = found or (NAN if run.trained.isnan().any() else NOISE)
        return f"{found.format(**facts)} {p.belongs}"


def check_practice(p, cls):
    """The verdict on the reader's ``cls``: a refusal, or the first failing run's, with its
    configuration (not when the constructor raised, nor the starting code when ``p.quiet``)."""
    if text := refusal(cls, p.check, p.start, p.own, p.inherited):
        return CheckResult(False, text)
    for seed, (*values, bias, tokens) in enumerate(p.rows, 1):
        kwargs = dict(zip(p.keys, values), **({"qkv_bias": True} if bias else {}))
        run = Run(cls, kwargs, tokens, seed)
        if text := verdict(p, run):
            quiet = run.stage == "constructor" or p.quiet and text == p.starting
            return CheckResult(False, text + ("" if quiet else f"\n(Seen with {run.call}.)"))
    return CheckResult(True, p.praise)
