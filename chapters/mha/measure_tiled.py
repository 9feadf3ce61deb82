"""Chapter 7's measurements: the split, the tiled module and the fused kernel at long sequences.

``measure_lengths`` times the three side by side with ``mha.bench``'s timer (rounds, quietest
round, quartiles as the spread) and counts each one's page faults per call once they stop
falling; ``TILED_TARGETS`` are the chapter's two claims, judged by ``mha.bench``'s
noise-aware ``target_verdict``. ``block_fault_experiment`` asks whether the block size decides
the page faults, in four fresh processes: glibc's default settings, each of chapter 5's two
settings alone (no ``mmap``; no freed memory returned), and both; ``block_fault_story`` says
what those runs tell apart, and no more.
"""

import argparse
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .bench.comparison import Target
from .bench.faults import KEEP_FREED_MEMORY
from .bench.timing import prepare, time_in_rounds
from .bench.usage import resource_use
from .tiled import TiledAttention

#: The configuration of every measurement: one sequence, GPT-2-small's head count, one thread.
D_OUT, NUM_HEADS = 192, 12
NAMES = ("split", "tiled", "fused")
#: The split is measured up to this length: its score tensors grow with T² (at 4096 tokens each
#: of its four would take 768 MiB).
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
        "TiledAttention within 4× of the fused kernel (1 × 4096 tokens, d_out 192, 12 heads)",
        implementation="tiled",
        references=("fused",),
        batch=1,
        num_tokens=4096,
        d_out=D_OUT,
        num_heads=NUM_HEADS,
        max_time_ratio=4.0,
    ),
)
#: The tiled module may show at most this share of the split's page faults.
MAX_FAULT_SHARE = 0.01
#: The block experiment's glibc settings: the defaults, each of chapter 5's two settings alone,
#: and both. (glibc documents that setting either one also stops its mmap threshold from rising.)
BLOCK_SETTINGS = {
    "default": {},
    "no mmap": {"MALLOC_MMAP_MAX_": KEEP_FREED_MEMORY["MALLOC_MMAP_MAX_"]},
    "no trim": {"MALLOC_TRIM_THRESHOLD_": KEEP_FREED_MEMORY["MALLOC_TRIM_THRESHOLD_"]},
    "both": KEEP_FREED_MEMORY,
}
#: A setting "removes" a block size's faults when at most this share of them is left.
REMOVED_SHARE = 0.2


@dataclass(frozen=True)
class Point:
    """One module at one length: its ``Timing`` and its page faults per call."""

    name: str
    num_tokens: int
    timing: object  # mha.bench.Timing
    minor_faults: float


def steady_faults(module, x, *, max_warmup=3):
    """Minor page faults per call of ``module(x)``, once they stop falling.

    A program's heap grows during its first calls; only after that does a call show what it
    costs on every call. At most ``max_warmup`` warm-up measurements run.
    """
    previous = math.inf
    for _ in range(max_warmup):
        faults = resource_use(module, x, 1).minor_faults
        if not faults < previous:
            break
        previous = faults
    return resource_use(module, x, 1).minor_faults


def names_at(num_tokens, names=NAMES):
    """The modules timed at ``num_tokens``: the split only up to ``SPLIT_MAX_TOKENS``."""
    return tuple(n for n in names if n != "split" or num_tokens <= SPLIT_MAX_TOKENS)


def measure_lengths(
    tokens=(256, 1024, 4096),
    *,
    fault_max_tokens=SPLIT_MAX_TOKENS,
    min_run_time=0.02,
    min_blocks=3,
    max_run_time=2.0,
    rounds=1,
    budget=30,
):
    """``{num_tokens: {name: Point}}`` for the split, tiled and fused modules (batch 1).

    Timings come from ``mha.bench.time_in_rounds``; the page faults from ``steady_faults``,
    afterwards, so the counting never disturbs a timing. Beyond ``fault_max_tokens`` the
    faults are not counted (``nan``): a call takes too long there for a chapter's budget.
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
                    steady_faults(module, x) if t <= fault_max_tokens else math.nan,
                )
                for name, module in modules.items()
            }
    return results


def fault_verdict(tiled_faults, split_faults, max_share=MAX_FAULT_SHARE):
    """Whether the tiled module stayed within ``max_share`` of the split's page faults."""
    if split_faults == 0:
        return "untested: the split did not fault here"
    return "met" if tiled_faults <= max_share * split_faults else "missed"


def block_faults(block_sizes, num_tokens):
    """``{block_size: page faults per call}`` of ``TiledAttention`` in this process."""
    torch.manual_seed(0)
    x = torch.randn(1, num_tokens, D_OUT)  # (b, num_tokens, d_in)
    found = {}
    with torch.no_grad():
        for block_size in block_sizes:
            module = TiledAttention(D_OUT, D_OUT, num_tokens, 0.0, NUM_HEADS, block_size)
            found[block_size] = steady_faults(module.eval(), x)
    return found


def block_fault_experiment(block_sizes=(64, 256), num_tokens=1024):
    """``{setting: {block_size: faults per call}}`` from fresh processes, run side by side.

    One process per ``BLOCK_SETTINGS`` entry: glibc's defaults, no block from ``mmap``, no
    freed memory returned, and both (chapter 5's ``KEEP_FREED_MEMORY``).
    """
    chapters = Path(__file__).resolve().parents[1]
    base = {k: v for k, v in os.environ.items() if k not in KEEP_FREED_MEMORY}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(chapters), base.get("PYTHONPATH")]))
    base["OMP_NUM_THREADS"] = "1"
    argv = [
        sys.executable,
        "-c",
        "from mha.measure_tiled import main; raise SystemExit(main())",
        "--tokens",
        str(num_tokens),
        "--blocks",
        *map(str, block_sizes),
    ]
    running = {
        setting: subprocess.Popen(
            argv, env={**base, **extra}, cwd=chapters, text=True, stdout=subprocess.PIPE
        )
        for setting, extra in BLOCK_SETTINGS.items()
    }
    results = {}
    for setting, process in running.items():
        out, _ = process.communicate()
        if process.returncode:
            raise RuntimeError(f"the {setting!r} process failed (exit {process.returncode})")
        results[setting] = {int(k): v for k, v in json.loads(out).items()}
    return results


def removes(results, setting, block_size, share=REMOVED_SHARE):
    """Whether ``setting`` left at most ``share`` of ``block_size``'s default faults."""
    return results[setting][block_size] <= share * results["default"][block_size]


def block_fault_story(results, faulting):
    """What the four runs of ``block_fault_experiment`` show about the ``faulting`` sizes.

    It names a cause only where the runs separate it: a setting that removes the faults
    alone, while the other alone does not.
    """
    if not faulting:
        return "Neither block size faulted here, so the runs tell nothing about the cause."
    stories = []
    for size in sorted(faulting):
        mmap, trim = removes(results, "no mmap", size), removes(results, "no trim", size)
        both = removes(results, "both", size)
        left = {s: f"{results[s][size]:,.0f}" for s in BLOCK_SETTINGS}
        if mmap and not trim:
            story = (
                f"without mmap {left['no mmap']} per call are left, keeping freed memory "
                f"alone leaves {left['no trim']}: fresh mmaps cause them"
            )
        elif trim and not mmap:
            story = (
                f"keeping freed memory alone leaves {left['no trim']} per call, without "
                f"mmap {left['no mmap']}: memory returned to the kernel causes them"
            )
        elif mmap and trim:
            story = (
                f"either setting alone removes them ({left['no mmap']} and {left['no trim']} "
                "left): this run cannot tell mmap from returned memory"
            )
        elif both:
            story = (
                f"only both settings together remove them ({left['both']} left; alone "
                f"{left['no mmap']} and {left['no trim']})"
            )
        else:
            story = (
                f"even with both settings {left['both']} per call are left: the allocator "
                "explains only part of them, or none"
            )
        stories.append(f"Blocks of {size}: {story}.")
    for size in sorted(set(results["default"]) - set(faulting)):
        alone = [s for s in ("no mmap", "no trim") if results[s][size] > 10]
        if alone:
            counts = " and ".join(f"{results[s][size]:,.0f} under {s!r}" for s in alone)
            stories.append(
                f"Blocks of {size} fault under one setting alone ({counts} per call): glibc "
                "documents that setting either one also stops its mmap threshold from "
                "rising, so it stays at 128 KiB."
            )
    return " ".join(stories)


def score_block_bytes(block_size, num_heads=NUM_HEADS, batch=1):
    """Bytes of one ``(batch, num_heads, block_size, block_size)`` float32 score block."""
    return batch * num_heads * block_size * block_size * 4


def main(argv=None):
    """Print ``block_faults`` as JSON: what each process of the block experiment runs."""
    parser = argparse.ArgumentParser(prog="mha.measure_tiled", description=main.__doc__)
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument("--blocks", type=int, nargs="+", required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(json.dumps(block_faults(args.blocks, args.tokens)))
    return 0


class _NewTensors(TorchDispatchMode):
    """The shapes of the tensors that operators create (views, which share memory, left out)."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and not func.is_view:
            self.shapes.append(tuple(out.shape))
        return out


def new_tensors_of_shape(module, x, shape):
    """How many tensors of ``shape`` one forward of ``module`` on ``x`` creates."""
    counter = _NewTensors()
    with torch.no_grad(), counter:
        module(x)
    return counter.shapes.count(tuple(shape))
