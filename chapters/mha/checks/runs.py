"""Chapters 5 and 6's class practices, checked alike (a :class:`Practice` is one's data): the class
is run on each configuration, watched, and its outputs compared with buggy references."""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .core import CheckResult, describe_error
from .reference import same
from .shortcuts import Watch, book_calls, refusal


class Run:
    """The reader's class built and called, seeded and watched, in eval then training mode."""

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

    def facts(self):
        """What messages quote: the sizes, the module and its output, the call that failed."""
        op, shapes, strides = self.watch.failed or ("", [], [])
        kw, raised = self.kwargs, self.stage == "forward" and str(self.error)
        H, T, ctx = kw["num_heads"], self.tokens, kw["context_length"]
        G, hd = kw.get("num_kv_groups", H), kw["d_out"] // H  # G key blocks, of n heads each
        return dict(kw, H=H, G=G, n=H // G, hd=hd, kv=G * hd, T=T, ctx=ctx, p=self.p, op=op,
                    error=self.error_text, raised=raised, shapes=shapes, strides=strides,
                    heads=raised and {s[1] for s in shapes if len(s) == 4}, call=self.call,
                    shape=tuple(getattr(self.output, "shape", ())), want=(2, T, kw["d_out"]),
                    width=getattr(getattr(self.module, "W_key", None), "out_features", G * hd),
                    module=self.module, output=self.output,
                    unsliced=raised and T < ctx and f"({ctx})" in raised)  # fmt: skip


TROUBLE = (  # what raised or came out wrong, before the output's values: (holds, what to say)
    (lambda f: f["stage"] == "constructor", "Building your class as {call} raised {error}. Keep "
     "the constructor of {start}: subclass it and write only forward."),
    (lambda f: f["unsliced"], "On {T} tokens, fewer than context_length={ctx}, your forward raised"
     " {error}: cut the mask to the input's length, self.mask[:num_tokens, :num_tokens]."),
    (lambda f: f["raised"], "Your forward raised {error} on an input of shape (2, {T}, {d_in})."),
    (lambda f: f["shape"] in ((2, f["H"], f["T"], f["hd"]), (2, f["T"], f["H"], f["hd"])), "Your "
     "forward returned shape {shape}: the heads are still separate. Merge them: {want}."),
    (lambda f: f["shape"] != f["want"], "Your class returned a {output.__class__.__name__}, not a "
     "tensor of shape (b, num_tokens, d_out), here {want}."))  # fmt: skip
CONTEXT = "In training mode dropout acts on the merged context, not on the weights."
PLACES = (  # where a training-mode output drops, as a buggy reference, and what to say
    (None, "In training mode your output is the eval one: no dropout, although dropout={p}."),
    ("values", "In training mode dropout acts on the values, not on whole attention weights."),
    ("heads", CONTEXT), ("context", CONTEXT),
    ("output", "In training mode single numbers of your output are dropped: after out_proj."),
)  # fmt: skip
NAN = "In training mode your output has nan: dropout hit the masked scores (-inf times 0)."
NOISE = "In training mode your output changes, but not as dropout does. That is noise, not dropout."
SAME = "In training mode two calls gave the same output: do not reseed, dropout draws anew."
UNKNOWN = "Right shape, wrong values (largest difference {gap:.3g}), no known mistake. Check: "


@dataclass(frozen=True)
class Practice:
    """A class practice from ``start`` (subclassed if ``own``). A run is asked: ``torch(watch)``,
    ``early`` and :data:`TROUBLE` (``(holds(facts), message)``); ``reference(run)``, else which of
    ``mistakes`` (``(changes, message)``, then steps) it follows; ``after(run)``; dropout."""

    start: type
    own: bool
    keys: tuple  # the constructor's arguments, by name
    rows: tuple  # configurations: the arguments' values, then qkv_bias (0 or 1), then num_tokens
    reference: Callable  # reference(run, **changes): the output, or a buggy one
    mistakes: tuple
    starting: str  # when the forward raises NotImplementedError, as the starting code does
    inherited: str  # for a class whose forward is the starting point's
    delegates: str  # when the forward ran the book's ``{}``
    torch: Callable  # what to say about the torch attention a watch saw, if anything
    belongs: str  # where dropout belongs
    praise: str
    early: tuple = ()
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
    facts = run.facts() | dict(start=p.start.__name__, stage=run.stage)
    if run.calls:
        return p.delegates.format(run.calls[0])
    if run.stage == "forward" and isinstance(run.error, NotImplementedError):
        return p.starting
    asked = TROUBLE[:1] + p.early + TROUBLE[1:]  # a constructor that raised first
    if text := p.torch(run.watch) or _first(asked, lambda holds: holds(facts)):
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
    if text := refusal(cls, p.start, p.own, p.inherited):
        return CheckResult(False, text)
    for seed, (*values, bias, tokens) in enumerate(p.rows, 1):
        kwargs = dict(zip(p.keys, values), **{"qkv_bias": True} if bias else {})
        if text := verdict(p, run := Run(cls, kwargs, tokens, seed)):
            quiet = run.stage == "constructor" or p.quiet and text == p.starting
            return CheckResult(False, text + ("" if quiet else f"\n(Seen with {run.call}.)"))
    return CheckResult(True, p.praise)
