"""Chapter 7's measurements: the split, the tiled module and the fused kernel at long sequences.

``measure_lengths`` times the three side by side with ``mha.bench``'s timer (rounds, quietest
round, quartiles as the spread) and counts each one's page faults per call once they stop
falling; ``TILED_TARGETS`` are the chapter's two claims, judged by ``mha.bench``'s
noise-aware ``target_verdict``. Page faults are reported as measured, never judged: how many a
call takes depends on the allocator's history in the process (glibc's thresholds move with what
was freed before), not only on the module.

``score_memory`` is the deterministic side: how many score tensors one forward makes, their
bytes in total, and the most bytes of them alive at once. It counts storages as operators create
and free them, so its answer is the same on every run, machine and CPU code path.
"""

import math
import weakref
from dataclasses import dataclass
from functools import partial

import torch

from .bench.comparison import Target
from .bench.timing import prepare, time_in_rounds
from .bench.usage import resource_use
from .counting import QuietDispatchMode
from .tiled import causal_block_pairs

#: The configuration of every measurement: one sequence, GPT-2-small's head count, one thread.
D_OUT, NUM_HEADS = 192, 12
NAMES = ("split", "tiled", "fused")
#: The split is measured up to this length: its score tensors grow with T² (at 2048 tokens each
#: of its four would take 192 MiB). The longest length is 1536: long enough to show the tiled
#: module past the split, short enough for a chapter's budget on the portable code path.
SPLIT_MAX_TOKENS = 1024

TILED_TARGETS = (
    Target(
        "TiledAttention at least 2× faster than the split (1 × 1024 tokens, d_out 192, 12 heads)",
        implementation="tiled",
        references=("split",),
        batch=1,
        num_tokens=1024,
        d_out=D_OUT,
        num_heads=NUM_HEADS,
        max_time_ratio=0.5,
    ),
    Target(
        "TiledAttention within 4× of the fused kernel (1 × 1536 tokens, d_out 192, 12 heads)",
        implementation="tiled",
        references=("fused",),
        batch=1,
        num_tokens=1536,
        d_out=D_OUT,
        num_heads=NUM_HEADS,
        max_time_ratio=4.0,
    ),
)


@dataclass(frozen=True)
class Point:
    """One module at one length: its ``Timing`` and its page faults per call."""

    name: str
    num_tokens: int
    timing: object  # mha.bench.Timing
    minor_faults: float


def steady_faults(module, x, *, max_calls=4):
    """Minor page faults per call of ``module(x)``, once they stop falling.

    A program's heap grows during its first calls; only after that does a call show what it
    costs on every call. Each call is measured on its own (it needs no warm-up of its own: the
    calls before it are one); the first call that faults no less than the one before it gives
    the answer, and the last of ``max_calls`` calls does if the count keeps falling.
    """
    previous = math.inf
    for _ in range(max_calls):
        faults = resource_use(module, x, 1, warm_up=False).minor_faults
        if not faults < previous:
            break
        previous = faults
    return faults


def faults_per_call(timing, module, x):
    """Minor page faults per call of ``module(x)``, read off its timing when it can be.

    A module too slow for ``measure``'s first blocks is timed on more blocks, and their calls'
    page faults come back in ``timing.usage``: those calls follow at least two calls of the same
    module, so the heap has grown. A module quick enough to need no such blocks has no usage;
    ``steady_faults`` then counts on calls of its own.
    """
    if timing.usage is not None:
        return timing.usage.minor_faults
    return steady_faults(module, x)


def names_at(num_tokens, names=NAMES):
    """The modules timed at ``num_tokens``: the split only up to ``SPLIT_MAX_TOKENS``."""
    return tuple(n for n in names if n != "split" or num_tokens <= SPLIT_MAX_TOKENS)


def measure_lengths(
    tokens=(256, 1024, 1536),
    *,
    fault_max_tokens=SPLIT_MAX_TOKENS,
    min_run_time=0.02,
    min_blocks=3,
    max_run_time=2.0,
    rounds=1,
    budget=30,
):
    """``{num_tokens: {name: Point}}`` for the split, tiled and fused modules (batch 1).

    Timings come from ``mha.bench.time_in_rounds``; the page faults from ``faults_per_call``:
    the timed calls' own, or afterwards, so the counting never disturbs a timing. Beyond
    ``fault_max_tokens`` the faults are not counted (``nan``): a call takes too long there for
    a chapter's budget.
    """
    cases = [partial(prepare, names_at(t), 1, t, D_OUT, NUM_HEADS) for t in tokens]
    timings = time_in_rounds(
        cases,
        min_run_time=min_run_time,
        min_blocks=min_blocks,
        max_run_time=max_run_time,
        rounds=rounds,
        budget=budget,
    )
    results = {}
    for t, case, timing in zip(tokens, cases, timings, strict=True):
        modules, x = case()
        with torch.no_grad():
            results[t] = {
                name: Point(
                    name,
                    t,
                    timing[name],
                    faults_per_call(timing[name], module, x) if t <= fault_max_tokens else math.nan,
                )
                for name, module in modules.items()
            }
    return results


def score_block_bytes(block_size, num_heads=NUM_HEADS, batch=1):
    """Bytes of one ``(batch, num_heads, block_size, block_size)`` float32 score block."""
    return batch * num_heads * block_size * block_size * 4


def score_shapes(module, batch, num_tokens):
    """The shapes of ``module``'s score tensors for ``batch`` sequences of ``num_tokens``.

    The split's are ``(batch, num_heads, num_tokens, num_tokens)``; a module with a
    ``block_size`` makes one ``(batch, num_heads, rows, cols)`` shape per block pair it computes.
    """
    heads = module.num_heads
    size = getattr(module, "block_size", None)
    if size is None:
        return {(batch, heads, num_tokens, num_tokens)}
    shapes = set()
    for i, j in causal_block_pairs(num_tokens, size):
        rows = min(size, num_tokens - i * size)
        cols = min(size, (i * size + rows) - j * size)
        shapes.add((batch, heads, rows, cols))
    return shapes


@dataclass(frozen=True)
class ScoreMemory:
    """What one forward does with its score tensors: made, in bytes, and alive at once."""

    tensors: int
    total_bytes: int
    peak_bytes: int
    peak_tensors: int


class _ScoreStorages(QuietDispatchMode):
    """Follows the storages of new score-shaped tensors from their creation to their release.

    A storage is counted once, however many tensors (views, reshapes) share it; a
    ``weakref.finalize`` on it notes when the last of them is gone.
    """

    def __init__(self, shapes):
        super().__init__()
        self.shapes = {tuple(s) for s in shapes}
        self.alive = {}  # data_ptr -> bytes
        self.tensors = self.total_bytes = self.peak_bytes = self.peak_tensors = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and tuple(t.shape) in self.shapes:
                self._note(t.untyped_storage())
        return out

    def _note(self, storage):
        key = storage.data_ptr()
        if key in self.alive:
            return
        self.alive[key] = storage.nbytes()
        weakref.finalize(storage, self.alive.pop, key, None)
        self.tensors += 1
        self.total_bytes += storage.nbytes()
        alive = sum(self.alive.values())
        if alive > self.peak_bytes:
            self.peak_bytes, self.peak_tensors = alive, len(self.alive)


def score_memory(module, x):
    """``ScoreMemory`` of one forward of ``module`` on ``x`` (batch, num_tokens, d_in).

    Only tensors shaped like the module's scores (``score_shapes``) count, and only those the
    forward creates: the mask buffer and the parameters exist before it. The answer depends on
    the shapes and on the order of the operators, not on the machine, the process's history or
    the module's ``context_length``.
    """
    batch, num_tokens, _ = x.shape
    counter = _ScoreStorages(score_shapes(module, batch, num_tokens))
    with torch.no_grad(), counter:
        module(x)
    return ScoreMemory(
        counter.tensors, counter.total_bytes, counter.peak_bytes, counter.peak_tensors
    )
