"""Chapter 7's one shape recorder, for a practice that never holds a score matrix larger than a
block: what a forward computes, seen as the torch functions it calls (:class:`Recorder`)."""

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ..attention import MultiHeadAttention
from ..tiled import TiledAttention

PRODUCTS, SOFTMAXES = {"matmul", "__matmul__", "bmm", "mm", "einsum"}, {"softmax", "logsumexp"}
TORCH_ATTENTION = (F.scaled_dot_product_attention, F.multi_head_attention_forward)
BOOK = ((TiledAttention, "query_block"), (MultiHeadAttention, "forward"))


def dropped(t, p):
    """Dropout that keeps the entries whose row and column add up to an even number: for blocks
    that start at even positions, the same weights as in the whole matrix."""
    rows = torch.arange(t.shape[-2])[:, None] if t.dim() > 1 else 0
    return t * ((rows + torch.arange(t.shape[-1])) % 2 == 0) / (1 - p)


class Recorder(TorchFunctionMode):
    """What the torch functions called inside a ``with`` block computed; dropout made
    deterministic (``dropped``); the book's ``TiledAttention.query_block`` and
    ``MultiHeadAttention.forward`` noted in ``book`` when they run.

    ``scores``: the shapes of the products over ``head_dim`` (``@``, ``einsum``, an elementwise
    product summed over it), ``nan``: one held nan; ``wide``: functions that made a tensor of
    scores wider than a block, ``widest`` its width, ``read``: those that read one; ``max_axes``:
    ``(dims, shape)`` of maxima over other axes than the last; ``exps``: per ``exp`` of a per-row
    statistic, whether it was all ones; ``torch_attention``: PyTorch's own attention ran.
    """

    def __init__(self, c):
        """Record a forward of configuration ``c`` (a :data:`.tiled.Config`)."""
        super().__init__()
        self.hd, self.size = c.d_out // c.num_heads, c.block_size
        self.widths = {1, self.hd, c.d_in, c.d_out}
        self.scores, self.wide, self.read, self.max_axes, self.exps = [], [], set(), [], []
        self.book, self._wide, self._products, self._saved = [], [], [], []
        self.nan, self.torch_attention, self.widest = False, False, 0

    def __enter__(self):
        for owner, name in BOOK:
            self._saved.append((owner, name, vars(owner)[name]))
            setattr(owner, name, self._recording(f"{owner.__name__}.{name}", vars(owner)[name]))
        return super().__enter__()

    def __exit__(self, *exc):
        for owner, name, original in self._saved:
            setattr(owner, name, original)
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs, name = kwargs or {}, getattr(func, "__name__", "")
        self.torch_attention |= func in TORCH_ATTENTION
        if func in (F.dropout, torch.dropout):  # (t, p=, training=) and (t, p, train): made even
            p, training = [*args, kwargs.get("p", 0.5), kwargs.get("training", True)][1:3]
            return dropped(args[0], p) if training and p > 0 else args[0]
        self.read |= {name} if any(a is w for a in args for w in self._wide) else set()
        tensors, out = [a for a in args if torch.is_tensor(a)], func(*args, **kwargs)
        if name in ("amax", "max") and len(tensors) == 1 and tensors[0].dim() >= 2:
            t, dims = tensors[0], kwargs.get("dim", args[1] if len(args) > 1 else None)
            dims = range(t.dim()) if dims is None else [dims] if isinstance(dims, int) else dims
            dims, keys = sorted({d % t.dim() for d in dims}), [t.dim() - 1]  # keys: the last axis
            if t.shape[-1] not in (1, self.hd) and t.shape[-1] <= self.size and dims != keys:
                self.max_axes.append((dims, tuple(t.shape)))
        if not torch.is_tensor(out) or not out.is_floating_point():
            return out
        trimmed = out.shape[: max((i + 1 for i, n in enumerate(out.shape) if n > 1), default=0)]
        if name in PRODUCTS and tensors and tensors[0].shape[-1] == self.hd:
            self._score(out.shape, out)
        elif name in ("mul", "__mul__") and trimmed[-1:] == (self.hd,) and len(trimmed) >= 4:
            self._products.append(out)  # queries times keys, to be summed over head_dim
        elif name == "sum" and any(a is t for a in tensors for t in self._products):
            self._score(trimmed, out)
        elif name == "exp" and out.dim() >= 3 and out.shape[-1] == 1:
            self.exps.append(bool((out == 1).all()))
        rows, cols = out.shape[-2:] if out.dim() >= 3 else (0, 1)
        if cols not in self.widths and rows != self.hd and max(rows, cols) > self.size:
            self.wide, self.widest = [*self.wide, name], max(self.widest, rows, cols)
            self._wide.append(out)
        return out

    def _recording(self, name, method):
        """``method``, noting ``name`` in ``book`` each time it runs."""
        return lambda *args, **kwargs: self.book.append(name) or method(*args, **kwargs)

    def _score(self, shape, out):
        """Note a product of scores, unless it ends in a width (then it mixes values)."""
        if len(shape) >= 2 and shape[-1] not in self.widths - {1}:
            self.scores.append(tuple(shape))
            self.widest = max(self.widest, *shape[-2:])
            self.nan |= bool(out.isnan().any())
