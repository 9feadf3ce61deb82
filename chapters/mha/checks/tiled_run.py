"""One run of chapter 7's answer under the shape recorder (:class:`Run`), and the facts the
catalogue's messages name and quote (:data:`.tiled_catalogue.TABLE`)."""

from functools import cached_property
from unittest import mock

import torch

from ..tiled import TiledAttention
from .core import describe_error
from .reference import same
from .shortcuts import Watch, book_calls
from .tiled_recorder import SOFTMAX, Recorder
from .tiled_reference import online

BOOKS_LOOP = TiledAttention.query_block


class Run(Recorder):
    """The reader's class built on configuration ``c`` and called on a seeded input in eval mode,
    recorded; its properties are the facts of :data:`.tiled_catalogue.TABLE`."""

    def __init__(self, cls, c):
        super().__init__(c)
        self.cls, self.c, self.returned, self.unscored = cls, c, [], []
        self.last, self.bs2, self.end2 = self.bs - 1, 2 * self.bs, 2 * self.bs - 1
        self.kwargs = dict(zip(c._fields[:7], c))  # the constructor's arguments
        self.m = self.out = self.error = None
        seeded = torch.Generator().manual_seed(c.seed)
        self.x = torch.randn(2, c.num_tokens, c.d_in, generator=seeded)  # (2, num_tokens, d_in)
        torch.manual_seed(c.seed)
        try:
            self.m = cls(**self.kwargs)
            self.m.eval().W_query.weight.mul_(c.query_gain)  # under no_grad
            self.own, self.m.query_block = self.m.query_block, self.query_block
            borrowed = mock.patch.object(TiledAttention, "query_block", self.borrowed)
            with book_calls() as self.calls, borrowed, self:
                self.out = self.m(self.x)  # (2, num_tokens, d_out)
        except Exception as error:
            self.error = error

    def query_block(self, q, keys, values, q_start):
        """The reader's ``query_block``, noting what it returned and where it scored nothing."""
        scored = len(self.scores)
        self.returned.append((q, self.own(q, keys, values, q_start)))
        self.unscored += [(q_start, q_start + q.shape[2])] * (len(self.scores) == scored)
        return self.returned[-1][1]

    def borrowed(self, *args):
        """The book's ``TiledAttention.query_block``, noted in ``calls``."""
        self.calls.append("TiledAttention.query_block")
        return BOOKS_LOOP(*args)

    def reference(self, mistake=""):
        """:func:`.online` with ``mistake``, in eval mode, then in training mode with dropout."""
        modes = (False, True) if self.c.dropout else (False,)
        return torch.cat([online(self.m, self.x, mistake, training) for training in modes])

    @cached_property
    def output(self):
        """The answer's output as :meth:`reference` gives the references' (or what it raised)."""
        try:
            with Watch():
                trained = [self.m.train()(self.x)] if self.c.dropout else []
            return torch.cat([self.out, *trained])  # (2 or 4, num_tokens, d_out)
        except Exception as error:
            return error
        finally:
            self.m.eval()

    right = cached_property(lambda s: s.reference())
    expected = property(lambda s: s.right[:2])  # in eval mode
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
    future = property(lambda s: s.twice and not s.times.is_integer())  # not 2, 3... times each
    divisible = property(lambda s: s.c.num_tokens - s.c.num_tokens % s.bs)
    call = property(
        lambda s: f"{s.cls.__name__}({', '.join(f'{k}={v}' for k, v in s.kwargs.items())})"
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
        if self.read & SOFTMAX:
            how = "Your softmax reads all of a row's scores at once"
        elif "cat" in dict(self.wide_scores):
            how = "Your code joins the blocks' scores with torch.cat"
        else:
            return ""
        return f"{how}: that is the whole score matrix again, one row block at a time. "

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
