"""The allocator experiment: do a module's page faults and system time cost it its speed?

``allocator_experiment`` re-runs ``usage.resource_use``'s measurements in two fresh Python
processes that differ only in glibc's malloc settings: the default, and ``KEEP_FREED_MEMORY``,
which tells glibc to serve every block from its heap (never from a fresh ``mmap``) and to keep
freed memory instead of returning it to the kernel. If a module's page faults and system time
come from large blocks mapped and unmapped on every call, they vanish under
``KEEP_FREED_MEMORY``. Running it in subprocesses leaves the reader's own process alone.
``allocator_table`` and ``allocator_verdict`` say what the two processes measured.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch

from .comparison import compare
from .timing import prepare
from .usage import resource_use

#: glibc's malloc: never serve a block with mmap, and never give freed memory back (trim) below
#: 100 GB. Each name is read once, when a process starts, so it must be set before Python runs.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "100000000000"}
SETTINGS = ("default", "keep freed memory")
#: What each process of the experiment runs (``main`` reads the options that follow it). Not
#: ``-m mha.bench.faults``: the package imports this module before ``-m`` would run it again.
PROBE_COMMAND = "from mha.bench.faults import main; raise SystemExit(main())"


@dataclass(frozen=True)
class Probe:
    """One module at one length in one process: the quartiles of single calls' wall times,
    and the medians of their CPU times and page faults."""

    name: str
    num_tokens: int
    median_ms: float
    low_ms: float
    high_ms: float
    user_ms: float
    sys_ms: float
    minor_faults: float


def _quartiles(values):
    low, median, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, median, high


def probe(names, tokens, num_heads, d_out, repeats):
    """A ``Probe`` for every module in ``names`` at every length, from ``repeats`` single calls.

    The calls interleave: each repeat visits every length and every module once.
    """
    cases = {t: prepare(names, 1, t, d_out, num_heads) for t in tokens}
    samples = {(n, t): [] for t in tokens for n in names}
    for _ in range(repeats):
        for t, (modules, x) in cases.items():
            for name, module in modules.items():
                samples[name, t].append(resource_use(module, x, 1))
    probes = []
    for (name, t), usages in samples.items():
        low, median, high = _quartiles([u.wall_ms for u in usages])
        probes.append(
            Probe(
                name,
                t,
                median,
                low,
                high,
                statistics.median(u.user_ms for u in usages),
                statistics.median(u.sys_ms for u in usages),
                statistics.median(u.minor_faults for u in usages),
            )
        )
    return probes


def allocator_experiment(
    names=("wrapper", "split"), tokens=(512, 1024), num_heads=12, d_out=192, repeats=5
):
    """``{setting: {(name, num_tokens): Probe}}`` from two fresh processes, one per setting.

    Both processes run ``probe`` with the same arguments, one torch thread each, at the same
    time: on a machine with two free cores neither slows the other much, and a burst of load
    from elsewhere slows both. The second has ``KEEP_FREED_MEMORY`` in its environment.
    """
    chapters = Path(__file__).resolve().parents[2]
    base = {k: v for k, v in os.environ.items() if k not in KEEP_FREED_MEMORY}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(chapters), base.get("PYTHONPATH")]))
    argv = [
        sys.executable,
        "-c",
        PROBE_COMMAND,
        "--names",
        *names,
        "--tokens",
        *map(str, tokens),
        "--heads",
        str(num_heads),
        "--d-out",
        str(d_out),
        "--repeats",
        str(repeats),
        "--threads",
        "1",
    ]
    running = {
        setting: subprocess.Popen(
            argv,
            env={**base, **extra},
            cwd=chapters,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for setting, extra in zip(SETTINGS, ({}, KEEP_FREED_MEMORY), strict=True)
    }
    results = {}
    for setting, process in running.items():
        out, err = process.communicate()
        if process.returncode:
            raise RuntimeError(f"the {setting!r} process failed:\n{err}")
        results[setting] = {(p["name"], p["num_tokens"]): Probe(**p) for p in json.loads(out)}
    return results


def allocator_table(results):
    """A text table: per module and length, wall ms, system ms and page faults per call."""
    lines = [f"{'module':<9}{'tokens':>7}{'setting':>19}{'ms':>9}{'sys ms':>9}{'faults':>9}"]
    for key in results[SETTINGS[0]]:
        for setting in SETTINGS:
            p = results[setting][key]
            lines.append(
                f"{p.name:<9}{p.num_tokens:>7}{setting:>19}{p.median_ms:>9.1f}"
                f"{p.sys_ms:>9.1f}{p.minor_faults:>9,.0f}"
            )
    return "\n".join(lines)


def allocator_verdict(results, name="split", reference="wrapper"):
    """The experiment's conclusion for ``name`` at each length, in sentences of at most 79 chars.

    Noise-aware: a time difference counts only when the quartile ranges do not overlap
    (``comparison.compare``); the reference is timed in the same process. The conclusion is drawn
    from what this run measured, whatever that is.
    """
    default, kept = (results[s] for s in SETTINGS)
    paragraphs = []
    for (n, t), before in default.items():
        if n != name:
            continue
        after, ref = kept[n, t], kept[reference, t]
        if before.minor_faults < 1:
            text = f"the {name} had no page faults to remove."
        elif after.minor_faults > before.minor_faults / 10:
            text = (
                "the settings did not remove the page faults (is the C library glibc?), "
                "so the experiment tests nothing here."
            )
        else:
            change = compare(after, before)
            if change == "faster":
                text = (
                    f"without page faults the {name} took {after.median_ms:.1f} ms "
                    f"instead of {before.median_ms:.1f} ms."
                )
            else:
                text = (
                    f"the page faults are gone, but the {name}'s time change is "
                    f"{change} within the spread."
                )
            against = {
                "faster": "faster than",
                "slower": "slower than",
                "inconclusive": "not told apart from",
            }[compare(after, ref)]
            text += (
                f" With them gone it was {against} the {reference} in the same process "
                f"({after.median_ms:.1f} against {ref.median_ms:.1f} ms)."
            )
        paragraphs.append(textwrap.fill(f"{t} tokens: {text}", 79, subsequent_indent="  "))
    return "\n".join(paragraphs)


def main(argv=None):
    """Print ``probe``'s results as JSON: what ``allocator_experiment`` runs in each process."""
    parser = argparse.ArgumentParser(prog="mha.bench.faults", description=main.__doc__)
    parser.add_argument("--names", nargs="+", required=True)
    parser.add_argument("--tokens", nargs="+", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--d-out", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    probes = probe(args.names, args.tokens, args.heads, args.d_out, args.repeats)
    print(json.dumps([p.__dict__ for p in probes]))
    return 0
