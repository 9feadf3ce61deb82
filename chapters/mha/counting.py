"""Count the operators a forward pass dispatches, to see where per-head overhead comes from."""

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: The ATen operators that do matrix multiplication on the CPU and GPU paths we use.
#: (``aten::matmul`` is not among them: it decomposes into ``mm``/``bmm`` before it reaches the
#: dispatcher.) A fused attention kernel counts as one call, although it does two products inside.
MATMUL_OPS = frozenset(
    {
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
    }
)
#: The matrix multiplications whose multiply-adds ``matmul_sizes`` can read off their operands.
PLAIN_MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm"})


class QuietDispatchMode(TorchDispatchMode):
    """A ``TorchDispatchMode`` for watching operators, with no ``torch.compile`` machinery.

    By default torch wraps a mode's ``__torch_dispatch__`` so that Dynamo (``torch.compile``)
    skips it, and the wrapper imports ``torch._dynamo`` on its first call: about 3.5 s of CPU
    in every process that counts operators. Nothing the book watches is compiled, so the book's
    modes opt out of the wrapper.
    """

    @classmethod
    def _should_skip_dynamo(cls):
        return False


class _OpCounter(QuietDispatchMode):
    """Records the name of every ATen operator that runs while the mode is active,
    and the multiply-adds of each plain matrix multiplication."""

    def __init__(self):
        super().__init__()
        self.counts = Counter()
        self.matmul_sizes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.counts[name] += 1
        out = func(*args, **(kwargs or {}))
        if name in PLAIN_MATMUL_OPS:
            a = args[-2]  # the left factor: (..., n, k); the output is (..., n, m)
            self.matmul_sizes.append(out.numel() * a.shape[-1])
        return out


def _run_counted(module, x):
    """One forward pass of ``module`` on ``x`` without gradients, under an ``_OpCounter``."""
    counter = _OpCounter()
    with torch.no_grad(), counter:
        module(x)
    return counter


def count_ops(module, x):
    """A ``Counter`` of ATen operator names for one forward pass of ``module`` on ``x``."""
    return _run_counted(module, x).counts


def operator_counts(module, x):
    """``(all ATen operator calls, matrix-multiplication calls)`` of one forward pass."""
    counts = count_ops(module, x)
    return sum(counts.values()), sum(n for name, n in counts.items() if name in MATMUL_OPS)


def count_matmuls(module, x):
    """How many matrix-multiplication operators one forward pass of ``module`` calls."""
    return operator_counts(module, x)[1]


def matmul_sizes(module, x):
    """The multiply-adds of each plain matrix multiplication in one forward pass, in call order."""
    return _run_counted(module, x).matmul_sizes
