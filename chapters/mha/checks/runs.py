"""One run of a class practice (:mod:`.practice`): the reader's class built and called, seeded and
watched, the facts messages quote, and what goes wrong before values are compared (``TROUBLE``)."""

import contextlib

import torch

from .class_answer import name_of
from .core import describe_error, kind_of
from .reference import PROJECTIONS
from .shortcuts import Watch, book_calls


class Run:
    """The reader's class built and called, seeded and watched, in eval then training mode."""

    def __init__(self, cls, kwargs, tokens, seed):
        self.kwargs, self.tokens, self.seed, self.p = kwargs, tokens, seed, kwargs["dropout"]
        self.call = f"{name_of(cls)}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
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
        op, shapes = self.watch.failed or ("", [])
        kw, raised = self.kwargs, self.stage == "forward" and str(self.error)
        H, T, ctx = kw["num_heads"], self.tokens, kw["context_length"]
        G, hd = kw.get("num_kv_groups", H), kw["d_out"] // H  # G key blocks, of n heads each
        return dict(kw, H=H, G=G, n=H // G, hd=hd, kv=G * hd, T=T, ctx=ctx, p=self.p, op=op,
                    error=self.error_text, raised=raised, shapes=shapes,
                    heads=raised and {s[1] for s in shapes if len(s) == 4}, call=self.call,
                    shape=tuple(getattr(self.output, "shape", ())), want=(2, T, kw["d_out"]),
                    returned=kind_of(self.output) if not torch.is_tensor(self.output) else
                    f"a tensor of shape {tuple(self.output.shape)}",
                    width=getattr(getattr(self.module, "W_key", None), "out_features", G * hd),
                    module=self.module, run=self,
                    unsliced=raised and T < ctx and f"({ctx})" in raised)  # fmt: skip


TROUBLE = (  # what raised or came out wrong, before the output's values: (holds, what to say)
    (lambda f: f["stage"] == "constructor", "Building your class as {call} raised {error}. Keep "
     "the constructor of {start}: subclass it and write only forward."),
    (lambda f: f["unsliced"], "On {T} tokens, fewer than context_length={ctx}, your forward raised"
     " {error}: cut the mask to the input's length, self.mask[:num_tokens, :num_tokens]."),
    (lambda f: "view size is not compatible" in (f["raised"] or ""), "Your forward raised {error}:"
     " view needs numbers in memory order, which transpose(1, 2) and chunk break. Call "
     ".contiguous() before .view(...)."),
    (lambda f: f["raised"], "Your forward raised {error} on an input of shape (2, {T}, {d_in})."),
    (lambda f: f["shape"] in ((2, f["H"], f["T"], f["hd"]), (2, f["T"], f["H"], f["hd"])), "Your "
     "forward returned shape {shape}: the heads are still separate. Merge them: {want}."),
    (lambda f: f["shape"] != f["want"], "Your forward returned {returned}, not a tensor of shape "
     "(b, num_tokens, d_out), here {want}."))  # fmt: skip
LAYERS = (lambda f: not all(isinstance(getattr(f["module"], n, None), torch.nn.Module)
          for n in PROJECTIONS), "The check could not use your instance's W_query, W_key or "
          "W_value: keep those layers.")  # fmt: skip
