"""Time the book's attention implementations side by side: the measuring half of the benchmark.

Chapter 5 imports these functions and ``python -m mha.bench`` (``__main__``) runs them, so the
chapter and the command measure the same way:

- times come from ``torch.utils.benchmark.Timer.blocked_autorange`` (warm-up, blocks of runs,
  CUDA synchronisation; the block size found in steps of 2, ``timer.BlockTimer``), given time
  for at least a few blocks, with a cap on the time one measurement may take
  (``timer.measure``), and taken in rounds that interleave implementations and
  configurations; each reported time is the median of a module's quietest round, with that
  round's quartiles as its spread (``time_in_rounds``);
- every implementation of one configuration gets the same weights (``variants.equivalent_modules``)
  and the same input, so each timing compares the same function;
- ``nn.MultiheadAttention`` is timed twice: as called (its fast path allowed) and with the fast
  path switched off (``FastPathOff``);
- FLOPs come from the shapes (``forward_flops``), operator calls from ``mha.counting``, CPU time
  and page faults per forward from ``usage.resource_use``; ``write_csv`` keeps the ``Row``s.

Judging the times (``comparison``), the text reports (``report``) and the allocator experiment
(``faults``) build on this module; it imports none of them.
"""

import contextlib
import csv
import dataclasses
import itertools
import math
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from ..counting import operator_counts
from ..tiled import TiledAttention
from ..variants import IMPLEMENTATIONS, equivalent_modules
from .timer import BlockTimer, measure
from .usage import Usage, backward_from, resource_use

#: The resource use of a configuration ``run_sweep`` does not measure it at.
NOT_MEASURED = Usage(math.nan, math.nan, math.nan, math.nan)

#: Everything the benchmark times: the book's implementations, and nn.MultiheadAttention once
#: more with its fast path switched off: what chapter 5 times and explains.
TIMED = (*IMPLEMENTATIONS, "torch_mha_nofast")
#: What ``python -m mha.bench`` times: the above, and chapter 7's ``TiledAttention``.
BENCHED = (*TIMED, "tiled")
#: Names for tables and legends.
LABELS = {
    "wrapper": "MultiHeadAttentionWrapper",
    "split": "MultiHeadAttention (split)",
    "combined_qkv": "MultiHeadAttentionCombinedQKV",
    "fused": "FusedMultiHeadAttention",
    "torch_mha": "nn.MultiheadAttention, fast path",
    "torch_mha_nofast": "nn.MultiheadAttention, fast path off",
    "tiled": "TiledAttention (blocks of 64)",
}
#: Column headings for text tables: at most 10 characters, so that three columns fit a phone.
COLUMNS = {
    "wrapper": "wrapper",
    "split": "split",
    "combined_qkv": "combined",
    "fused": "fused",
    "torch_mha": "torch fast",
    "torch_mha_nofast": "torch off",
    "tiled": "tiled",
}


@dataclass(frozen=True)
class Sweep:
    """Which configurations to time, and how long each measurement may take.

    A head-count sweep and a sequence-length sweep, at fixed ``d_out``.
    """

    d_out: int
    batch: int
    heads: tuple  # num_heads values of the head sweep, at heads_sweep_tokens
    heads_sweep_tokens: int
    tokens: tuple  # num_tokens values of the length sweep, at tokens_sweep_heads
    tokens_sweep_heads: int
    min_run_time: float  # seconds per Timer.blocked_autorange call
    min_blocks: int  # timed blocks wanted per measurement, so that a median has samples
    rounds: int  # interleaved rounds; each module reports its quietest round
    ceiling_size: int  # n of the n × n torch.mm that measures the matmul throughput
    max_run_time: float = 1.0  # seconds the one retry for min_blocks may take at most
    budget: float = math.inf  # seconds of timing after which no round starts, nothing is retried
    at_longest: tuple | None = None  # implementations timed at the longest length (None: all)
    min_blocks_long: int | None = None  # timed blocks from long_from tokens on (None: min_blocks)
    long_from: int | None = None  # the length sweep's num_tokens from which calls count as slow
    allocator_heads: int | None = None  # chapter 5's allocator experiment's heads (None: as here)

    def configurations(self):
        """``(sweep, num_tokens, num_heads)`` for every configuration, head sweep first."""
        heads = [("heads", self.heads_sweep_tokens, h) for h in self.heads]
        tokens = [("tokens", t, self.tokens_sweep_heads) for t in self.tokens]
        return heads + tokens

    def timed_at(self, sweep, num_tokens, implementations):
        """The ``implementations`` timed at one configuration (at the longest: ``at_longest``)."""
        if self.at_longest is None or (sweep, num_tokens) != ("tokens", self.tokens[-1]):
            return tuple(implementations)
        return tuple(n for n in implementations if n in self.at_longest)

    def allocator_configuration(self):
        """``(num_tokens, num_heads, d_out)`` of chapter 5's allocator experiment: the longest
        length, with ``allocator_heads`` heads as wide as the length sweep's."""
        heads = self.allocator_heads or self.tokens_sweep_heads
        return self.tokens[-1], heads, heads * (self.d_out // self.tokens_sweep_heads)

    def blocks_at(self, sweep, num_tokens):
        """Timed blocks per measurement at one configuration (from ``long_from`` tokens of the
        length sweep on: ``min_blocks_long``)."""
        long = self.long_from is not None and sweep == "tokens" and num_tokens >= self.long_from
        return self.min_blocks_long if long and self.min_blocks_long else self.min_blocks


HEAD_COUNTS = (1, 2, 4, 8, 12, 16)
#: Small enough for chapter 5 to stay quick, wide enough to show the crossover.
#: blocked_autorange makes a block long enough that the timer's own overhead vanishes (a few
#: ms here), and times blocks for min_run_time, so the sweep's time is about
#: max(3 blocks, min_run_time) × rounds × configurations, and at the longest lengths a call
#: that estimates the block size and min_blocks single calls per module; max_run_time and
#: budget bound it when other programs slow the machine down. One round: a second took the
#: sweep cell from 9 s to 14.6 s, and whether it started depended on how fast the first one
#: finished (about 6 s on a 2-core AMD EPYC, against the budget of 6 s). From 512 tokens on
#: (tens of milliseconds a call; a block is one call) every module is timed with 2 blocks (3
#: calls, with the block-size estimate): these counted calls, not the time-budgeted ones, are
#: what the slower portable code path lengthens. At 1024 tokens (a tenth of a second a call of
#: the split) only the three modules whose memory chapter 5 counts are timed. The allocator
#: experiment's 9 heads of 16 (d_out 144) make each of the split's score tensors 36 MiB at 1024
#: tokens: above glibc's 32 MiB cap, at about three quarters of the cost of 12 heads.
QUICK = Sweep(
    d_out=192,
    batch=1,
    heads=(1, 2, 4, 8, 16),
    heads_sweep_tokens=64,
    tokens=(16, 64, 256, 512, 1024),
    tokens_sweep_heads=12,
    min_run_time=0.01,
    min_blocks=3,
    max_run_time=0.5,
    rounds=1,
    budget=6,
    ceiling_size=512,
    at_longest=("wrapper", "split", "fused"),
    min_blocks_long=2,
    long_from=512,
    allocator_heads=9,
)
#: GPT-2-small width (d_out 768, 12 heads); a minute or two on two idle CPU cores.
FULL = Sweep(
    d_out=768,
    batch=1,
    heads=HEAD_COUNTS,
    heads_sweep_tokens=128,
    tokens=(16, 32, 64, 128, 256, 512, 1024),
    tokens_sweep_heads=12,
    min_run_time=0.2,
    min_blocks=5,
    max_run_time=3.0,
    rounds=3,
    budget=300,
    ceiling_size=1024,
)


@dataclass(frozen=True)
class Row:
    """One implementation at one configuration: a line of the CSV."""

    sweep: str  # "heads" or "tokens": which sweep this configuration belongs to
    implementation: str  # one of TIMED
    timed: str  # "forward", or "forward+backward"
    device: str
    threads: int
    batch: int
    num_tokens: int
    d_in: int
    d_out: int  # total output width, for every implementation
    num_heads: int
    median_ms: float  # median of the quietest round (see time_in_rounds)
    low_ms: float  # first quartile of that round's blocks
    high_ms: float  # third quartile
    blocks: int  # timed blocks in that round: the samples behind the median
    runs: int  # passes timed in that round
    capped: bool  # a measurement hit the time cap before it had min_blocks blocks
    rounds: int  # rounds measured (fewer than asked when the budget ran out)
    # CPU time and page faults, measured at each sweep's ends only (nan between: run_sweep)
    user_ms: float  # CPU time in user mode per pass, all threads
    sys_ms: float  # CPU time in the kernel per pass, all threads
    minor_faults: float  # minor page faults per pass
    flops: int  # per pass, from forward_flops (× 3 with the backward pass)
    gflops: float  # achieved: flops / median time
    ceiling_gflops: float  # the machine's measured torch.mm throughput
    aten_ops: int  # ATen operator calls per forward
    matmul_ops: int  # of which matrix-multiplication operators


CSV_COLUMNS = tuple(field.name for field in dataclasses.fields(Row))


@dataclass(frozen=True)
class Timing:
    """What ``time_in_rounds`` keeps of one module: its quietest round, in milliseconds."""

    median_ms: float
    low_ms: float  # first quartile of the round's blocks
    high_ms: float  # third quartile
    blocks: int
    runs: int
    capped: bool  # some measurement of this module hit the time cap
    rounds: int  # rounds in which the module was measured
    # per call, over the blocks ``measure`` added one at a time in that round (None: it added none)
    usage: Usage | None = None


class FastPathOff(nn.Module):
    """Calls ``module`` with ``nn.MultiheadAttention``'s fast path switched off.

    ``torch.backends.mha.set_fastpath_enabled(False)`` holds only during the call, so the
    setting of the rest of the program is left alone.
    """

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        enabled = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            return self.module(x)  # (b, num_tokens, d_out)
        finally:
            torch.backends.mha.set_fastpath_enabled(enabled)


def timed_modules(names, d_out, num_tokens, num_heads):
    """Equivalent modules (``d_in = d_out``) for the names in ``BENCHED``, in eval mode.

    ``tiled`` takes the split's weights (``load_state_dict``: the same names).
    """
    unknown = [n for n in names if n not in BENCHED]
    if unknown:
        raise ValueError(f"Unknown implementation(s) {unknown}; choose from {', '.join(BENCHED)}.")
    based_on = {"torch_mha_nofast": "torch_mha", "tiled": "split"}
    base = dict.fromkeys(based_on.get(n, n) for n in names)
    built = equivalent_modules(base, d_out, d_out, num_tokens, num_heads)
    if "tiled" in names:
        tiled = TiledAttention(d_out, d_out, num_tokens, 0.0, num_heads)
        tiled.load_state_dict(built["split"].state_dict())
        built["tiled"] = tiled.eval()
    return {
        n: FastPathOff(built["torch_mha"]) if n == "torch_mha_nofast" else built[n] for n in names
    }


def flop_breakdown(batch, num_tokens, d_in, d_out, *, out_proj=True):
    """FLOPs of each matrix multiplication in one forward pass (2 FLOPs per multiply-add).

    The count does not depend on ``num_heads``: splitting ``d_out`` into heads changes how the
    products are grouped, not how many multiply-adds they hold. The score and weighted-sum terms
    count the full ``num_tokens × num_tokens`` matrix, as the explicit implementations compute
    it, although the causal mask discards about half of it; softmax, masking and scaling (a few
    FLOPs per score) are left out.
    """
    tokens = batch * num_tokens
    parts = {
        "query/key/value projections": 3 * 2 * tokens * d_in * d_out,
        "scores (queries @ keys.T)": 2 * batch * num_tokens * num_tokens * d_out,
        "weighted sum (weights @ values)": 2 * batch * num_tokens * num_tokens * d_out,
    }
    if out_proj:
        parts["output projection"] = 2 * tokens * d_out * d_out
    return parts


def forward_flops(implementation, batch, num_tokens, d_in, d_out):
    """FLOPs of one forward pass; only the wrapper has no output projection."""
    parts = flop_breakdown(batch, num_tokens, d_in, d_out, out_proj=implementation != "wrapper")
    return sum(parts.values())


def pass_flops(implementation, batch, num_tokens, d_in, d_out, *, backward=False):
    """FLOPs of a forward pass, or of a forward and backward pass together.

    With gradients for both factors (the input requires grad), the backward pass of each product
    ``a @ b`` computes ``grad @ b.T`` and ``a.T @ grad``: two products of the same size, so a
    forward and backward pass does 3 × the forward's matrix FLOPs.
    """
    return (3 if backward else 1) * forward_flops(implementation, batch, num_tokens, d_in, d_out)


def _timer(stmt, label, **values):
    """A ``Timer`` for ``stmt`` that uses as many threads as torch does here.

    ``Timer`` runs its statement with one thread unless told otherwise, which would time a
    different machine from the one the chapter (and the command line's ``--threads``) sets up.
    """
    return BlockTimer(stmt, globals=values, label=label, num_threads=torch.get_num_threads())


def prepare(names, batch, num_tokens, d_out, num_heads, device="cpu"):
    """Equivalent modules and a seeded input for one configuration, on ``device``."""
    modules = timed_modules(names, d_out, num_tokens, num_heads)
    torch.manual_seed(0)
    x = torch.randn(batch, num_tokens, d_out, device=device)  # (batch, num_tokens, d_in)
    return {name: module.to(device) for name, module in modules.items()}, x


def for_backward(modules, x):
    """Modules in training mode, an input that requires grad, and the gradient to send back."""
    for module in modules.values():
        module.train()
    x = x.detach().requires_grad_(True)  # (batch, num_tokens, d_in)
    return x, torch.ones_like(x)  # d_in = d_out: the output has the input's shape


def _statement(backward):
    return "backward_from(module(x), grad)" if backward else "module(x)"


def time_in_rounds(
    cases,
    *,
    min_run_time,
    min_blocks,
    max_run_time,
    rounds,
    budget=math.inf,
    backward=False,
    progress=False,
):
    """Time every module of every case; return one ``{name: Timing}`` per case.

    ``cases`` are functions returning ``(modules, x)``, called once per round, so only one
    configuration's modules exist at a time. ``min_blocks`` is one number for every case, or a
    sequence of one per case. Each round visits every case, and within it every
    module, once: under ``torch.no_grad()``, or with ``backward`` as a training step (forward,
    then backward). The modules take turns at going first, so none is always timed straight
    after the same neighbour. A module that needed more than ``min_run_time`` for its blocks
    starts the next round with the time it needed (at most ``max_run_time``).

    Each module keeps its quietest round (the lowest median): other programs on the machine can
    only add time, so the least disturbed round is the best estimate of the module's own cost.
    The quartiles of that round's blocks are its spread.

    After ``budget`` seconds no new round starts (the first always runs to the end) and no
    measurement is retried: on a busy machine the timing stops rather than balloons, and the
    ``Timing`` says so (``rounds``, ``capped``).

    Before the first round every module of the first case runs, untimed, for ``min_run_time``
    (``warm_up``): a process's first calls load code and fill caches, and would make whichever
    configuration is measured first look slow.
    """
    if cases:
        warm_up(*cases[0](), seconds=min_run_time, backward=backward)
    wanted = [min_blocks] * len(cases) if isinstance(min_blocks, int) else list(min_blocks)
    deadline = time.monotonic() + budget
    found = [None] * len(cases)
    run_times = [{} for _ in cases]  # {name: seconds to give blocked_autorange next round}
    bar = tqdm(total=rounds * len(cases), desc="timing", unit="config", disable=not progress)
    grad_mode = contextlib.nullcontext() if backward else torch.no_grad()
    with grad_mode:
        for round_index in range(rounds):
            if round_index and time.monotonic() > deadline:
                break
            for i, case in enumerate(cases):
                modules, x = case()
                grad = None
                if backward:
                    x, grad = for_backward(modules, x)
                found[i] = found[i] or {name: [] for name in modules}
                names = list(modules)
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    timer = _timer(
                        _statement(backward),
                        name,
                        module=modules[name],
                        x=x,
                        grad=grad,
                        backward_from=backward_from,
                    )
                    run_time = run_times[i].get(name, min_run_time)
                    measurement, capped = measure(
                        timer,
                        min_run_time=run_time,
                        min_blocks=wanted[i],
                        max_run_time=max_run_time,
                        retry=time.monotonic() < deadline,
                    )
                    needed = wanted[i] * max(measurement.raw_times)
                    run_times[i][name] = min(max(min_run_time, needed), max_run_time)
                    found[i][name].append((measurement, capped))
                bar.update()
    bar.close()
    return [
        {name: _quietest(runs) for name, runs in measurements.items()} for measurements in found
    ]


def warm_up(modules, x, *, seconds, backward=False):
    """Call every module of ``modules`` on ``x`` for about ``seconds`` each, at least twice,
    untimed: a forward under ``torch.no_grad()``, or with ``backward`` a training step."""
    grad = None
    if backward:
        x, grad = for_backward(modules, x)
    with contextlib.nullcontext() if backward else torch.no_grad():
        for module in modules.values():
            stop = time.monotonic() + seconds
            for calls in itertools.count(1):
                out = module(x)  # (b, num_tokens, d_out)
                if backward:
                    backward_from(out, grad)
                if calls >= 2 and time.monotonic() > stop:
                    break


def _quietest(runs):
    """The ``Timing`` of the round with the lowest median, capped if any round was."""
    measurement, _ = min(runs, key=lambda run: run[0].median)
    times = torch.tensor(measurement.times, dtype=torch.float64)  # seconds per run, per block
    low, high = torch.quantile(times, torch.tensor([0.25, 0.75], dtype=torch.float64)).tolist()
    return Timing(
        median_ms=measurement.median * 1e3,
        low_ms=low * 1e3,
        high_ms=high * 1e3,
        blocks=len(measurement.raw_times),
        runs=len(measurement.raw_times) * measurement.number_per_run,
        capped=any(capped for _, capped in runs),
        rounds=len(runs),
        usage=(measurement.metadata or {}).get("usage"),
    )


def matmul_ceiling(device="cpu", size=1024, min_run_time=0.2, rounds=3):
    """The machine's matrix-multiplication throughput in GFLOP/s: one large ``torch.mm``, timed.

    No attention implementation does its matrix products faster than this, so it is the ceiling
    against which their achieved GFLOP/s are read. As in ``time_in_rounds``, the quietest of
    ``rounds`` measurements counts.
    """
    torch.manual_seed(0)
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    timer = _timer("torch.mm(a, b)", "torch.mm", torch=torch, a=a, b=b)
    median = min(timer.blocked_autorange(min_run_time=min_run_time).median for _ in range(rounds))
    return 2 * size**3 / median / 1e9


def sweep_ends(configurations):
    """The first and the last of each sweep's ``configurations``."""
    ends = set()
    for name in dict.fromkeys(sweep_name for sweep_name, _, _ in configurations):
        mine = [c for c in configurations if c[0] == name]
        ends |= {mine[0], mine[-1]}
    return ends


def run_sweep(sweep, *, device="cpu", implementations=TIMED, backward=False, progress=False):
    """Measure the matmul ceiling, then every configuration of ``sweep``; return all ``Row``s.

    At the longest length only ``sweep.at_longest`` is timed (``Sweep.timed_at``).

    After the timings, each (warm) module runs once more for the operator count. At the two ends
    of each sweep (fewest and most heads, shortest and longest sequence: where chapter 5 and the
    reports read them) the rows carry CPU time and page faults per pass: from the blocks that
    ``measure`` added one at a time, where it added any (a slow statement's, as at the longest
    length: no more calls), else from ``usage.resource_use`` on the warm module. Between the
    ends those columns are ``nan``: measuring them everywhere took about a sixth of the quick
    sweep's time.
    """
    ceiling = matmul_ceiling(device, sweep.ceiling_size, max(sweep.min_run_time, 0.1), sweep.rounds)
    configurations = sweep.configurations()
    # Each configuration's modules are built once: the timing warms them up, and the usage
    # measurement afterwards reads the same warm modules without a warm-up call of its own.
    prepared = [
        prepare(
            sweep.timed_at(sweep_name, num_tokens, implementations),
            sweep.batch,
            num_tokens,
            sweep.d_out,
            num_heads,
            device,
        )
        for sweep_name, num_tokens, num_heads in configurations
    ]
    cases = [partial(tuple, case) for case in prepared]
    timings = time_in_rounds(
        cases,
        min_run_time=sweep.min_run_time,
        min_blocks=[sweep.blocks_at(s, t) for s, t, _ in configurations],
        max_run_time=sweep.max_run_time,
        rounds=sweep.rounds,
        budget=sweep.budget,
        backward=backward,
        progress=progress,
    )
    rows = []
    # The operators a forward dispatches depend on the module and its head count, not on the
    # length (each module is built for the length it gets): count each pair once, at its
    # first and shortest configuration, since counting runs one more forward op by op.
    counted = {}
    ends = sweep_ends(configurations)
    for (sweep_name, num_tokens, num_heads), case, timing in zip(
        configurations, cases, timings, strict=True
    ):
        modules, x = case()
        x_used, grad = for_backward(modules, x) if backward else (x, None)
        for name, module in modules.items():
            t = timing[name]
            flops = pass_flops(
                name, sweep.batch, num_tokens, sweep.d_out, sweep.d_out, backward=backward
            )
            if (sweep_name, num_tokens, num_heads) in ends and t.usage is not None:
                usage = t.usage  # the calls of the blocks its measurement added one at a time
            elif (sweep_name, num_tokens, num_heads) in ends:
                runs = max(1, math.ceil(sweep.min_run_time / (t.median_ms / 1e3)))
                usage = resource_use(module, x_used, runs, grad=grad, warm_up=False)
            else:
                usage = NOT_MEASURED
            if (name, num_heads) not in counted:
                counted[name, num_heads] = operator_counts(module, x)
            aten_ops, matmul_ops = counted[name, num_heads]
            rows.append(
                Row(
                    sweep=sweep_name,
                    implementation=name,
                    timed="forward+backward" if backward else "forward",
                    device=str(device),
                    threads=torch.get_num_threads(),
                    batch=sweep.batch,
                    num_tokens=num_tokens,
                    d_in=sweep.d_out,
                    d_out=sweep.d_out,
                    num_heads=num_heads,
                    median_ms=t.median_ms,
                    low_ms=t.low_ms,
                    high_ms=t.high_ms,
                    blocks=t.blocks,
                    runs=t.runs,
                    capped=t.capped,
                    rounds=t.rounds,
                    user_ms=usage.user_ms,
                    sys_ms=usage.sys_ms,
                    minor_faults=usage.minor_faults,
                    flops=flops,
                    gflops=flops / t.median_ms / 1e6,
                    ceiling_gflops=ceiling,
                    aten_ops=aten_ops,
                    matmul_ops=matmul_ops,
                )
            )
    return rows


def write_csv(rows, path):
    """Write ``rows`` with a header of ``CSV_COLUMNS``; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(dataclasses.asdict(r) for r in rows)
    return path
