"""One run of chapter 7's answer: a fact (a property of :class:`Run`) or a buggy reference
(:func:`.tiled_catalogue.online`) for each test of the check's ``CATALOGUE``."""

from functools import cached_property

import torch

from .core import describe_error
from .reference import same
from .tiled_catalogue import online
from .tiled_recorder import SOFTMAXES, Recorder


class Run:
    """The reader's class built on configuration ``c`` and called on a seeded input in eval mode
    under a :class:`.tiled_recorder.Recorder` (``r``): what it shows, and the facts it quotes."""

    def __init__(self, cls, c):
        self.cls, self.c, self.m, self.out, self.error = cls, c, None, None, None
        self.returned, self.hide = [], False  # query_block's (q, output); hide future keys?
        seeded = torch.Generator().manual_seed(c.seed)
        self.x = torch.randn(2, c.num_tokens, c.d_in, generator=seeded)  # (2, num_tokens, d_in)
        self.bs, self.last, self.head_dim = c.block_size, c.block_size - 1, c.d_out // c.num_heads
        self.bs2, self.end2, self.r = 2 * self.bs, 2 * self.bs - 1, Recorder(c)
        torch.manual_seed(c.seed)
        try:
            self.m = cls(*c[:3], c.dropout, c.num_heads, block_size=self.bs, qkv_bias=c.qkv_bias)
            self.m.eval().W_query.weight.mul_(c.query_gain)  # under no_grad
            self.own, self.m.query_block = self.m.query_block, self.query_block
            with self.r:
                self.out = self.m(self.x)  # (2, num_tokens, d_out)
        except Exception as error:
            self.error = error

    def shows(self, test):
        """Whether this run shows ``test``: a fact, or a buggy reference's output (in training
        for a ``drop`` switch) where the right one differs."""
        try:
            if isinstance(test, str):
                return bool(getattr(self, test))
            train = "drop" in test
            output, wrong = (self.trained, self.trained_wrong) if train else (self.out, self.wrong)
            buggy = wrong and online(self.m, self.x, **{"training": train, **test})
            return wrong and output.shape == buggy.shape and torch.allclose(
                output.double(), buggy.double(), 1e-4, 1e-5, equal_nan=True)  # fmt: skip
        except Exception:
            return False

    def query_block(self, q, keys, values, q_start):
        """The reader's ``query_block``, noting what it returned; with ``hide``, the keys and
        values after the block are nan (a pass that reads them computes nan scores)."""
        if self.hide:
            after = q_start + q.shape[2]
            keys, values = keys.clone(), values.clone()  # (b, num_heads, num_tokens, head_dim)
            keys[:, :, after:] = values[:, :, after:] = torch.nan
        self.returned.append((q, self.own(q, keys, values, q_start)))
        return self.returned[-1][1]

    @property
    def future(self):
        """Blocks computed more than once, some of them after the queries."""
        self.hide, r = True, Recorder(self.c)
        with r:
            self.m(self.x)
        return self.twice and r.nan

    @cached_property
    def trained(self):
        """The training-mode output, dropout as ``dropped`` (an exception: no test shows)."""
        try:
            with Recorder(self.c):
                return self.m.train()(self.x)  # (2, num_tokens, d_out)
        finally:
            self.m.eval()

    right = cached_property(lambda s: online(s.m, s.x))
    built_wrong = property(lambda s: s.m is None)
    starting = property(lambda s: isinstance(s.error, NotImplementedError))
    torch_attention = property(lambda s: s.r.torch_attention)
    book = property(lambda s: s.r.book)
    wrong = cached_property(lambda s: not same(s.out, s.right))
    misshapen = property(lambda s: not torch.is_tensor(s.out) or s.out.shape != s.right.shape)
    trained_wrong = cached_property(
        lambda s: s.c.dropout and not same(s.trained, online(s.m, s.x, training=True))
    )
    error_text = property(lambda s: describe_error(s.error))
    gap = property(lambda s: float((s.out - s.right).abs().nan_to_num(torch.inf).max()))
    all_nan = property(lambda s: bool(s.out.isnan().all()))
    has_nan = property(lambda s: bool(s.out.isnan().any()))
    wide = property(lambda s: s.r.widest > s.bs)
    factor_one = property(lambda s: s.wrong and bool(s.r.exps) and all(s.r.exps))
    overflows = property(lambda s: s.c.query_gain > 1 and not bool(s.out.isfinite().all()))
    blocks_n = property(lambda s: -(-s.c.num_tokens // s.bs))
    causal = property(lambda s: s.blocks_n * (s.blocks_n + 1) // 2)
    twice = property(lambda s: s.computed > s.causal)
    times = property(lambda s: s.computed / s.causal)
    divisible = property(lambda s: s.c.num_tokens - s.c.num_tokens % s.bs)
    call = property(lambda s: f"{s.cls.__name__}(" + ", ".join(f"{k}={v}" for k, v in zip(
        ("d_in", "d_out", "context_length", "num_heads"), s.c)) + f", dropout={s.c.dropout}, "
        f"block_size={s.bs}, qkv_bias={s.c.qkv_bias})")  # fmt: skip

    @property
    def partial(self):
        """Wrong, yet right on the longest length the block divides."""
        x = self.x[:, : self.divisible]
        within = 0 < self.divisible < self.c.num_tokens
        return self.wrong and within and same(self.m(x), online(self.m, x))

    @property
    def computed(self):
        """Blocks of scores computed, in block_size × block_size units."""
        elements = sum(torch.Size(s).numel() for s in self.r.scores) / (2 * self.c.num_heads)
        return round(elements * self.blocks_n**2 / self.c.num_tokens**2)

    @property
    def story(self):
        """What held more than a block of scores, in the reader's terms."""
        how = "Your softmax reads all of a row's scores at once" * bool(self.r.read & SOFTMAXES)
        how = how or "Your code joins the blocks' scores with torch.cat" * ("cat" in self.r.wide)
        return how and f"{how}: that is the whole score matrix again, one row block at a time. "

    @property
    def max_axes(self):
        """The first maximum of scores over other axes than the keys', in words (if wrong)."""
        dims, shape = self.r.max_axes[0] if self.wrong and self.r.max_axes else ((), None)
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
        """The first block of queries whose output is all nan, "first to last"."""
        first = int(self.out.isnan().all(-1).any(0).nonzero()[0]) // self.bs * self.bs
        return f"{first} to {min(first + self.bs, self.c.num_tokens) - 1}"
