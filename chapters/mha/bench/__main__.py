"""``python -m mha.bench``: the benchmark from a terminal, from any directory.

Runs the sweep of ``timing`` (``--quick`` for the small one), writes ``bench.csv`` and a PNG of
the figures (``mha.plots_bench``), and prints ``report``'s summary or, with ``--markdown``, the
body of BENCHMARKS.md. ``--targets`` instead checks the book's performance
targets (``comparison.check_targets``) and exits 1 unless all pass. Nothing in the package
imports this module, so it is the only one that may import the figures.
"""

import argparse
import platform
import sys
from pathlib import Path

import torch

from ..plots_bench import plot_benchmark
from .comparison import check_targets, overhead_crossover, report_targets, target_verdict
from .report import markdown, summary
from .timing import BENCHED, FULL, QUICK, run_sweep, write_csv

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "bench-results"


def cpu_name():
    """The CPU model from ``/proc/cpuinfo`` where there is one, else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def parse_args(argv=None):
    """The command line's options, checked: ``--help`` lists them."""
    parser = argparse.ArgumentParser(
        prog="python -m mha.bench",
        description="Time the book's multi-head attention implementations side by side "
        "(wrapper, split, combined QKV, fused SDPA, nn.MultiheadAttention with its "
        "fast path on and off, chapter 7's tiled attention), write a CSV and a PNG of the "
        "plots, and print a summary.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"small sweep (d_out {QUICK.d_out}, short timings); the default is "
        f"the full sweep (d_out {FULL.d_out})",
    )
    parser.add_argument(
        "--backward",
        action="store_true",
        help="time a training step (forward and backward) instead of a forward",
    )
    parser.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cpu", "cuda"),
        help="where to run: auto picks cuda when available, else cpu",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (default: torch's own choice)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder for bench.csv and bench.png (default: {DEFAULT_OUT})",
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the results as BENCHMARKS.md's Markdown, not as text",
    )
    parser.add_argument(
        "--targets",
        action="store_true",
        help="instead of the sweep, check the book's performance targets "
        "(2 CPU threads unless --threads); exit 1 unless all pass",
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available; use --device cpu.")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be a positive integer, got {args.threads}.")
    return args


def main(argv=None):
    """Run the sweep (or with ``--targets`` the target checks), print, and return the exit code."""
    args = parse_args(argv)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.threads or args.targets:
        torch.set_num_threads(args.threads or 2)
    machine = (
        f"torch {torch.__version__}, {cpu_name()}, device {device}, "
        f"threads: {torch.get_num_threads()}"
    )
    if args.targets:
        print(machine)
        results = check_targets(device=device)
        print(report_targets(results))
        return 0 if all(target_verdict(*r)[0] == "PASS" for r in results) else 1

    sweep = QUICK if args.quick else FULL
    rows = run_sweep(
        sweep, device=device, implementations=BENCHED, backward=args.backward, progress=True
    )
    csv_path = write_csv(rows, args.out / "bench.csv")
    png_path = args.out / "bench.png"
    plot_benchmark(rows, overhead_crossover(rows)).savefig(png_path, dpi=120)
    if args.markdown:
        print(markdown(rows, sweep, machine, argv if argv is not None else sys.argv[1:]))
    else:
        print(machine)
        print(summary(rows))
        print(f"\nwrote {csv_path}\nwrote {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
