"""One run of a class practice, seeded and watched; what goes wrong before the values (a
failing scores product read from its shapes) and after them (gradients, state kept)."""

import contextlib

import torch

from .core import attempt, describe_error, name_of
from .reference import PROJECTIONS, same
from .shortcuts import book_calls
from .watch import Watch


class Run:
    """The reader's class built and called, seeded and watched, in eval then training mode."""

    def __init__(self, cls, kwargs, tokens, seed, batch=2):
        self.kwargs, self.tokens, self.seed, self.p = kwargs, tokens, seed, kwargs["dropout"]
        self.call = f"{name_of(cls)}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        seeded = torch.Generator().manual_seed(1000 + seed)
        self.x = torch.randn(batch, tokens, kwargs["d_in"], generator=seeded)  # (b, tokens, d_in)
        self.module = self.output = self.trained = self.error = None
        self.watch, self.stage, self.error_text = Watch(p=self.p), "constructor", ""
        self.written, buffers = [], {}  # the buffers (self.mask) the forward changed
        with torch.random.fork_rng(devices=[]), torch.no_grad(), book_calls() as self.calls:
            try:
                torch.manual_seed(seed)
                self.module, self.stage = cls(**kwargs), "forward"
                buffers = {n: b.clone() for n, b in self.module.named_buffers()}
                with self.watch:
                    self.output, self.stage = self.module.eval()(self.x), "training"
                    self.trained, self.stage = self.module.train()(self.x), None
            except Exception as error:
                self.error, self.error_text = error, describe_error(error)
            now = dict(self.module.named_buffers()) if self.module is not None else {}
            self.written = [n for n, b in buffers.items() if n in now and not same(now[n], b)]

    def again(self, bump=0.0, seed=None):
        """In eval mode with the kernel's result bumped; with a seed, in training mode for real."""
        with torch.random.fork_rng(devices=[]), torch.no_grad(), contextlib.ExitStack() as stack:
            stack.enter_context(Watch(bump)) if seed is None else torch.manual_seed(seed)
            return self.module.train(seed is not None)(self.x)

    def afterwards(self):
        """:func:`afterwards` on this run, its longest input as long as the module's mask."""
        size = (2, self.kwargs.get("context_length", self.tokens), self.kwargs["d_in"])
        return afterwards(self.module, self.x, self.output, size)

    def facts(self):
        """What messages quote: the arguments, the call that failed, the output's right shape."""
        op, shapes = self.watch.failed or ("", [])
        raised = self.stage == "forward" and str(self.error)
        b, want = len(self.x), (len(self.x), self.tokens, self.kwargs["d_out"])
        return dict(self.kwargs, T=self.tokens, want=want, raised=raised, error=self.error_text,
                    op=op, shapes=shapes, call=self.call, run=self, b=b)  # fmt: skip


def afterwards(module, x, output, size):
    """What is wrong with ``module`` once its ``output`` on ``x`` is right, or None: no gradient
    back to the input, or state kept between calls (x again, after inputs of ``size``, x + 1)."""
    leaf = torch.zeros((), requires_grad=True)  # x + leaf: a gradient reaches leaf through x
    with torch.random.fork_rng(devices=[]), Watch(), torch.inference_mode(False):
        with torch.enable_grad():  # whatever the reader's cell has switched off
            out = attempt(module.eval(), x + leaf)
        if isinstance(out, Exception):  # .numpy() on a tensor that needs a gradient, say
            return BACKWARD.format(error=describe_error(out), when="with gradients on")
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return NO_GRADIENT.format(
                cut="it carries no gradient (or is one kept from a call without one)"
            )
        params = dict(module.named_parameters())
        grads = attempt(torch.autograd.grad, out.sum(), [leaf, *params.values()],
                        allow_unused=True)  # fmt: skip
        if isinstance(grads, Exception):  # an in-place change of what backward needs
            return BACKWARD.format(error=describe_error(grads), when="in its backward pass")
        if grads[0] is None:
            return NO_GRADIENT.format(cut="no gradient flows from it back to x")
        if cut := [n for n, g in zip(params, grads[1:]) if g is None]:
            return NO_GRADIENT.format(
                cut=f"no gradient reaches {cut[0]} (unused, detached, "
                "used through .data or kept from an earlier call)"
            )
        with torch.no_grad():  # x + 1 must give another output, x again the same one
            calls = (torch.randn(size), x + 1, x)
            outs = attempt(lambda: [module(t) for t in calls])
    if isinstance(outs, Exception) or not same(outs[2], output):
        what = f"raised {describe_error(outs)}" if isinstance(outs, Exception) else "changed"
        return CHANGED.format(size=size, what=what)
    return KEPT if same(outs[1], output) else None


def keys_swapped(f):
    """The failing product multiplied (b, h, t, d) by (b, t, h, d) or (b, d, t, h): the keys
    transposed on axes 1 and 2, or 1 and 3."""
    shapes = f["shapes"]
    product = f["raised"] and "matmul" in f["op"] and len(shapes) == 2 and len(shapes[0]) == 4
    orders = ((0, 2, 1, 3), (0, 3, 2, 1)) if product else ()
    return any(shapes[1] == tuple(shapes[0][i] for i in order) for order in orders)


def untransposed(f):
    """The failing product multiplied (b, h, t, d) by the keys as they are: not transposed."""
    shapes = f["shapes"]
    return f["raised"] and "matmul" in f["op"] and len(shapes) == 2 and shapes[0] == shapes[1]


def batch_in_code(f):
    """It raised on a batch of 3, and runs on its first two sequences: the batch size is fixed."""
    run = f["run"]
    return f["raised"] and f["b"] != 2 and not isinstance(attempt(run.module, run.x[:2]), Exception)


UNTRANSPOSED = ("Your scores product failed ({error}): queries @ keys needs the keys' last two "
                "axes swapped, one column per key: split the keys as the queries, (..., "
                "num_tokens, head_dim), then keys.transpose(2, 3).")  # fmt: skip
NO_GRADIENT = ("Your output is right, but {cut}: training could not learn through it. Leave "
               "torch.no_grad(), inference_mode, .detach() and .data out of forward.")  # fmt: skip
BACKWARD = ("Your output is right, but training could not learn through it: {when} it raised "
            "{error}. Keep every step in torch (no .numpy()), and write new tensors rather than "
            "change in place (masked_fill_, +=) one the gradient needs.")  # fmt: skip
CHANGED = ("Your output is right once, but the same instance, called on (2, {size[1]}, {size[2]}) "
           "and then on x again, {what}: a forward must not change the module (self.mask = ...). "
           "Slice into a local variable.")  # fmt: skip
KEPT = (
    "Your output is right once, but the same instance gave x's output again for x + 1: a "
    "forward computes from its input and keeps no output or keys for the next call."
)
# fmt: off
TROUBLE = (  # what raised or came out wrong, before the output's values: (holds, what to say)
    (lambda f: f["run"].stage == "constructor", "Building your class as {call} raised {error}. "
     "Keep the constructor of {start}: subclass it and write only forward."),
    (batch_in_code, "Your forward raised {error} on a batch of {b} sequences, and runs on 2: the "
     "batch size is in the code. Take it from the input: b, num_tokens, _ = x.shape."),
    (lambda f: f["T"] < f["context_length"] and (f"({f['context_length']})" in (f["raised"] or "")
               or f"b ({f['T']}) at non-singleton dimension 3" in (f["raised"] or "")),
     "On {T} tokens, fewer than context_length={context_length}, your forward raised {error}: "
     "cut the mask to the input's length, self.mask[:num_tokens, :num_tokens]."),  # sized by it
    (lambda f: "view size is not compatible" in (f["raised"] or ""), "Your forward raised "
     "{error}: view needs numbers in memory order, which transpose(1, 2) and chunk break. Call "
     ".contiguous() before .view(...)."),
    (lambda f: f["run"].written, "Your forward changed self.{run.written[0]} (a slice assigned to "
     "it, or written into it in place): later calls see it changed. Keep a slice in a local "
     "variable."),
    (lambda f: f["raised"], "Your forward raised {error} on an input of shape ({b}, {T}, {d_in})."))
LAYERS = (
    lambda f: not all(isinstance(getattr(f["run"].module, n, None), torch.nn.Module)
                      for n in PROJECTIONS),
    "The check could not use your instance's W_query, W_key or W_value: keep those layers.")
# fmt: on
