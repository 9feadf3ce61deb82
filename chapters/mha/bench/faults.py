"""The allocator experiment: do a module's page faults and system time cost it its speed?

``allocator_experiment`` re-runs ``usage.resource_use``'s measurements in two copies of the
calling process (``os.fork``) that differ only in glibc's malloc settings: the default, and
``KEEP_FREED_MEMORY``, which tells glibc (through ``mallopt``) to serve every block from its heap
(never from a fresh ``mmap``) and to keep freed memory instead of returning it to the kernel.
Both copies start from the same allocator state, the caller's, and the caller's own process is
left alone. A copy costs no new Python or torch start-up.

What the settings change is more than the fault count. By default glibc maps a block anew
when it is larger than its mmap threshold; the threshold starts at 128 KiB and rises to the
size of each mapped block that is freed, up to 32 MiB on 64-bit systems. A freshly mapped page
faults on its first touch and the kernel zero-fills it. Under the settings a freed block stays
with the process and the next call reuses it, still warm in the caches. So the experiment
changes faults, zero-filling and reuse together, and its verdict says only that.

Each copy first checks that its C library honours the settings at all (``large_block``:
a block over the largest threshold faults on every allocation by default, and stops faulting
under the settings). Then it warms every module up until its page faults per call stop
falling (the heap grows during the first calls), with a cap, and only then times single calls:
the ``Probe`` holds what the timed calls measured, nothing from the warm-up.
``allocator_table`` and ``allocator_verdict`` say what the two copies measured.
"""

import ctypes
import json
import math
import os
import statistics
import sys
import traceback
from dataclasses import dataclass

import torch

from .comparison import compare
from .timing import prepare
from .usage import resource, resource_use

#: glibc's malloc options, set with ``mallopt``: never serve a block with mmap, and never give
#: freed memory back (trim) below 2 GiB (``mallopt`` takes a C ``int``). Setting either also stops
#: the thresholds from moving with the process's history.
KEEP_FREED_MEMORY = {"M_MMAP_MAX": 0, "M_TRIM_THRESHOLD": 2**31 - 1}
#: The options' numbers in glibc's ``malloc.h``.
MALLOPT_OPTIONS = {"M_TRIM_THRESHOLD": -1, "M_MMAP_MAX": -4}
SETTINGS = ("default", "keep freed memory")
#: The settings' names in the experiment's table, short enough for a phone.
SHORT = {"default": "default", "keep freed memory": "kept"}
#: The block that tells whether the C library honours the settings: above glibc's largest mmap
#: threshold on 64-bit systems (32 MiB), so by default it is mapped, and faults, every time.
#: No larger: each of its allocations by default costs a page fault per page.
LARGE_BLOCK_MIB = 40
#: Uncounted allocations of the large block under the settings: the heap grows during the
#: first few (one to five on glibc 2.36 with torch 2.13), and each of those faults on every
#: page. By default the block is mapped anew on every allocation, or served from a free chunk
#: of the heap, from the first one on: that copy needs no uncounted allocations, and it is the
#: slower copy, the one the caller waits for.
LARGE_BLOCK_WARMUP = 10
#: Warm-up rounds stop when no module's faults per call fell in the last PATIENCE rounds, or
#: after WARMUP_CAP rounds, whichever comes first.
PATIENCE = 2
WARMUP_CAP = 12


@dataclass(frozen=True)
class Probe:
    """One module at one length in one process, over its timed calls only: the quartiles of
    single calls' wall times, and the medians of their CPU times and page faults.

    ``warmup_calls`` untimed calls came first; ``steady`` says that the faults per call had
    stopped falling by then (``False``: the cap ended the warm-up).
    """

    name: str
    num_tokens: int
    median_ms: float
    low_ms: float
    high_ms: float
    user_ms: float
    sys_ms: float
    minor_faults: float
    warmup_calls: int = 0
    steady: bool = True


@dataclass(frozen=True)
class Experiment:
    """What the two processes measured: ``probes[setting][(name, num_tokens)]``, and the page
    faults per allocation of a ``LARGE_BLOCK_MIB`` block (``large_block[setting]``)."""

    probes: dict
    large_block: dict

    def honoured(self):
        """Whether the settings did what they are for: the large block faults by default and
        stops faulting under them. ``None`` when this system counts no page faults."""
        default, kept = (self.large_block[s] for s in SETTINGS)
        if math.isnan(default) or math.isnan(kept):
            return None
        return not reused(default) and kept <= default / 10


def reused(large_block_faults):
    """Whether a ``LARGE_BLOCK_MIB`` block that took ``large_block_faults`` page faults per
    allocation was served from memory the process already had: under 1 % of its pages. Not
    under 1 fault: a copy of a process (``os.fork``) faults once on its first write to each page
    it still shares with the original (copy on write), 1 or 2 per allocation here."""
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    return large_block_faults < LARGE_BLOCK_MIB * 2**20 // page / 100


def _quartiles(values):
    if len(values) == 1:
        return values * 3
    low, median, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, median, high


def large_block(warmup=LARGE_BLOCK_WARMUP, calls=4):
    """Page faults per allocation of a ``LARGE_BLOCK_MIB`` block that is written, then freed
    (``nan`` where the system counts no page faults), over ``calls`` allocations.

    ``warmup`` allocations come first and are not counted: under the settings the heap grows
    during the first few, each of which faults on every page.
    """
    if resource is None:
        return math.nan

    def allocate():
        torch.empty(LARGE_BLOCK_MIB * 2**20 // 4).fill_(1.0)  # 4-byte floats, every page written

    for _ in range(warmup):
        allocate()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        allocate()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def falling(faults):
    """Whether the last of ``faults`` (per call, oldest first) is lower than every one before
    it by more than the wobble of a steady count (1 %, and at least 16 pages)."""
    if len(faults) < 2:
        return False
    low = min(faults[:-1])
    return faults[-1] < low - max(0.01 * low, 16)


def warm_up(cases, patience=PATIENCE, cap=WARMUP_CAP):
    """Call every module of every case in rounds until no module's faults per call are still
    falling; return ``{(name, num_tokens): (calls, steady)}``.

    A module is steady when none of its last ``patience`` calls was ``falling``. ``cap`` rounds
    at most: ``steady`` is ``False`` for a module whose faults were still falling then.
    """
    faults = {(n, t): [] for t, (modules, _) in cases.items() for n in modules}
    rounds = 0

    def steady(key):
        seen = faults[key]
        return len(seen) > patience and not any(
            falling(seen[: len(seen) - k]) for k in range(patience)
        )

    while rounds < cap and not (rounds and all(map(steady, faults))):
        for t, (modules, x) in cases.items():
            for name, module in modules.items():
                faults[name, t].append(resource_use(module, x, 1, warm_up=False).minor_faults)
        rounds += 1
    return {key: (rounds, steady(key)) for key in faults}


def probe(names, tokens, num_heads, d_out, repeats):
    """A ``Probe`` for every module in ``names`` at every length, from ``repeats`` single calls
    after ``warm_up``.

    The calls interleave: each repeat visits every length and every module once.
    """
    cases = {t: prepare(names, 1, t, d_out, num_heads) for t in tokens}
    warmed = warm_up(cases)
    samples = {(n, t): [] for t in tokens for n in names}
    for _ in range(repeats):
        for t, (modules, x) in cases.items():
            for name, module in modules.items():
                samples[name, t].append(resource_use(module, x, 1, warm_up=False))
    probes = []
    for (name, t), usages in samples.items():
        low, median, high = _quartiles([u.wall_ms for u in usages])
        calls, steady = warmed[name, t]
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
                warmup_calls=calls,
                steady=steady,
            )
        )
    return probes


def keep_freed_memory():
    """Apply ``KEEP_FREED_MEMORY`` to this process with the C library's ``mallopt``; whether it
    accepted every option (``False`` where there is no ``mallopt``: not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(MALLOPT_OPTIONS[k], v) == 1 for k, v in KEEP_FREED_MEMORY.items())


def measured_under(setting, names, tokens, num_heads, d_out, repeats, kept_only=()):
    """What one copy of the experiment measures under ``setting`` (one of ``SETTINGS``), on one
    thread, as JSON-ready data: ``large_block``'s faults and a ``probe`` of every module (in the
    default copy, of every module not in ``kept_only``)."""
    torch.set_num_threads(1)
    if setting == SETTINGS[0]:
        names = tuple(n for n in names if n not in kept_only)
    if setting != SETTINGS[0]:
        keep_freed_memory()
    large = large_block(warmup=0 if setting == SETTINGS[0] else LARGE_BLOCK_WARMUP)
    probes = probe(names, tokens, num_heads, d_out, repeats)
    return {"large_block_faults": large, "probes": [p.__dict__ for p in probes]}


def _forked(function, *args):
    """Run ``function(*args)`` in a copy of this process; return the copy's id and the reading
    end of a pipe that brings back its result as JSON (or ``{"error": traceback}``).

    The copy writes nothing else and leaves with ``os._exit``: it must not run the caller's
    clean-up (a notebook kernel's, say) a second time.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy
        try:
            os.close(read)
            try:
                found = function(*args)
            except BaseException:
                found = {"error": traceback.format_exc()}
            with os.fdopen(write, "w") as pipe:
                json.dump(found, pipe)
        finally:
            os._exit(0)
    os.close(write)
    return pid, read


def allocator_experiment(
    names=("wrapper", "split"),
    tokens=(512, 1024),
    num_heads=12,
    d_out=192,
    repeats=5,
    kept_only=(),
):
    """An ``Experiment`` from two copies of this process (``os.fork``), one per setting.

    The modules in ``kept_only`` are timed in the copy with the settings only: a yardstick that
    ``allocator_verdict`` reads there alone (``kept_only=("wrapper",)``) costs the default copy,
    the slower one that the caller waits for, nothing.

    Both copies run ``measured_under`` with the same arguments, at the same time: on a machine with
    two free cores neither slows the other much, and a burst of load from elsewhere slows both.
    Off Linux nothing is measured (the settings are glibc's, and a copy of a process that has
    used torch is not safe everywhere, on macOS for one): the large block's faults are ``nan``
    and there are no probes, so the verdict says the experiment tests nothing here.
    """
    if sys.platform != "linux" or resource is None:
        return Experiment({s: {} for s in SETTINGS}, {s: math.nan for s in SETTINGS})
    args = (names, tokens, num_heads, d_out, repeats, kept_only)
    running = {setting: _forked(measured_under, setting, *args) for setting in SETTINGS}
    probes, large = {}, {}
    for setting, (pid, read) in running.items():
        with os.fdopen(read) as pipe:
            found = json.loads(pipe.read() or '{"error": "the copy wrote nothing"}')
        os.waitpid(pid, 0)
        if "error" in found:
            raise RuntimeError(f"the {setting!r} copy failed:\n{found['error']}")
        large[setting] = found["large_block_faults"]
        probes[setting] = {(p["name"], p["num_tokens"]): Probe(**p) for p in found["probes"]}
    return Experiment(probes, large)


def allocator_table(experiment):
    """Text tables of at most 44 characters a line: the large block's faults per allocation,
    then per module and length the median wall ms, system ms and page faults per timed call,
    one line per copy that timed it."""
    lines = [f"{LARGE_BLOCK_MIB} MiB block, page faults per allocation:"]
    lines += [f"{SHORT[s]:<9}{experiment.large_block[s]:>10,.0f}" for s in SETTINGS]
    lines += ["", f"{'module':<7}{'tokens':>7}{'malloc':>8}{'ms':>7}{'sys':>6}{'faults':>8}"]
    # Every module either copy timed, in the kept copy's order: it times them all.
    kept, default = (experiment.probes[s] for s in reversed(SETTINGS))
    for key in dict.fromkeys([*kept, *default]):
        for setting in (s for s in SETTINGS if key in experiment.probes[s]):
            p = experiment.probes[setting][key]
            lines.append(
                f"{p.name:<7}{p.num_tokens:>7}{SHORT[setting]:>8}{p.median_ms:>7.1f}"
                f"{p.sys_ms:>6.1f}{p.minor_faults:>8,.0f}"
            )
    warmups = ", ".join(
        f"{SHORT[s]} {max((p.warmup_calls for p in experiment.probes[s].values()), default=0)}"
        for s in SETTINGS
    )
    lines += ["", f"warm-up calls per module: {warmups}"]
    return "\n".join(lines)


def _times(before, after):
    change = compare(after, before)
    if change == "inconclusive":
        return (
            f"its time went from {before.median_ms:.1f} to {after.median_ms:.1f} ms, "
            "a change within the spread of single calls: inconclusive."
        )
    word = "faster" if change == "faster" else "slower"
    return (
        f"its time went from {before.median_ms:.1f} to {after.median_ms:.1f} ms: {word}, "
        "beyond the spread of single calls."
    )


def _against(after, ref, name, reference):
    against = {
        "faster": "faster than",
        "slower": "slower than",
        "inconclusive": "not told apart from",
    }[compare(after, ref)]
    return (
        f"Under the settings the {name} was {against} the {reference} in the same process "
        f"({after.median_ms:.1f} against {ref.median_ms:.1f} ms)."
    )


def allocator_verdict(experiment, name="split", reference="wrapper"):
    """``{title: sentence}``: what the experiment shows, first about the C library, then for
    ``name`` at each length (e.g. ``"1024 tokens:"``).

    Noise-aware: a time difference counts only when the quartile ranges of single calls do not
    overlap (``comparison.compare``); the reference is timed in the same process. The verdict
    says what this run measured and no more: the settings change where the memory comes from
    (faults, zero-filling and reuse together), not just the fault count.
    """
    default, kept = (experiment.probes[s] for s in SETTINGS)
    large = {s: f"{experiment.large_block[s]:,.0f}" for s in SETTINGS}
    honoured = experiment.honoured()
    if honoured is None:
        return {
            "This system:": (
                "the experiment runs on Linux only (glibc's settings, page-fault counts, copies "
                "of this process), so it tests nothing here."
            )
        }
    if reused(experiment.large_block[SETTINGS[0]]):
        return {
            "The C library:": (
                f"by default it already reuses a freed {LARGE_BLOCK_MIB} MiB block "
                f"({large[SETTINGS[0]]} page faults per allocation), so the settings have "
                "nothing to change and the experiment tests nothing here."
            )
        }
    if not honoured:
        return {
            "The C library:": (
                f"it ignored the settings: a {LARGE_BLOCK_MIB} MiB block faulted "
                f"{large[SETTINGS[0]]} times per allocation by default and {large[SETTINGS[1]]} "
                "times under them. The settings are glibc's; this C library is another, so "
                "the experiment tests nothing here."
            )
        }
    found = {
        "The C library:": (
            f"it honoured the settings: a {LARGE_BLOCK_MIB} MiB block faulted "
            f"{large[SETTINGS[0]]} times per allocation by default and {large[SETTINGS[1]]} "
            "times under them."
        )
    }
    for (n, t), before in default.items():
        if n != name:
            continue
        after, ref = kept[n, t], kept[reference, t]
        if before.minor_faults < 1:
            text = f"the {name} had no page faults per call to remove. " + _times(before, after)
        else:
            text = (
                f"the settings took the {name}'s page faults from {before.minor_faults:,.0f} "
                f"to {after.minor_faults:,.0f} per call, and " + _times(before, after)
            )
            text += " " + _against(after, ref, name, reference)
        unsteady = [p for p in (before, after) if not p.steady]
        if unsteady:
            text += (
                f" Its page faults were still falling after {unsteady[0].warmup_calls} warm-up "
                "calls (the cap), so these calls may not show the steady state."
            )
        found[f"{t} tokens:"] = text
    return found
