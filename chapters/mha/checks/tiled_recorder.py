"""Chapter 7's one shape recorder, for a practice that never holds a score matrix larger than a
block: what a forward computes, seen as the torch functions it calls (:class:`Recorder`)."""

import torch

from .shortcuts import Watch

PRODUCTS, SOFTMAX = {"matmul", "__matmul__", "bmm", "mm", "einsum"}, {"softmax", "logsumexp"}


class Recorder(Watch):
    """A :class:`.shortcuts.Watch` (the check's dropout, PyTorch's attention seen) that notes, in
    a forward of configuration ``c`` (a :data:`.tiled.Config`), the shapes of the products over
    ``head_dim`` (``scores``), each tensor of scores wider than a block with the function that
    made it (``wide_scores``), the functions that read one (``read``), maxima over other axes
    than the keys' (``maxima``), and whether each ``exp`` of a per-row statistic was all ones
    (``exps``)."""

    def __init__(self, c):
        super().__init__()
        self.hd, self.bs, self.widest = c.d_out // c.num_heads, c.block_size, 0
        self.widths = {self.hd, c.d_in, c.d_out}  # a product ending in one mixes values
        self.scores, self.maxima, self.exps, self.products, self.wide_scores = [], [], [], [], []
        self.read = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name, tensors = getattr(func, "__name__", ""), [a for a in args if torch.is_tensor(a)]
        wide = [t for _, t in self.wide_scores]
        self.read |= {name} if any(a is t for a in tensors for t in wide) else set()
        out = super().__torch_function__(func, types, args, kwargs)
        if name in ("amax", "max") and len(tensors) == 1 and tensors[0].dim() >= 2:
            dim = (kwargs or {}).get("dim", args[1] if len(args) > 1 else None)
            self._maximum(tensors[0], range(tensors[0].dim()) if dim is None else dim)
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
        if cols not in self.widths | {1} and rows != self.hd and max(rows, cols) > self.bs:
            self.wide_scores.append((name, out))
            self.widest = max(self.widest, rows, cols)
        return out

    def _maximum(self, t, dims):
        """Note a maximum of scores ``t`` over other axes than the last, the keys'."""
        dims = sorted({d % t.dim() for d in ([dims] if isinstance(dims, int) else dims)})
        if t.shape[-1] not in (1, self.hd) and t.shape[-1] <= self.bs and dims != [t.dim() - 1]:
            self.maxima.append((dims, tuple(t.shape)))

    def _score(self, shape):
        """Note a product of scores, unless it ends in a width (then it mixes values)."""
        if len(shape) >= 2 and shape[-1] not in self.widths:
            self.scores.append(tuple(shape))
            self.widest = max(self.widest, *shape[-2:])
