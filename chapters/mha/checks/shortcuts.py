"""What chapters 5 and 6's class checks share: the reader's class run on a configuration with a
dropout that drops the same weights every time, PyTorch's attention and the book's forwards
seen while it runs, and the verdict on its eval and training outputs against buggy references."""

import contextlib
import sys

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .. import attention, gqa
from .core import CheckResult, describe_error
from .reference import same

# fmt: off
KEPT = lambda t: (torch.arange(t.shape[-2])[:, None] + torch.arange(t.shape[-1])) % 2 == 0  # noqa: E731
dropped = lambda t, p: t * KEPT(t) / (1 - float(p)) if p else t  # noqa: E731  # the check's dropout


def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
    """``F.scaled_dot_product_attention``, its dropout that of :func:`dropped`."""
    if not dropout_p:
        return F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal=is_causal, scale=scale, **kwargs)  # noqa: E501
    scores = q @ k.mT * (scale or q.shape[-1] ** -0.5)  # (..., num_tokens, num_tokens)
    keep = ~torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1) if is_causal else attn_mask
    if keep is not None:
        scores = scores.masked_fill(~keep, -torch.inf) if keep.dtype == torch.bool else scores + keep
    return dropped(torch.softmax(scores, -1), dropout_p) @ v  # (..., num_tokens, head_dim)


class Watch(TorchFunctionMode):
    """While on, dropout is :func:`dropped` and the kernel's result gets ``bump``; records torch's
    attention (``kernel``, ``grouped``, ``layer``) and the shapes of the first call that raised."""

    def __init__(self, bump=0.0):
        super().__init__()
        self.bump, self.kernel, self.grouped, self.layer, self.failed = bump, False, False, False, None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.layer |= func in (F.multi_head_attention_forward, torch._native_multi_head_attention)
        self.kernel |= func is F.scaled_dot_product_attention
        self.grouped |= bool(func is F.scaled_dot_product_attention and kwargs.get("enable_gqa"))
        try:
            if func in (F.dropout, torch.dropout):
                return (lambda t, p=0.5, training=True, inplace=False: dropped(t, p) if training else t)(*args, **kwargs)  # noqa: E501
            return sdpa(*args, **kwargs) + self.bump if func is F.scaled_dot_product_attention else func(*args, **kwargs)  # noqa: E501
        except Exception:
            self.failed = self.failed or (getattr(func, "__name__", ""), [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)], [a.stride() for a in args if isinstance(a, torch.Tensor)])  # noqa: E501
            raise


@contextlib.contextmanager
def book_calls():
    """The book's forwards that run, by name: each calls one of the book's input guards, so a
    recorder in their place sees every route (``super()``, a saved reference, a module inside)."""
    guards, calls, patched = (attention.check_input, gqa.check_length, gqa.check_one_token), [], []
    for module in [m for n, m in list(sys.modules.items()) if n.startswith("mha.") and m]:
        for name, guard in [(n, g) for n, g in vars(module).items() if any(g is h for h in guards)]:
            patched.append((module, name, guard))
            setattr(module, name, lambda *a, g=guard: calls.append(sys._getframe(1).f_code.co_qualname) or g(*a))  # noqa: E501
    try:
        yield calls
    finally:
        for module, name, guard in patched:
            setattr(module, name, guard)


def not_a_class(answer, check, example, start):
    """What to say when ``answer`` is not a module class, or None."""
    name = getattr(answer, "__name__", type(answer).__name__)
    kind = f"the function {name}" if callable(answer) and hasattr(answer, "__name__") else f"a {name}"  # noqa: E501
    return None if isinstance(answer, type) and issubclass(answer, torch.nn.Module) else (
        f"{check} got None. Run the cell that defines your class, then pass the class itself: {check}({example})." if answer is None else  # noqa: E501
        f"You passed an instance of {name}, not the class. Pass the class itself, {check}({name}): the check builds its own instances, with several sizes." if isinstance(answer, torch.nn.Module) else  # noqa: E501
        f"{check} expects a class, but got {kind}. Pass the class you defined with class ...: by its name, without calling it." if not isinstance(answer, type) else  # noqa: E501
        f"{name} is a class, but not an nn.Module. Start it with class {name}({start}):, so that it has the layers.")  # noqa: E501


class Run:
    """The reader's class built with ``kwargs`` (seeded) and called on a seeded input, in eval
    mode and, with dropout, in training mode, watched; the reader's random state left alone."""

    def __init__(self, cls, kwargs, tokens, seed):
        self.cls, self.kwargs, self.tokens, self.error_text = cls, kwargs, tokens, ""
        self.module = self.output = self.trained = self.error = None
        self.x = torch.randn(2, tokens, kwargs["d_in"], generator=torch.Generator().manual_seed(1000 + seed))  # noqa: E501
        self.watch, self.stage, self.p = Watch(), "constructor", kwargs["dropout"]
        self.call = f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        with torch.random.fork_rng(devices=[]), torch.no_grad(), book_calls() as self.calls:
            try:
                torch.manual_seed(seed)
                self.module, self.stage = cls(**kwargs), "forward"
                with self.watch:
                    self.output, self.stage = self.module.eval()(self.x), "training"  # (2, T, d_out)
                    self.trained, self.stage = self.module.train(self.p > 0)(self.x), None
            except Exception as error:
                self.error, self.error_text = error, describe_error(error).rstrip(".")

    def again(self, bump=0.0, seed=None):
        """In eval mode, the kernel's result bumped; or, with a seed, in training mode for real."""
        with torch.random.fork_rng(devices=[]), torch.no_grad(), contextlib.ExitStack() as stack:
            stack.enter_context(Watch(bump)) if seed is None else torch.manual_seed(seed)
            return self.module.train(seed is not None)(self.x)

    def basics(self, start):
        """The message for a constructor or forward that raised, no tensor, or a wrong shape."""
        shape, want, kind = getattr(self.output, "shape", None), (2, self.tokens, self.kwargs["d_out"]), type(self.output).__name__  # noqa: E501
        return next((text for wrong, text in (
            (self.stage == "constructor", f"Building your class as {self.call} raised {self.error_text}. Keep the constructor of {start}: subclass it and write only forward."),  # noqa: E501
            (self.stage == "forward", f"Calling your class on an input of shape {tuple(self.x.shape)} raised {self.error_text}."),  # noqa: E501
            (not isinstance(self.output, torch.Tensor), f"Your class returned a{'n' * (kind[0] in 'aeiou')} {kind}, not a tensor. Return the output: a tensor of shape (b, num_tokens, d_out), here {want}."),  # noqa: E501
            (shape != want, f"Your output has shape {tuple(shape or ())}, but it should be (b, num_tokens, d_out), here {want}.")) if wrong), None)  # noqa: E501


CONTEXT = "dropped, after the weights have mixed the values: dropout acts on the merged context."
PLACES = ((None, "Your output is right in eval mode, but in training mode it is the same: no dropout, although the module was built with dropout={p}."),  # noqa: E501
          ("values", "In training mode dropout acts on the values, not on whole attention weights."),  # noqa: E501
          ("heads", "In training mode single numbers of each head's context are " + CONTEXT),
          ("context", "In training mode single numbers of the context are " + CONTEXT),
          ("output", "In training mode single numbers of your final output are dropped: dropout comes after out_proj."))  # noqa: E501
NAN = "In training mode your output has nan in it: dropout reached the scores after the mask, where a masked -inf times a dropped 0 is nan."  # noqa: E501
NOISE = "In training mode your output changes, but not the way dropout on the attention weights changes it. That is noise, not dropout."  # noqa: E501
UNEXPLAINED = "Your output has the right shape, but not the right values (largest difference {gap:.3g}), and none of the usual mistakes explains it (perhaps two of them together). Check each step: "  # noqa: E501


def _follows(output, reference, r, kind):
    try:
        return same(output, reference(r, **kind))
    except Exception:  # a buggy reference that cannot run on this module matches nothing
        return False


def judge(r, reference, mistakes, facts, belongs, after=lambda r: None):
    """The eval output against ``reference(r)`` and the ``mistakes`` (``(changes, message)``,
    ending with the steps to check); once right, ``after(r)``, then dropout in training."""
    with torch.no_grad():
        right = reference(r)
        if not same(r.output, right):
            gap = float((r.output.double() - right).abs().nan_to_num(torch.inf).max())
            *known, steps = mistakes
            found = next((m for kind, m in known if _follows(r.output, reference, r, kind)), None)
            return (found or UNEXPLAINED + steps).format(gap=gap, **facts)
        if r.stage == "training":
            return f"Your output is right in eval mode, but in training mode (module.train()) your forward raised {r.error_text}. The check runs it in both modes."  # noqa: E501
        if after(r) or same(r.trained, reference(r, drop="weights")):
            return after(r) or (r.p and torch.equal(r.again(seed=1), r.again(seed=2)) and "In training mode two calls on the same input gave the same output: the same weights are dropped every time. Dropout draws a new mask on each call: do not reseed inside forward.")  # noqa: E501
        found = next((m for place, m in PLACES if _follows(r.trained, reference, r, {"drop": place})), None)  # noqa: E501
        return f"{(found or (NAN if r.trained.isnan().any() else NOISE)).format(**facts)} {belongs}"


def check_class(cls, configs, verdict, quiet=()):
    """The first failing run's verdict over ``configs``, with the configuration (unless the
    constructor raised or the message is in ``quiet``); None if every run passes."""
    for kwargs, tokens, seed in configs:
        r = Run(cls, kwargs, tokens, seed)
        text = verdict(r)
        if text:
            seen = "" if r.stage == "constructor" or text in quiet else f"\n(Seen with {r.call}.)"
            return CheckResult(False, text + seen)
    return None
# fmt: on
