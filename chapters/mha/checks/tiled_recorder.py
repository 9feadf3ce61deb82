"""One run of chapter 7's answer, watched by the check's one shape recorder (:class:`Run`), and
the facts the catalogue's messages quote (:data:`.tiled_catalogue.TABLE`)."""

from functools import cached_property
from unittest import mock

import torch

from ..tiled import TiledAttention
from .core import describe_error
from .reference import same
from .shortcuts import Watch, book_calls
from .tiled_catalogue import online

PRODUCTS, SOFTMAXES = {"matmul", "__matmul__", "bmm", "mm", "einsum"}, {"softmax", "logsumexp"}
BOOKS_LOOP = TiledAttention.query_block


class Run(Watch):
    """The reader's class built on configuration ``c`` (a :data:`.tiled.Config`) and called in
    eval mode on a seeded input, under this recorder: a :class:`.shortcuts.Watch` (dropout made
    the check's, PyTorch's attention seen) that notes, of the tensors the torch functions make,
    the products over ``head_dim`` (``scores``: their shapes), tensors of scores wider than a
    block (``wide``: function and tensor; ``read``: the functions that read one), maxima over
    other axes than the keys' (``max_axes``) and, per ``exp`` of a per-row statistic, whether
    it was all ones (``exps``). ``calls``: the book's forwards and ``query_block`` that ran."""

    def __init__(self, cls, c):
        super().__init__()
        self.cls, self.c, self.bs, self.hd = cls, c, c.block_size, c.d_out // c.num_heads
        self.last, self.bs2, self.end2 = self.bs - 1, 2 * self.bs, 2 * self.bs - 1
        self.scores, self.wide_scores, self.maxima, self.exps, self.products = [], [], [], [], []
        self.read, self.widest, self.returned, self.unscored = set(), 0, [], []
        self.m = self.out = self.error = None
        seeded = torch.Generator().manual_seed(c.seed)
        self.x = torch.randn(2, c.num_tokens, c.d_in, generator=seeded)  # (2, num_tokens, d_in)
        torch.manual_seed(c.seed)
        try:
            self.m = cls(*c[:3], c.dropout, c.num_heads, block_size=self.bs, qkv_bias=c.qkv_bias)
            self.m.eval().W_query.weight.mul_(c.query_gain)  # under no_grad
            self.own, self.m.query_block = self.m.query_block, self.query_block
            borrowed = mock.patch.object(TiledAttention, "query_block", self.borrowed)
            with book_calls() as self.calls, borrowed, self:
                self.out = self.m(self.x)  # (2, num_tokens, d_out)
        except Exception as error:
            self.error = error

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name, tensors = getattr(func, "__name__", ""), [a for a in args if torch.is_tensor(a)]
        self.read |= {name} if any(a is t for a in tensors for _, t in self.wide_scores) else set()
        out = super().__torch_function__(func, types, args, kwargs)
        if name in ("amax", "max") and len(tensors) == 1 and tensors[0].dim() >= 2:
            self._maximum(tensors[0], (kwargs or {}).get("dim", args[1] if len(args) > 1 else None))
        if not torch.is_tensor(out) or not out.is_floating_point():
            return out
        trimmed = out.shape[: max((i + 1 for i, n in enumerate(out.shape) if n > 1), default=0)]
        if name in PRODUCTS and tensors and tensors[0].shape[-1] == self.hd:
            self._score(out.shape)
        elif name in ("mul", "__mul__") and trimmed[-1:] == (self.hd,) and len(trimmed) >= 4:
            self.products.append(out)  # queries times keys, to be summed over head_dim
        elif name == "sum" and any(a is t for a in tensors for t in self.products):
            self._score(trimmed)
        elif name == "exp" and out.dim() >= 3 and out.shape[-1] == 1:
            self.exps.append(bool((out == 1).all()))
        rows, cols = out.shape[-2:] if out.dim() >= 3 else (0, 1)
        widths = {1, self.hd, self.c.d_in, self.c.d_out}
        if cols not in widths and rows != self.hd and max(rows, cols) > self.bs:
            self.wide_scores.append((name, out))
            self.widest = max(self.widest, rows, cols)
        return out

    def _maximum(self, t, dims):
        """Note a maximum of scores ``t`` over other axes than the last, the keys'."""
        dims = range(t.dim()) if dims is None else [dims] if isinstance(dims, int) else dims
        dims = sorted({d % t.dim() for d in dims})
        if t.shape[-1] not in (1, self.hd) and t.shape[-1] <= self.bs and dims != [t.dim() - 1]:
            self.maxima.append((dims, tuple(t.shape)))

    def _score(self, shape):
        """Note a product of scores, unless it ends in a width (then it mixes values)."""
        if len(shape) >= 2 and shape[-1] not in {self.hd, self.c.d_in, self.c.d_out}:
            self.scores.append(tuple(shape))
            self.widest = max(self.widest, *shape[-2:])

    def query_block(self, q, keys, values, q_start):
        """The reader's ``query_block``, noting what it returned, and the queries it computed no
        score for."""
        scored = len(self.scores)
        self.returned.append((q, self.own(q, keys, values, q_start)))
        self.unscored += [(q_start, q_start + q.shape[2])] * (len(self.scores) == scored)
        return self.returned[-1][1]

    def borrowed(self, *args):
        """The book's ``TiledAttention.query_block``, noted in ``calls``."""
        self.calls.append("TiledAttention.query_block")
        return BOOKS_LOOP(*args)

    def reference(self, mistake=""):
        """:func:`.online` with ``mistake``, in eval mode and, with dropout, in training mode."""
        eval_mode = online(self.m, self.x, mistake)
        if not self.c.dropout:
            return eval_mode
        return torch.cat([eval_mode, online(self.m, self.x, mistake, training=True)])

    @cached_property
    def output(self):
        """The answer's output as :meth:`reference` gives it (an exception: none)."""
        try:
            with Watch():
                trained = self.c.dropout and self.m.train()(self.x)  # (2, num_tokens, d_out)
            return torch.cat([self.out, trained]) if self.c.dropout else self.out
        except Exception as error:
            return error
        finally:
            self.m.eval()

    right = cached_property(lambda s: s.reference())
    expected = cached_property(lambda s: online(s.m, s.x))  # in eval mode
    built_wrong = property(lambda s: s.m is None)
    starting = property(lambda s: isinstance(s.error, NotImplementedError))
    torch_attention = property(lambda s: bool(s.seen & {"kernel", "layer"}))
    book = property(lambda s: [c for c in s.calls if c != "TiledAttention.forward"])
    wrong = cached_property(lambda s: not same(s.out, s.expected))
    misshapen = property(lambda s: not torch.is_tensor(s.out) or s.out.shape != s.expected.shape)
    error_text = property(lambda s: describe_error(s.error))
    gap = property(lambda s: float((s.out - s.expected).abs().nan_to_num(torch.inf).max()))
    all_nan = property(lambda s: bool(s.out.isnan().all()))
    has_nan = property(lambda s: bool(s.out.isnan().any()))
    wide = property(lambda s: s.widest > s.bs)
    factor_one = property(lambda s: s.wrong and bool(s.exps) and all(s.exps))
    overflows = property(lambda s: s.c.query_gain > 1 and not bool(s.out.isfinite().all()))
    blocks_n = property(lambda s: -(-s.c.num_tokens // s.bs))
    causal = property(lambda s: s.blocks_n * (s.blocks_n + 1) // 2)
    times = property(lambda s: s.computed / s.causal)
    twice = property(lambda s: s.computed > s.causal)
    future = property(lambda s: s.twice and not s.times.is_integer())  # other than 2, 3... times
    divisible = property(lambda s: s.c.num_tokens - s.c.num_tokens % s.bs)

    @property
    def call(self):
        """How the check built the reader's class."""
        sizes = ", ".join(f"{k}={v}" for k, v in zip(self.c._fields[:4], self.c))
        return (
            f"{self.cls.__name__}({sizes}, dropout={self.c.dropout}, block_size={self.bs}, "
            f"qkv_bias={self.c.qkv_bias})"
        )

    @property
    def partial(self):
        """Wrong, yet right on the longest length the blocks divide."""
        x = self.x[:, : self.divisible]
        within = 0 < self.divisible < self.c.num_tokens
        return self.wrong and within and same(self.m(x), online(self.m, x))

    @property
    def computed(self):
        """Blocks of scores computed, in block_size × block_size units."""
        elements = sum(torch.Size(s).numel() for s in self.scores) / (2 * self.c.num_heads)
        return round(elements * self.blocks_n**2 / self.c.num_tokens**2)

    @property
    def story(self):
        """What held more than a block of scores, in the reader's terms."""
        how = "Your softmax reads all of a row's scores at once" * bool(self.read & SOFTMAXES)
        how = how or "Your code joins the blocks' scores with torch.cat" * any(
            name == "cat" for name, _ in self.wide_scores
        )
        return how and f"{how}: that is the whole score matrix again, one row block at a time. "

    @property
    def max_axes(self):
        """The first maximum of scores over other axes than the keys', in words (if wrong)."""
        dims, shape = self.maxima[0] if self.wrong and self.maxima else ((), None)
        return dims and f"dimension{'s' * (len(dims) > 1)} {', '.join(map(str, dims))} of {shape}"

    @property
    def block_kind(self):
        """What ``query_block`` returned on the first block, when the forward raised and it is
        not a tensor shaped like ``q``."""
        q, block = self.returned[0] if self.error is not None and self.returned else (None, None)
        if torch.is_tensor(block):
            shapes = f"shape {tuple(block.shape)} for q of shape {tuple(q.shape)}"
            return block.shape != q.shape and shapes
        return q is not None and ("None" if block is None else f"a {type(block).__name__}")

    @property
    def scoreless(self):
        """The first block of queries that no score reached (its output nan): "first to last"."""
        nan = [(a, b) for a, b in self.unscored if self.out[:, a:b].isnan().all()]
        return nan and f"{nan[0][0]} to {nan[0][1] - 1}"
