"""Count the operators a forward pass dispatches, to see where per-head overhead comes from."""

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: The ATen operators that do matrix multiplication on the CPU and GPU paths we use.
MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "_scaled_dot_product_flash_attention_for_cpu",
                        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention"})


class _OpCounter(TorchDispatchMode):
    """Records the name of every ATen operator that runs while the mode is active,
    and the multiply-adds of each matrix multiplication."""

    def __init__(self):
        super().__init__()
        self.counts = Counter()
        self.matmul_sizes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.counts[name] += 1
        out = func(*args, **(kwargs or {}))
        if name in ("mm", "addmm", "bmm", "baddbmm"):
            a = args[-2]  # the left factor: (..., n, k); the output is (..., n, m)
            self.matmul_sizes.append(out.numel() * a.shape[-1])
        return out


def count_ops(module, x):
    """A ``Counter`` of ATen operator names for one forward pass of ``module`` on ``x``."""
    counter = _OpCounter()
    with torch.no_grad(), counter:
        module(x)
    return counter.counts


def count_matmuls(module, x):
    """How many matrix-multiplication kernels one forward pass of ``module`` launches."""
    return sum(n for name, n in count_ops(module, x).items() if name in MATMUL_OPS)


def matmul_sizes(module, x):
    """The multiply-adds done by each matrix multiplication of one forward pass, in call order."""
    counter = _OpCounter()
    with torch.no_grad(), counter:
        module(x)
    return counter.matmul_sizes
