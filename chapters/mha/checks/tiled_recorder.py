"""Chapter 7's one shape recorder (:class:`Run`) and the facts of a run its catalogue names."""

from functools import cached_property
from unittest import mock

import torch

from ..tiled import TiledAttention, causal_block_pairs
from .core import Step, attempt, describe_error, first_difference
from .reference import same
from .shortcuts import book_calls
from .tiled_reference import online
from .watch import Watch

PRODUCTS, BOOKS_LOOP = {"matmul", "__matmul__", "bmm", "mm", "einsum"}, TiledAttention.query_block
WHEN = ("when built", "when called in eval mode", "when called in training mode")
#: The last query block's steps (:func:`.core.first_difference`), each whole or as a 2-D loop has
#: it (batch 0, head 0); then the output, when only another query block differs.
HINTS = {"scores": 2, "weights (mask, running maximum)": 2, "running sum": 3, "running output": 3}
STEPS = tuple(
    Step(f"the {n}", hint, lambda run, n=n: [f for t in run.stages[n] for f in (t, t[0, 0])])
    for n, hint in (HINTS | {"context out / row_sum": 3}).items()
) + (Step("the output, another query block's context", 1, lambda run: run.right[:2]),)
UNTOLD = " Compare each step with hint(2) and hint(3)."


class Run(Watch):
    """The reader's class built on config ``c``, called on a seeded input in eval, then training
    mode, noting the products over ``head_dim`` (``scores``) and the widest scores (``widest``)."""

    def __init__(self, cls, c):
        super().__init__(p=c.dropout)
        self.c, self.bs, self.hd = c, c.block, c.d_out // c.heads
        self.widths = {self.hd, c.d_in, c.d_out}  # a product ending in one mixes values
        self.scores, self.maxima, self.outputs, self.widest = [], [], [], 0
        self.derived = {}  # id: a tensor of scores, or made from them (kept, so ids stay)
        self.m = self.error = None
        seeded = torch.Generator().manual_seed(c.seed)
        self.x = torch.randn(2, c.num_tokens, c.d_in, generator=seeded)  # (2, num_tokens, d_in)
        torch.manual_seed(c.seed)
        try:
            self.m = cls(*c[:7])  # the constructor's arguments
            self.m.W_query.weight.mul_(c.gain)  # under no_grad
            borrowed = mock.patch.object(TiledAttention, "query_block", self.borrowed)
            with book_calls() as self.calls, borrowed, self:
                for training in (False, True):
                    self.outputs.append(self.m.train(training)(self.x))  # (2, T, d_out)
        except Exception as error:
            self.error = error

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name, tensors = getattr(func, "__name__", ""), [a for a in args if torch.is_tensor(a)]
        listed = args and isinstance(args[0], (list, tuple))  # cat's and stack's tensors
        out = super().__torch_function__(func, types, args, kwargs)
        if name in ("amax", "max"):  # a maximum over another axis than the keys'
            dim = (kwargs or {}).get("dim", args[1] if len(args) > 1 else -1)
            if isinstance(dim, int) and dim not in (-1, args[0].dim() - 1):
                self.maxima.append(dim)
        if not torch.is_tensor(out) or not out.is_floating_point():
            return out
        scores = any(id(a) in self.derived for a in [*args, *(args[0] if listed else ())])
        if name in PRODUCTS and tensors and tensors[0].shape[-1] == self.hd and not scores:
            if out.dim() >= 2 and out.shape[-1] not in self.widths:  # else it mixes values
                self.scores.append(out.numel())
                scores = True
        elif name in ("mul", "__mul__") and out.dim() >= 5 and len(tensors) == 2:
            if self.hd in out.shape[-2:] and all(t.numel() < out.numel() for t in tensors):
                # q × k broadcast into each other, to be summed over head_dim
                self.scores.append(out.numel() // self.hd)
                scores = True
        if scores:  # a tensor of scores, or made from them: no wider than a block
            self.derived[id(out)] = out
            rows, cols = out.shape[-2:] if out.dim() >= 2 else (0, 1)
            if cols not in self.widths | {1} and max(rows, cols) > self.bs:
                self.widest = max(self.widest, rows, cols)
        return out

    def borrowed(self, *args):  # the book's TiledAttention.query_block, noted in calls
        self.calls.append("TiledAttention.query_block")
        return BOOKS_LOOP(*args)

    def trained_with(self, seed):  # (2, T, d_out): training mode, torch's dropout from seed
        torch.manual_seed(seed)
        return self.m.train()(self.x)

    def reference(self, mistake=""):  # (4, T, d_out): eval mode, then training mode
        return torch.cat([online(self.m, self.x, mistake, training) for training in (0, 1)])

    output = property(lambda s: s.error or attempt(torch.cat, s.outputs))  # (4, T, d_out)
    out = property(lambda s: s.outputs[0] if s.outputs else None)  # in eval mode
    right = cached_property(lambda s: s.reference())
    stages = cached_property(lambda s: (online(s.m, s.x, stages=(found := {})), found)[1])
    where = property(lambda s: first_difference(STEPS, s, lambda: s.m.eval()(s.x)) or UNTOLD)
    wrong = property(lambda s: not same(s.out, s.right[:2]))
    starting = property(lambda s: isinstance(s.error, NotImplementedError))
    book = property(lambda s: [c for c in s.calls if c != "TiledAttention.forward"])
    torch_attention = property(lambda s: bool(s.seen & {"kernel", "layer"}))
    max_axes = property(lambda s: s.wrong and s.maxima and s.maxima[0])
    error_text = property(lambda s: describe_error(s.error))
    when = property(lambda s: WHEN[len(s.outputs) + (s.m is not None)])
    #: Raised in eval mode on a length the block does not divide (the first config, divided, ran).
    partial = property(lambda s: bool(s.m and s.error and not s.outputs and s.c.num_tokens % s.bs))
    keepdim = property(lambda s: bool(s.error and s.failed and min(map(len, s.failed[1])) == 3))
    wide = property(lambda s: s.widest > s.bs)
    overflows = property(lambda s: s.c.gain > 1 and not bool(s.out.isfinite().all()))
    all_nan = property(lambda s: bool(s.out.isnan().all()))
    causal = property(lambda s: len(causal_block_pairs(s.c.num_tokens, s.bs)))
    extra = property(lambda s: s.computed > s.causal)
    few = property(lambda s: s.wrong and 0 < s.computed < s.causal)  # 0: products not seen
    #: Right in eval mode, not in training, with the check's dropout (the same weights every run).
    dropped_otherwise = property(lambda s: "dropout" in s.seen and not same(s.output, s.right))
    #: Two training calls, torch's own dropout drawn from two seeds, gave one output: it reseeds.
    reseeded = property(lambda s: s.c.dropout > 0 and s.trained_with(1).equal(s.trained_with(2)))
    #: Scores computed, in block_size × block_size blocks of one mode, one input, one head.
    computed = property(lambda s: round(sum(s.scores) / (4 * s.c.heads * s.bs**2)))
