"""Time the book's attention implementations side by side, and say where the time goes.

Run from ``chapters/``: ``python -m mha.bench --quick`` (``--help`` lists the options). Chapter 4
imports the same functions, so the chapter and the command measure the same way:

- times come from ``torch.utils.benchmark.Timer.blocked_autorange`` (warm-up, blocks of runs,
  CUDA synchronisation), given time for at least a few blocks (``measure``) and taken in rounds
  that interleave implementations and configurations; each reported time is the median of a
  module's quietest round (``time_in_rounds``);
- every implementation of one configuration gets the same weights (``variants.equivalent_modules``)
  and the same input, so each timing compares the same function;
- FLOPs come from the shapes (``forward_flops``), operator calls from ``mha.counting``;
- ``ScorePipeline`` times the elementwise steps on the scores alone, all heads at once or one
  head at a time, to test where long sequences spend their time.
"""

import argparse
import csv
import dataclasses
import math
import platform
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from torch import nn
from torch.utils.benchmark import Timer
from tqdm import tqdm

from .counting import operator_counts
from .variants import IMPLEMENTATIONS, equivalent_modules

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "bench-results"


@dataclass(frozen=True)
class Sweep:
    """Which configurations to time: a head-count sweep and a sequence-length sweep at fixed ``d_out``."""

    d_out: int
    batch: int
    heads: tuple  # num_heads values of the head sweep, at num_tokens = heads_sweep_tokens
    heads_sweep_tokens: int
    tokens: tuple  # num_tokens values of the length sweep, at num_heads = tokens_sweep_heads
    tokens_sweep_heads: int
    min_run_time: float  # seconds per Timer.blocked_autorange call
    min_blocks: int  # timed blocks per measurement at least, so that each median has samples to take it of
    rounds: int  # interleaved rounds; each module reports the median of its quietest round
    ceiling_size: int  # n of the n × n torch.mm that measures the machine's matmul throughput

    def configurations(self):
        """``(sweep, num_tokens, num_heads)`` for every configuration, head sweep first."""
        heads = [("heads", self.heads_sweep_tokens, h) for h in self.heads]
        tokens = [("tokens", t, self.tokens_sweep_heads) for t in self.tokens]
        return heads + tokens


HEAD_COUNTS = (1, 2, 4, 8, 12, 16)
#: Small enough for CI (about 20 seconds in the chapter), wide enough to show the crossover.
#: blocked_autorange makes each block long enough for the timer's own overhead to vanish (some
#: 10 ms on the book's machine), so the sweep's time is blocks × rounds: two rounds of at least
#: five blocks fit the budget.
QUICK = Sweep(d_out=192, batch=1, heads=HEAD_COUNTS, heads_sweep_tokens=64,
              tokens=(16, 32, 64, 128, 256, 512, 1024), tokens_sweep_heads=12,
              min_run_time=0.02, min_blocks=5, rounds=2, ceiling_size=512)
#: GPT-2-small width (d_out 768, 12 heads); about a minute on two idle CPU cores.
FULL = Sweep(d_out=768, batch=1, heads=HEAD_COUNTS, heads_sweep_tokens=128,
             tokens=(16, 32, 64, 128, 256, 512, 1024), tokens_sweep_heads=12,
             min_run_time=0.2, min_blocks=5, rounds=3, ceiling_size=1024)


@dataclass(frozen=True)
class Row:
    """One implementation at one configuration: a line of the CSV."""

    sweep: str  # "heads" or "tokens": which sweep this configuration belongs to
    implementation: str  # a key of variants.IMPLEMENTATIONS
    device: str
    threads: int
    batch: int
    num_tokens: int
    d_in: int
    d_out: int  # total output width, for every implementation
    num_heads: int
    median_ms: float  # median of the quietest round (see time_in_rounds)
    iqr_ms: float  # interquartile range of that round
    blocks: int  # timed blocks in that round: the samples behind the median
    runs: int  # forward passes in that round
    flops: int  # per forward, from forward_flops
    gflops: float  # achieved: flops / median time
    ceiling_gflops: float  # the machine's measured torch.mm throughput
    aten_ops: int  # ATen operator calls per forward
    matmul_ops: int  # of which matrix-multiplication operators (mha.counting.MATMUL_OPS)


CSV_COLUMNS = tuple(field.name for field in dataclasses.fields(Row))


def flop_breakdown(batch, num_tokens, d_in, d_out, *, out_proj=True):
    """FLOPs of each matrix multiplication in one forward pass (2 FLOPs per multiply-add).

    The count does not depend on ``num_heads``: splitting ``d_out`` into heads changes how the
    products are grouped, not how many multiply-adds they hold. The score and weighted-sum terms
    count the full ``num_tokens × num_tokens`` matrix, as the explicit implementations compute it,
    although the causal mask discards about half of it; softmax, masking and scaling (a few FLOPs
    per score) are left out.
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
    """FLOPs of one forward pass of ``implementation``; only the wrapper has no output projection."""
    return sum(flop_breakdown(batch, num_tokens, d_in, d_out, out_proj=implementation != "wrapper").values())


def _timer(stmt, label, **values):
    """A ``Timer`` for ``stmt`` that uses as many threads as torch does here.

    ``Timer`` runs its statement with one thread unless told otherwise, which would time a
    different machine from the one the chapter (and the command line's ``--threads``) sets up.
    """
    return Timer(stmt, globals=values, label=label, num_threads=torch.get_num_threads())


def measure(timer, *, min_run_time, min_blocks):
    """``timer.blocked_autorange(min_run_time=...)``, given enough time for ``min_blocks`` timed blocks.

    ``blocked_autorange`` stops as soon as ``min_run_time`` has passed, so a statement slower than
    that is timed once, and the median of one sample is no median. When a call timed too few
    blocks, the next call gets ``min_blocks`` times the slowest block it saw.
    """
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    while len(measurement.raw_times) < min_blocks:
        measurement = timer.blocked_autorange(min_run_time=min_blocks * max(measurement.raw_times))
    return measurement


def prepare(implementations, batch, num_tokens, d_out, num_heads, device="cpu"):
    """Equivalent modules (``d_in = d_out``) and a seeded input for one configuration, on ``device``."""
    modules = equivalent_modules(implementations, d_out, d_out, num_tokens, num_heads)
    torch.manual_seed(0)
    x = torch.randn(batch, num_tokens, d_out, device=device)  # (batch, num_tokens, d_in)
    return {name: module.to(device) for name, module in modules.items()}, x


def time_in_rounds(cases, *, min_run_time, min_blocks, rounds, progress=False):
    """Time ``module(x)`` for every module of every case; return one ``{name: Measurement}`` per case.

    ``cases`` are functions returning ``(modules, x)``, called once per round, so only one
    configuration's modules exist at a time. Each round visits every case, and within it every
    module, once, under ``torch.no_grad()``; the modules take turns at going first, so none is
    always timed straight after the same neighbour. Each measurement holds at least
    ``min_blocks`` timed blocks (``measure``); a module that needed more than ``min_run_time`` for
    them starts the next round with the time it needed. Each module keeps the measurement of its quietest
    round (the lowest median): other programs on the machine can only add time, so the least
    disturbed round is the best estimate of the module's own cost, and within a round the median
    already ignores a few slow blocks.
    """
    found = [None] * len(cases)
    run_times = [{} for _ in cases]  # {name: seconds to give blocked_autorange next round}
    bar = tqdm(total=rounds * len(cases), desc="timing", unit="config", disable=not progress)
    with torch.no_grad():
        for round_index in range(rounds):
            for i, case in enumerate(cases):
                modules, x = case()
                found[i] = found[i] or {name: [] for name in modules}
                names = list(modules)
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    timer = _timer("module(x)", name, module=modules[name], x=x)
                    run_time = run_times[i].get(name, min_run_time)
                    measurement = measure(timer, min_run_time=run_time, min_blocks=min_blocks)
                    run_times[i][name] = max(min_run_time, min_blocks * max(measurement.raw_times))
                    found[i][name].append(measurement)
                bar.update()
    bar.close()
    return [{name: min(runs, key=lambda m: m.median) for name, runs in measurements.items()}
            for measurements in found]


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


def run_sweep(sweep, *, device="cpu", implementations=tuple(IMPLEMENTATIONS), progress=False):
    """Measure the matmul ceiling, then every configuration of ``sweep``; return all ``Row``s."""
    ceiling = matmul_ceiling(device, sweep.ceiling_size, max(sweep.min_run_time, 0.1), sweep.rounds)
    configurations = sweep.configurations()
    cases = [partial(prepare, implementations, sweep.batch, num_tokens, sweep.d_out, num_heads, device)
             for _, num_tokens, num_heads in configurations]
    timings = time_in_rounds(cases, min_run_time=sweep.min_run_time, min_blocks=sweep.min_blocks,
                             rounds=sweep.rounds, progress=progress)
    rows = []
    for (sweep_name, num_tokens, num_heads), case, timing in zip(configurations, cases, timings):
        modules, x = case()
        for name, module in modules.items():
            flops = forward_flops(name, sweep.batch, num_tokens, sweep.d_out, sweep.d_out)
            median = timing[name].median
            aten_ops, matmul_ops = operator_counts(module, x)
            rows.append(Row(
                sweep=sweep_name, implementation=name, device=str(device), threads=torch.get_num_threads(),
                batch=sweep.batch, num_tokens=num_tokens, d_in=sweep.d_out, d_out=sweep.d_out,
                num_heads=num_heads, median_ms=median * 1e3, iqr_ms=timing[name].iqr * 1e3,
                blocks=len(timing[name].raw_times), runs=len(timing[name].raw_times) * timing[name].number_per_run,
                flops=flops,
                gflops=flops / median / 1e9, ceiling_gflops=ceiling, aten_ops=aten_ops, matmul_ops=matmul_ops,
            ))
    return rows


def select(rows, sweep, implementation):
    """The rows of one implementation in one sweep, in sweep order."""
    return [r for r in rows if r.sweep == sweep and r.implementation == implementation]


def ratios(rows, numerator, denominator, sweep="tokens"):
    """``{swept value: median time of numerator / median time of denominator}``.

    Above 1, ``denominator`` was the faster: ``ratios(rows, "wrapper", "split")`` is the split's speedup.
    """
    key = "num_tokens" if sweep == "tokens" else "num_heads"
    times = {getattr(r, key): r.median_ms for r in select(rows, sweep, denominator)}
    return {getattr(r, key): r.median_ms / times[getattr(r, key)] for r in select(rows, sweep, numerator)}


def overhead_crossover(rows, implementation="wrapper"):
    """The sequence length at which ``implementation`` stops being overhead-bound, or ``None``.

    At the shortest sequence the work is small, so that time is taken as fixed overhead: Python,
    dispatch, kernel launches (the chapter prints how little of it the arithmetic could explain).
    Time = overhead + work that grows with the sequence (arithmetic and memory traffic), and the
    two are equal where the time reaches twice the overhead; beyond that the growing work
    dominates. The crossing is interpolated between measured lengths on log–log axes.
    """
    points = [(r.num_tokens, r.median_ms) for r in select(rows, "tokens", implementation)]
    if len(points) < 2:
        return None
    overhead = points[0][1]
    for (t0, y0), (t1, y1) in zip(points, points[1:]):
        if y0 < 2 * overhead <= y1:
            fraction = math.log(2 * overhead / y0) / math.log(y1 / y0)
            return math.exp(math.log(t0) + fraction * math.log(t1 / t0))
    return None


def table(rows, sweep, value="median_ms", fmt="{:.3f}"):
    """A text table of ``value`` for each implementation (columns) at each configuration of ``sweep``."""
    key = "num_tokens" if sweep == "tokens" else "num_heads"
    names = [n for n in IMPLEMENTATIONS if select(rows, sweep, n)]
    keys = [getattr(r, key) for r in select(rows, sweep, names[0])]
    width = max(len(n) for n in names) + 2
    lines = [f"{key:>10}" + "".join(f"{n:>{width}}" for n in names)]
    for k in keys:
        cells = {r.implementation: getattr(r, value) for r in rows if r.sweep == sweep and getattr(r, key) == k}
        lines.append(f"{k:>10}" + "".join(f"{fmt.format(cells[n]):>{width}}" for n in names))
    return "\n".join(lines)


def timing_tables(rows):
    """The medians of both sweeps as two text tables, and the fewest timed blocks behind any median."""
    heads_tokens = select(rows, "heads", "wrapper")[0].num_tokens
    tokens_heads = select(rows, "tokens", "wrapper")[0].num_heads
    fewest = min(rows, key=lambda r: r.blocks)
    return "\n".join([
        f"median ms per forward vs num_heads ({heads_tokens} tokens):",
        table(rows, "heads"),
        "",
        f"median ms per forward vs num_tokens ({tokens_heads} heads):",
        table(rows, "tokens"),
        "",
        f"each median is taken over at least {fewest.blocks} timed blocks "
        f"(the fewest: {fewest.implementation}, num_tokens {fewest.num_tokens}, num_heads {fewest.num_heads})",
    ])


def summary(rows):
    """The printed summary: medians, the split's speedup, the crossover, and GFLOP/s against the ceiling."""
    first = rows[0]
    lines = [
        f"device {first.device}, {first.threads} threads, batch {first.batch}, d_in = d_out = {first.d_out}",
        f"matmul ceiling (large torch.mm): {first.ceiling_gflops:.1f} GFLOP/s",
        "",
        timing_tables(rows),
        "",
        "speedup of the split over the wrapper (wrapper time / split time):",
    ]
    lines += [f"  {t:>5} tokens: {r:5.2f}×" for t, r in ratios(rows, "wrapper", "split").items()]
    crossover = overhead_crossover(rows)
    lines.append("the wrapper stops being overhead-bound at " + (
        f"about {crossover:.0f} tokens" if crossover else "no measured length"))
    lines += ["", "achieved GFLOP/s vs num_tokens (share of the ceiling at the longest length):",
              table(rows, "tokens", "gflops", "{:.1f}")]
    longest = max(r.num_tokens for r in select(rows, "tokens", "wrapper"))
    lines += [f"  {r.implementation}: {r.gflops / r.ceiling_gflops:.0%}"
              for r in rows if r.sweep == "tokens" and r.num_tokens == longest]
    return "\n".join(lines)


def write_csv(rows, path):
    """Write ``rows`` with a header of ``CSV_COLUMNS``; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(dataclasses.asdict(r) for r in rows)
    return path


def read_csv(path):
    """The ``Row``s of a CSV written by ``write_csv``."""
    types = {field.name: field.type for field in dataclasses.fields(Row)}
    with Path(path).open(newline="") as f:
        return [Row(**{k: types[k](v) for k, v in record.items()}) for record in csv.DictReader(f)]


# ---------------------------------------------------------------------------------------------
# The scores' elementwise steps, timed on their own
# ---------------------------------------------------------------------------------------------

class ScorePipeline(nn.Module):
    """Mask, scale and softmax of ``(b, num_heads, num_tokens, num_tokens)`` scores, and nothing else.

    These are the explicit implementations' elementwise steps on the scores. With ``per_head``
    the heads go one at a time, each a ``(b, num_tokens, num_tokens)`` tensor, as in the wrapper;
    without it all heads go through each step together, as in the split and ``combined_qkv``.
    """

    def __init__(self, num_tokens, head_dim, per_head):
        super().__init__()
        self.per_head = per_head
        self.scale = head_dim ** 0.5
        self.register_buffer("future", torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1))

    def mask_scale_softmax(self, scores):
        masked = scores.masked_fill(self.future, -torch.inf)  # same shape as scores
        return torch.softmax(masked / self.scale, dim=-1)  # same shape as scores

    def forward(self, scores):
        if self.per_head:
            return [self.mask_scale_softmax(head) for head in scores.unbind(1)]  # num_heads × (b, num_tokens, num_tokens)
        return self.mask_scale_softmax(scores)  # (b, num_heads, num_tokens, num_tokens)


def _score_case(batch, num_heads, num_tokens, head_dim, device):
    """Both ``ScorePipeline`` variants and seeded scores of one shape, as ``time_in_rounds`` wants them."""
    torch.manual_seed(0)
    scores = torch.randn(batch, num_heads, num_tokens, num_tokens, device=device)  # (b, num_heads, num_tokens, num_tokens)
    pipelines = {"all heads": ScorePipeline(num_tokens, head_dim, per_head=False),
                 "per head": ScorePipeline(num_tokens, head_dim, per_head=True)}
    return {name: pipeline.to(device) for name, pipeline in pipelines.items()}, scores


def time_score_pipelines(shapes, sweep, *, device="cpu"):
    """Median ms of ``ScorePipeline`` for each ``(batch, num_heads, num_tokens)`` in ``shapes``.

    Returns ``{shape: {"all heads": ms, "per head": ms}}``, timed as ``run_sweep`` times modules,
    with ``head_dim = sweep.d_out // num_heads``.
    """
    cases = [partial(_score_case, b, h, t, sweep.d_out // h, device) for b, h, t in shapes]
    timings = time_in_rounds(cases, min_run_time=sweep.min_run_time, min_blocks=sweep.min_blocks,
                             rounds=sweep.rounds)
    return {shape: {name: m.median * 1e3 for name, m in timing.items()} for shape, timing in zip(shapes, timings)}


# ---------------------------------------------------------------------------------------------
# The performance targets of issue 5, measured side by side
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """``implementation`` must take at most ``max_time_ratio`` times as long as ``reference``."""

    description: str
    implementation: str
    reference: str
    batch: int
    num_tokens: int
    d_out: int
    num_heads: int
    max_time_ratio: float


TARGETS = (
    Target("MultiHeadAttention at least 2.5× faster than the wrapper (1 × 64 tokens, d_out 64, 8 heads)",
           implementation="split", reference="wrapper", batch=1, num_tokens=64, d_out=64, num_heads=8,
           max_time_ratio=1 / 2.5),
    Target("FusedMultiHeadAttention at most 1.05× the time of nn.MultiheadAttention "
           "(4 × 512 tokens, d_out 768, 12 heads)",
           implementation="fused", reference="torch_mha", batch=4, num_tokens=512, d_out=768, num_heads=12,
           max_time_ratio=1.05),
)


def check_targets(*, device="cpu", min_run_time=0.2, min_blocks=5, rounds=5):
    """Time each target's two implementations side by side; return ``(target, medians in ms)`` pairs."""
    cases = [partial(prepare, (t.reference, t.implementation), t.batch, t.num_tokens, t.d_out, t.num_heads, device)
             for t in TARGETS]
    timings = time_in_rounds(cases, min_run_time=min_run_time, min_blocks=min_blocks, rounds=rounds)
    return [(target, {name: m.median * 1e3 for name, m in timing.items()}) for target, timing in zip(TARGETS, timings)]


def target_passed(target, times):
    """Whether the measured medians meet ``target``."""
    return times[target.implementation] / times[target.reference] <= target.max_time_ratio


def report_targets(results):
    """Two lines per target: PASS or FAIL with its description, then both medians and their ratio."""
    lines = []
    for target, times in results:
        ratio = times[target.implementation] / times[target.reference]
        lines += [
            f"{'PASS' if target_passed(target, times) else 'FAIL'}  {target.description}",
            f"      {target.implementation} {times[target.implementation]:.3f} ms, {target.reference} "
            f"{times[target.reference]:.3f} ms: time ratio {ratio:.3f} ({1 / ratio:.2f}× faster), "
            f"needs ≤ {target.max_time_ratio:.3f}",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------

def cpu_name():
    """The CPU model from ``/proc/cpuinfo`` where there is one, else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m mha.bench",
        description="Time the book's multi-head attention implementations side by side "
                    "(wrapper, split, combined QKV, fused SDPA, nn.MultiheadAttention), "
                    "write a CSV and a PNG of the plots, and print a summary table.",
    )
    parser.add_argument("--quick", action="store_true",
                        help=f"small sweep (d_out {QUICK.d_out}, short timings); the default is the full sweep "
                             f"(d_out {FULL.d_out})")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="where to run: auto picks cuda when available, else cpu (default: auto)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch (default: torch's own choice)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"folder for bench.csv and bench.png (default: {DEFAULT_OUT})")
    parser.add_argument("--targets", action="store_true",
                        help="instead of the sweep, check the book's two performance targets "
                             "(2 CPU threads unless --threads) and exit non-zero if one fails")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available; use --device cpu.")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be a positive integer, got {args.threads}.")
    return args


def main(argv=None):
    args = parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if args.threads or args.targets:
        torch.set_num_threads(args.threads or 2)
    print(f"torch {torch.__version__}, {cpu_name()}, device {device}, "
          f"{torch.get_num_threads()} threads")
    if args.targets:
        results = check_targets(device=device)
        print(report_targets(results))
        return 0 if all(target_passed(target, times) for target, times in results) else 1

    from .plots import plot_benchmark

    rows = run_sweep(QUICK if args.quick else FULL, device=device, progress=True)
    csv_path = write_csv(rows, args.out / "bench.csv")
    png_path = args.out / "bench.png"
    plot_benchmark(rows, overhead_crossover(rows)).savefig(png_path, dpi=120)
    print(summary(rows))
    print(f"\nwrote {csv_path}\nwrote {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
