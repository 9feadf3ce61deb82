"""CPU time and page faults of a module's calls, read from ``resource.getrusage``.

``resource_use`` reads the process's resource usage around a module's calls: CPU time in user
mode, CPU time in the kernel (system time) and minor page faults, per call. A minor page fault is
the kernel handing the process a page of memory it touches for the first time: a fresh,
zero-filled page of a region just mapped. The sweep (``timing.run_sweep``) reports these next to
each time, and the allocator experiment (``faults``) compares them across malloc settings.
"""

import math
import time
from dataclasses import dataclass

import torch

try:
    import resource
except ImportError:  # Windows: no getrusage, so no page-fault counts
    resource = None


@dataclass(frozen=True)
class Usage:
    """Per call: wall-clock time, CPU time in user mode and in the kernel, minor page faults.

    CPU times add up over all threads, so with several threads they can exceed the wall time.
    Without ``resource`` (Windows) all but the wall time are ``nan``.
    """

    wall_ms: float
    user_ms: float
    sys_ms: float
    minor_faults: float


def backward_from(out, grad):
    """``out.backward(grad)``: the same gradients, as the backward of the scalar
    ``(out * grad).sum()``.

    Handed a gradient tensor, ``Tensor.backward`` imports ``torch.fx.experimental
    .symbolic_shapes`` (and sympy with it) the first time in a process: about 2 s of CPU that
    would land in whichever measurement came first. A scalar's backward needs no gradient.
    """
    (out * grad).sum().backward()


def _run(module, x, grad):
    out = module(x)  # (b, num_tokens, d_out)
    if grad is not None:
        backward_from(out, grad)


def now():
    """The process's resource usage and the wall clock at this moment; ``usage_since`` turns
    two such moments into a ``Usage`` per call."""
    return (resource.getrusage(resource.RUSAGE_SELF) if resource else None), time.perf_counter()


def usage_since(start, runs):
    """``Usage`` per call of the ``runs`` calls made since ``start`` (a ``now()``)."""
    (before, started), (after, ended) = start, now()
    wall_ms = (ended - started) / runs * 1e3
    if resource is None:
        return Usage(wall_ms, math.nan, math.nan, math.nan)
    return Usage(
        wall_ms=wall_ms,
        user_ms=(after.ru_utime - before.ru_utime) / runs * 1e3,
        sys_ms=(after.ru_stime - before.ru_stime) / runs * 1e3,
        minor_faults=(after.ru_minflt - before.ru_minflt) / runs,
    )


def resource_use(module, x, runs, *, grad=None, warm_up=True):
    """``Usage`` per call of ``module(x)`` (and ``.backward(grad)``), averaged over ``runs`` calls.

    With ``warm_up``, one untimed call comes first, so that memory the module keeps from call
    to call is in place; without it, the first call is measured too (the allocator experiment
    warms up on its own terms). Without ``grad`` the calls run under ``torch.no_grad()``.
    """
    context = torch.no_grad() if grad is None else torch.enable_grad()
    with context:
        if warm_up:
            _run(module, x, grad)
        start = now()
        for _ in range(runs):
            _run(module, x, grad)
        return usage_since(start, runs)
