"""How chapter 7's check runs the reader's class, and the one shape recorder it watches it with.

:data:`CONFIGS` are the builds the check tries; :func:`online` is the online softmax its catalogue
of buggy references is made of (each mistake is one switch changed; with none it is
``MultiHeadAttention``'s output). The practice asks for attention that never holds a score matrix
larger than a block: :class:`Recorder` (a ``TorchFunctionMode``) notes the scores computed
(products over ``head_dim``: ``@``, ``einsum``, an elementwise product summed over it), tensors of
scores wider than a block and what made or read them, maxima over other axes than the keys', the
``exp`` of per-row factors and PyTorch's own attention; it makes dropout deterministic
(:func:`dropped`) and replaces the book's ``TiledAttention.query_block`` and
``MultiHeadAttention.forward`` by recorders. :class:`Run` is one run and the facts messages quote.
"""

from collections import namedtuple

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ..attention import MultiHeadAttention
from ..tiled import TiledAttention
from .core import describe_error
from .reference import same, split_attention

PRODUCTS, SOFTMAXES = {"matmul", "__matmul__", "bmm", "mm", "einsum"}, {"softmax", "logsumexp"}
BOOK = ((TiledAttention, "query_block"), (MultiHeadAttention, "forward"))


def dropped(t, p):
    """Dropout that keeps the entries whose row and column add up to an even number: for blocks
    that start at even positions, the same weights as in the whole matrix."""
    rows = torch.arange(t.shape[-2])[:, None] if t.dim() > 1 else 0
    return t * ((rows + torch.arange(t.shape[-1])) % 2 == 0) / (1 - p)


Config = namedtuple("Config", "d_in d_out context_length num_heads num_tokens qkv_bias block_size "
                    "query_gain dropout seed")  # fmt: skip
#: Lengths a block divides and not, shorter than a block, one token, biases, dropout, and scores
#: in the hundreds (W_query × 250), where exp overflows; head_dim is no block size nor d_in.
CONFIGS = tuple(Config(*c) for c in ((6, 6, 12, 2, 12, False, 4, 1, 0.0, 1),
    (5, 9, 14, 3, 10, True, 4, 1, 0.0, 2), (4, 6, 8, 1, 3, False, 5, 1, 0.0, 3),
    (4, 6, 8, 2, 1, False, 4, 1, 0.0, 4), (8, 12, 9, 4, 9, False, 4, 1, 0.5, 5),
    (6, 6, 12, 2, 12, False, 4, 250, 0.0, 6)))  # fmt: skip


# fmt: off
def online(m, x, training=False, rescale_sum=True, rescale_out=True, factor="old - new",
           own_max=False, power=1, scale="sqrt head_dim", divide="end", mask="causal", shrink=0,
           stop=0, combine="online", drop="weights"):
    """The online softmax over ``m``'s layers on ``x``, or one catalogued way to get it wrong."""
    d = (lambda t: dropped(t, m.dropout.p)) if training and m.dropout.p else (lambda t: t)
    queries, keys, values = (m.split_heads(f(x)) for f in (m.W_query, m.W_key, m.W_value))
    size, contexts, hd = m.block_size, [], m.head_dim  # queries, ...: (b, H, T, hd)
    for q_start in range(0, x.shape[1], size):
        q = queries[:, :, q_start:q_start + size]  # (b, H, rows, hd)
        q_end, parts = q_start + q.shape[2], []
        row_max = q.new_full((*q.shape[:3], 1), -torch.inf)  # (b, H, rows, 1)
        row_sum, out = torch.zeros_like(row_max), torch.zeros_like(q)
        for k_start in range(0, q_end - stop, size):
            k_end = min(k_start + size - shrink, q_end)
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]  # (b, H, cols, hd)
            s = q @ k.mT / {"sqrt head_dim": hd**0.5, "sqrt d_out": m.d_out**0.5,
                            "head_dim": hd, "none": 1}[scale]  # (b, H, rows, cols)
            i, j = torch.arange(q_start, q_end)[:, None], torch.arange(k_start, k_end)
            s = d(s) if drop == "scores" else s
            s = s.masked_fill({"causal": j > i, "too": j >= i, "inverted": j <= i, "none": j < 0,
                               "whole": (j >= 0) & (k_end > q_start + 1), "origin": j - k_start >
                               i - q_start, "no column offset": j - k_start > i}[mask], -torch.inf)
            s = d(s) if drop == "masked scores" else s
            if combine != "online":  # each block normalised on its own
                parts.append(d(torch.softmax(s, -1)) @ v)
                continue
            new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
            new_max, first = s.amax(-1, keepdim=True) if own_max else new_max, row_max == -torch.inf
            w, f = torch.exp(s - new_max), 1.0 if own_max else {
                "old - new": torch.exp(row_max - new_max),
                "old / new": torch.where(first, 0.0, row_max / new_max),
                "new - old": torch.where(first, 0.0, torch.exp(new_max - row_max))}[factor]
            w_sum = (d(w) if drop == "sum" else w).sum(-1, keepdim=True)
            row_sum = row_sum * (f**power if rescale_sum else 1) + w_sum
            out = (d(out) if drop == "running output" else out) * (f if rescale_out else 1)
            v = d(v) if drop == "values" else v
            out = out + {"weights": d(w), "sum": d(w), "twice": d(d(w))}.get(drop, w) @ v
            out, row_max = out / row_sum if divide == "inside" else out, new_max
        end = out / row_sum if divide == "end" else out
        block = {"mean": sum(parts) / max(len(parts), 1), "sum": sum(parts)}.get(combine, end)
        contexts.append(d(block) if drop == "context" else block)
    return m.out_proj(torch.cat(contexts, 2).transpose(1, 2).flatten(2))  # (b, T, d_out)
# fmt: on


class Recorder(TorchFunctionMode):
    """What the torch functions called inside a ``with`` block computed (the module's docstring).

    ``scores``: the shapes of the products of scores (``nan``: one held nan); ``wide``: the
    functions that made a tensor of scores wider than a block, ``widest`` its width, ``read``:
    those that read one; ``max_axes``: ``(dims, shape)`` of maxima over other axes than the last;
    ``exps``: per ``exp`` of a per-row statistic, whether it was all ones; ``book``: book code run.
    """

    def __init__(self, head_dim, block_size, widths):
        super().__init__()
        self.hd, self.size, self.widths = head_dim, block_size, {1, head_dim, *widths}
        self.scores, self.wide, self.read, self.max_axes, self.exps, self.book = [], [], set(), [], [], []
        self.nan = self.torch_attention = False
        self.widest, self._wide, self._products, self._saved = 0, [], [], []

    def __enter__(self):
        for owner, name in BOOK:
            self._saved.append((owner, name, vars(owner)[name]))
            label, book = f"{owner.__name__}.{name}", self.book
            setattr(owner, name, lambda *a, f=vars(owner)[name], n=label: book.append(n) or f(*a))
        return super().__enter__()

    def __exit__(self, *exc):
        for owner, name, original in self._saved:
            setattr(owner, name, original)
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs, name = kwargs or {}, getattr(func, "__name__", "")
        self.torch_attention |= func in (F.scaled_dot_product_attention, F.multi_head_attention_forward)
        if func is F.dropout and kwargs.get("training", True) and kwargs.get("p", 0.5) > 0:
            return dropped(args[0], kwargs.get("p", 0.5))
        self.read |= {name} if any(a is w for a in args for w in self._wide) else set()
        out = func(*args, **kwargs)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return out
        trimmed = out.shape[: max((i + 1 for i, n in enumerate(out.shape) if n > 1), default=0)]
        if name in PRODUCTS and tensors and tensors[0].shape[-1] == self.hd:
            self._score(out.shape, out)
        elif name in ("mul", "__mul__") and trimmed[-1:] == (self.hd,) and len(trimmed) >= 4:
            self._products.append(out)  # queries times keys, to be summed over head_dim
        elif name == "sum" and any(a is t for a in tensors for t in self._products):
            self._score(trimmed, out)
        elif name in ("amax", "max") and len(tensors) == 1 and out.shape != tensors[0].shape:
            t = tensors[0]
            dims = kwargs.get("dim", args[1] if len(args) > 1 else range(t.dim()))
            dims = sorted({d % t.dim() for d in ([dims] if isinstance(dims, int) else dims)})
            if t.shape[-1] not in (1, self.hd) and t.shape[-1] <= self.size and dims != [t.dim() - 1]:
                self.max_axes.append((dims, tuple(t.shape)))
        elif name == "exp" and out.dim() >= 3 and out.shape[-1] == 1:
            self.exps.append(bool((out == 1).all()))
        rows, cols = out.shape[-2:] if out.dim() >= 3 else (0, 1)
        if cols not in self.widths and rows != self.hd and max(rows, cols) > self.size:
            self.wide.append(name)
            self._wide.append(out)
            self.widest = max(self.widest, rows, cols)
        return out

    def _score(self, shape, out):
        """Note a product of scores, unless it ends in a width (then it mixes values)."""
        if len(shape) >= 2 and shape[-1] not in self.widths - {1}:
            self.scores.append(tuple(shape))
            self.widest = max(self.widest, *shape[-2:])
            self.nan |= bool(out.isnan().any())


class Run:
    """The reader's class built on configuration ``c`` and called on a seeded input in eval mode,
    under a :class:`Recorder` (``r``); its output or error, and the facts messages quote."""

    def __init__(self, cls, c):
        self.cls, self.c, self.m, self.out, self.error, self.always = cls, c, None, None, None, True
        self.x = torch.randn(2, c.num_tokens, c.d_in, generator=torch.Generator().manual_seed(1000 + c.seed))
        self.r, self.bs, self.bs2 = self.recorder(), c.block_size, 2 * c.block_size
        self.last, self.end2, self.head_dim = c.block_size - 1, 2 * c.block_size - 1, c.d_out // c.num_heads
        torch.manual_seed(c.seed)
        try:
            self.m = cls(*c[:3], c.dropout, c.num_heads, block_size=c.block_size, qkv_bias=c.qkv_bias)
            self.m.eval().W_query.weight.mul_(c.query_gain)
            with self.r:
                self.out = self.m(self.x)
        except Exception as error:
            self.error = error

    def recorder(self):
        return Recorder(self.c.d_out // self.c.num_heads, self.c.block_size, (self.c.d_in, self.c.d_out))

    def qkv(self):
        """The module's queries, keys and values, each ``(b, num_heads, num_tokens, head_dim)``."""
        return [self.m.split_heads(getattr(self.m, n)(self.x)) for n in ("W_query", "W_key", "W_value")]

    def blocks(self, hide_future=False):
        """``(q, output, recorder)`` of ``query_block`` on each block of queries; with
        ``hide_future`` the keys and values after the block are nan."""
        (queries, keys, values), found = self.qkv(), []
        for q_start in range(0, self.c.num_tokens, self.bs):
            q, k, v = queries[:, :, q_start : q_start + self.bs], keys.clone(), values.clone()
            if hide_future:
                k[:, :, q_start + q.shape[2] :] = v[:, :, q_start + q.shape[2] :] = torch.nan
            with self.recorder() as r:
                found.append((q, self.m.query_block(q, k, v, q_start), r))
        return found

    error_text = property(lambda s: describe_error(s.error))
    max_axes_seen = property(lambda s: bool(s.r.max_axes))
    gap = property(lambda s: float((s.out - s.right).abs().nan_to_num(torch.inf).max()))
    all_nan = property(lambda s: isinstance(s.out, torch.Tensor) and bool(s.out.isnan().all()))
    has_nan = property(lambda s: isinstance(s.out, torch.Tensor) and bool(s.out.isnan().any()))
    wide = property(lambda s: s.r.widest > s.bs)
    factor_one = property(lambda s: bool(s.r.exps) and all(s.r.exps))
    overflows = property(lambda s: s.c.query_gain > 1 and not bool(s.out.isfinite().all()))
    blocks_n = property(lambda s: -(-s.c.num_tokens // s.bs))
    causal = property(lambda s: s.blocks_n * (s.blocks_n + 1) // 2)
    twice = property(lambda s: s.computed > s.causal)
    future = property(lambda s: s.twice and any(r.nan for *_, r in s.blocks(hide_future=True)))
    times = property(lambda s: s.computed / s.causal)
    divisible = property(lambda s: s.c.num_tokens - s.c.num_tokens % s.bs)

    @property
    def call(self):
        """How the check built the class, as the reader would type it."""
        c, bias = self.c, ", qkv_bias=True" if self.c.qkv_bias else ""
        return (f"{self.cls.__name__}(d_in={c.d_in}, d_out={c.d_out}, context_length="
                f"{c.context_length}, dropout={c.dropout}, num_heads={c.num_heads}, "
                f"block_size={c.block_size}{bias})")  # fmt: skip

    @property
    def partial(self):
        """Right on the longest length the block divides, though wrong on this one."""
        x = self.x[:, : self.divisible]
        if self.divisible in (0, self.c.num_tokens):
            return False
        return same(self.m(x), split_attention(self.m, x, self.c.num_heads))

    @property
    def computed(self):
        """Blocks of scores computed, in block_size × block_size units."""
        elements = sum(torch.Size(s).numel() for s in self.r.scores) / (2 * self.c.num_heads)
        return round(elements * self.blocks_n**2 / self.c.num_tokens**2)

    @property
    def story(self):
        """What held more than a block of scores, in the reader's terms."""
        if self.r.read & SOFTMAXES:
            how = "Your softmax reads all of a row's scores at once"
        elif "cat" in self.r.wide:
            how = "Your code joins the blocks' scores with torch.cat into a whole row"
        else:
            return ""
        return f"{how}: that is the whole score matrix again, one row block at a time. "

    @property
    def max_axes(self):
        dims, shape = self.r.max_axes[0]
        return f"dimension{'s' * (len(dims) > 1)} {', '.join(map(str, dims))} of {shape}"

    @property
    def scoreless(self):
        """The first block of queries whose output is all nan, "first to last"."""
        first = int(self.out.isnan().all(-1).any(0).nonzero()[0]) // self.bs * self.bs
        return f"{first} to {min(first + self.bs, self.c.num_tokens) - 1}"

    @property
    def largest(self):
        queries, keys, _ = self.qkv()
        scores = queries @ keys.mT / self.head_dim**0.5  # (b, num_heads, T, T)
        return float(scores.masked_fill(self.m.mask[: len(self.x[0]), : len(self.x[0])], -torch.inf).max())
