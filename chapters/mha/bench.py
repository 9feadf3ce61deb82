"""Time the book's attention implementations side by side, and say where the time goes.

Run from ``chapters/``: ``python -m mha.bench --quick`` (``--help`` lists the options). Chapter 4
imports the same functions, so the chapter and the command measure the same way:

- times come from ``torch.utils.benchmark.Timer.blocked_autorange`` (warm-up, blocks of runs,
  CUDA synchronisation), taken in rounds that interleave implementations and configurations;
  each reported time is the median of a module's quietest round (``time_in_rounds``);
- every implementation of one configuration gets the same weights (``variants.equivalent_modules``)
  and the same input, so each timing compares the same function;
- FLOPs come from the shapes (``forward_flops``), operator calls from ``mha.counting``.
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
from torch.utils.benchmark import Timer
from tqdm import tqdm

from .counting import MATMUL_OPS, count_ops
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
    rounds: int  # interleaved rounds; each module reports the median of its quietest round
    ceiling_size: int  # n of the n × n torch.mm that measures the machine's matmul throughput

    def configurations(self):
        """``(sweep, num_tokens, num_heads)`` for every configuration, head sweep first."""
        heads = [("heads", self.heads_sweep_tokens, h) for h in self.heads]
        tokens = [("tokens", t, self.tokens_sweep_heads) for t in self.tokens]
        return heads + tokens


HEAD_COUNTS = (1, 2, 4, 8, 12, 16)
#: Small enough for CI (the chapter runs it in a few seconds), wide enough to show the crossover.
QUICK = Sweep(d_out=192, batch=1, heads=HEAD_COUNTS, heads_sweep_tokens=64,
              tokens=(16, 32, 64, 128, 256, 512, 1024), tokens_sweep_heads=12,
              min_run_time=0.02, rounds=3, ceiling_size=512)
#: GPT-2-small width (d_out 768, 12 heads); about a minute on two idle CPU cores.
FULL = Sweep(d_out=768, batch=1, heads=HEAD_COUNTS, heads_sweep_tokens=128,
             tokens=(16, 32, 64, 128, 256, 512, 1024), tokens_sweep_heads=12,
             min_run_time=0.2, rounds=3, ceiling_size=1024)


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
    return Timer(stmt, globals=values, label=label, num_threads=torch.get_num_threads())


def prepare(implementations, batch, num_tokens, d_out, num_heads, device="cpu"):
    """Equivalent modules (``d_in = d_out``) and a seeded input for one configuration, on ``device``."""
    modules = equivalent_modules(implementations, d_out, d_out, num_tokens, num_heads)
    torch.manual_seed(0)
    x = torch.randn(batch, num_tokens, d_out, device=device)  # (batch, num_tokens, d_in)
    return {name: module.to(device) for name, module in modules.items()}, x


def time_in_rounds(cases, *, min_run_time, rounds, progress=False):
    """Time ``module(x)`` for every module of every case; return one ``{name: Measurement}`` per case.

    ``cases`` are functions returning ``(modules, x)``, called once per round, so only one
    configuration's modules exist at a time. Each round visits every case, and within it every
    module, once, under ``torch.no_grad()``. Each module keeps the measurement of its quietest
    round (the lowest median): other programs on the machine can only add time, so the least
    disturbed round is the best estimate of the module's own cost, and within a round the median
    already ignores a few slow blocks.
    """
    found = [None] * len(cases)
    bar = tqdm(total=rounds * len(cases), desc="timing", unit="config", disable=not progress)
    with torch.no_grad():
        for _ in range(rounds):
            for i, case in enumerate(cases):
                modules, x = case()
                found[i] = found[i] or {name: [] for name in modules}
                for name, module in modules.items():
                    timer = _timer("module(x)", name, module=module, x=x)
                    found[i][name].append(timer.blocked_autorange(min_run_time=min_run_time))
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


def operator_counts(module, x):
    """``(all ATen operator calls, matrix-multiplication calls)`` of one forward pass."""
    counts = count_ops(module, x)
    return sum(counts.values()), sum(n for name, n in counts.items() if name in MATMUL_OPS)


def run_sweep(sweep, *, device="cpu", implementations=tuple(IMPLEMENTATIONS), progress=False):
    """Measure the matmul ceiling, then every configuration of ``sweep``; return all ``Row``s."""
    ceiling = matmul_ceiling(device, sweep.ceiling_size, max(sweep.min_run_time, 0.1), sweep.rounds)
    configurations = sweep.configurations()
    cases = [partial(prepare, implementations, sweep.batch, num_tokens, sweep.d_out, num_heads, device)
             for _, num_tokens, num_heads in configurations]
    timings = time_in_rounds(cases, min_run_time=sweep.min_run_time, rounds=sweep.rounds, progress=progress)
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
                runs=len(timing[name].times) * timing[name].number_per_run, flops=flops,
                gflops=flops / median / 1e9, ceiling_gflops=ceiling, aten_ops=aten_ops, matmul_ops=matmul_ops,
            ))
    return rows


def select(rows, sweep, implementation):
    """The rows of one implementation in one sweep, in sweep order."""
    return [r for r in rows if r.sweep == sweep and r.implementation == implementation]


def ratios(rows, slower, faster, sweep="tokens"):
    """``{swept value: median of slower / median of faster}``: how many times faster ``faster`` is."""
    key = "num_tokens" if sweep == "tokens" else "num_heads"
    times = {getattr(r, key): r.median_ms for r in select(rows, sweep, faster)}
    return {getattr(r, key): r.median_ms / times[getattr(r, key)] for r in select(rows, sweep, slower)}


def overhead_crossover(rows, implementation="wrapper"):
    """The sequence length at which ``implementation`` stops being overhead-bound, or ``None``.

    At the shortest sequence the arithmetic is negligible, so that time is (nearly) all fixed
    overhead: Python, dispatch, kernel launches. Time = overhead + arithmetic, and the two are
    equal where the time reaches twice the overhead; beyond that the arithmetic dominates. The
    crossing is interpolated between measured lengths on log–log axes.
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


def summary(rows):
    """The printed summary: medians, the split's speedup, the crossover, and GFLOP/s against the ceiling."""
    first = rows[0]
    heads_tokens = select(rows, "heads", "wrapper")[0].num_tokens
    tokens_heads = select(rows, "tokens", "wrapper")[0].num_heads
    lines = [
        f"device {first.device}, {first.threads} threads, batch {first.batch}, d_in = d_out = {first.d_out}",
        f"matmul ceiling (large torch.mm): {first.ceiling_gflops:.1f} GFLOP/s",
        "",
        f"median ms per forward vs num_heads ({heads_tokens} tokens):",
        table(rows, "heads"),
        "",
        f"median ms per forward vs num_tokens ({tokens_heads} heads):",
        table(rows, "tokens"),
        "",
        "speedup of the split over the wrapper (wrapper time / split time):",
    ]
    lines += [f"  {t:>5} tokens: {r:5.2f}×" for t, r in ratios(rows, "wrapper", "split").items()]
    crossover = overhead_crossover(rows)
    lines.append("the wrapper becomes compute-bound at " + (
        f"about {crossover:.0f} tokens" if crossover else "no measured length (still overhead-bound)"))
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


def check_targets(*, device="cpu", min_run_time=0.2, rounds=5):
    """Time each target's two implementations side by side; return ``(target, medians in ms)`` pairs."""
    cases = [partial(prepare, (t.reference, t.implementation), t.batch, t.num_tokens, t.d_out, t.num_heads, device)
             for t in TARGETS]
    timings = time_in_rounds(cases, min_run_time=min_run_time, rounds=rounds)
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
