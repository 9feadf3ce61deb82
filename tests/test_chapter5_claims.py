"""Chapter 5's prose claims, run where they could fail: warm and fresh processes, both CPU code
paths, and (for the verdict wording) a deliberately busy machine.

``facts()`` measures what the prose states as certain: operator calls per head count, the score
matrices a forward makes and holds at once, the order of operators inside
``nn.MultiheadAttention``'s fast path, and what a mask's constructor frees. It runs in this
process (warm: other tests ran before) and in two fresh subprocesses started side by side,
natively and under ``ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE``; every claim must hold in
all three.

The operator and tensor counts are exact, and exact on every CPU: they follow from the code and
from how this PyTorch version (torch 2.13.0, pinned) decomposes its operators, not from rounding
or timing. Another PyTorch version may change them, and this test says so by failing.

Page faults are measured, not predicted: the chapter says what takes them away (keeping freed
memory, in most processes, not every one), tested with the chapter's own experiment in three
fresh processes on each code path, with a
bound in pages of this machine's size (``os.sysconf``: 4 KiB on most x86-64 Linux systems, 16 KiB
on arm64 ones such as Apple's, where every count is a quarter). How many faults a default
process takes is not claimed: two fresh processes built alike measured 4,040 and 49,348 faults
per call. Every claim has a test that it can fail, on facts that contradict it. Each test
prints what it measured.
"""

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.benchmark import Timer

from mha import MultiHeadAttention
from mha.bench import QUICK, BlockTimer, held_in_memory, timed_modules
from mha.bench.faults import LARGE_BLOCK_MIB, SETTINGS, allocator_experiment
from mha.counting import QuietDispatchMode, operator_counts

D_OUT, HEADS, COUNT_TOKENS = 192, 12, 64  # the chapter's QUICK sweep
HEAD_COUNTS = (1, 2, 4, 16)
LENGTHS = (256, 512, 1024)  # the chapter's memory table: sweep.tokens[-3:]
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096  # bytes
PORTABLE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
CHAPTER = Path(__file__).parent.parent / "chapters" / "05_measuring.ipynb"
WHERE = ("warm process", "fresh process", "fresh, portable code path")


def fast_path_inside(num_tokens):
    """The operators inside ``_native_multi_head_attention``, in order, with their first input's
    shape and the bytes each allocated (the profiler's memory view).

    PyTorch's profiler without Kineto (``use_kineto=False``): the same events, shapes and bytes
    as ``torch.profiler.profile``, without Kineto's start-up, about 5 s of CPU in every process.
    """
    module = timed_modules(("torch_mha",), D_OUT, num_tokens, HEADS)["torch_mha"]
    x = torch.randn(1, num_tokens, D_OUT)
    with (
        torch.no_grad(),
        torch.autograd.profiler.profile(
            use_kineto=False, profile_memory=True, record_shapes=True
        ) as prof,
    ):
        module(x)
    inside = [
        e
        for e in prof.function_events
        if e.cpu_parent is not None and e.cpu_parent.name == "aten::_native_multi_head_attention"
    ]
    inside.sort(key=lambda e: e.time_range.start)
    return [(e.name.removeprefix("aten::"), e.input_shapes[0], e.cpu_memory_usage) for e in inside]


def mask_temporaries(context_length):
    """Float (context_length, context_length) tensors MultiHeadAttention's constructor makes and
    does not keep."""
    found = []

    class Seen(QuietDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                found.append(tuple(out.shape))
            return out

    with Seen():
        module = MultiHeadAttention(8, 8, context_length, 0.0, num_heads=2)
    kept = [tuple(b.shape) for b in module.buffers() if b.is_floating_point()]
    square = (context_length, context_length)
    return sum(shape == square for shape in found) - kept.count(square)


def facts():
    """Everything the claims below read, as plain JSON-able data."""
    torch.manual_seed(0)
    x = torch.randn(1, COUNT_TOKENS, D_OUT)
    calls = {}
    for h in HEAD_COUNTS:
        modules = timed_modules(
            ("split", "combined_qkv", "fused", "torch_mha", "torch_mha_nofast"),
            D_OUT,
            COUNT_TOKENS,
            h,
        )
        for name, module in modules.items():
            calls.setdefault(name, {})[str(h)] = operator_counts(module, x)[0]
    held = {}
    for num_tokens in LENGTHS:
        x_long = torch.randn(1, num_tokens, D_OUT)
        modules = timed_modules(("wrapper", "split", "fused"), D_OUT, num_tokens, HEADS)
        held[str(num_tokens)] = {
            name: (len(h.made), h.most_alive, h.peak_bytes)
            for name, h in ((n, held_in_memory(m, x_long)) for n, m in modules.items())
        }
    return {
        "calls": calls,
        "held": held,
        "fast_path": fast_path_inside(COUNT_TOKENS),
        "mask_temporaries": mask_temporaries(256),
    }


#: Fresh processes a code path runs the allocator experiment in: under its settings the split
#: still faulted in about one fresh process in ten (``honours_and_mostly_reuses``).
KEPT_PROCESSES = 3


def fresh_pair(code):
    """Start ``code`` in two fresh processes side by side, one on this CPU's code path and one on
    the portable path; ``{where: the JSON its last line printed}``."""
    native = {k: v for k, v in os.environ.items() if k not in PORTABLE}
    native.update(OMP_NUM_THREADS="1")
    running = {
        where: subprocess.Popen(
            [sys.executable, "-c", code, str(Path(__file__).parent)],
            env={**native, **env},
            cwd=CHAPTER.parent,
            stdout=subprocess.PIPE,
            text=True,
        )
        for where, env in zip(WHERE[1:], ({}, PORTABLE), strict=True)
    }
    found = {}
    for where, process in running.items():
        out = process.communicate(timeout=900)[0]  # a guard against a hang, not a time limit
        assert process.returncode == 0, f"the {where} failed"
        found[where] = json.loads(out.splitlines()[-1])
    return found


@functools.cache
def in_fresh_processes():
    """What two fresh processes started side by side measured, one on this CPU's code path and
    one on the portable path: ``{where: {"facts": facts(), "kept": kept_probe()}}``.

    One process per path serves both the counts and the allocator claim: each fresh process
    costs a start of Python and torch, and the two read independent things (the counts follow
    from the code; the kept side of the experiment runs in copies under glibc's settings).
    """
    code = "import json, sys; sys.path.insert(0, sys.argv[1]);"
    code += "import test_chapter5_claims as t;"
    code += 'print(json.dumps({"facts": t.facts(), "kept": t.kept_probe()}))'
    return fresh_pair(code)


def facts_in(where):
    if where == "warm process":
        return warm_facts()
    return in_fresh_processes()[where]["facts"]


@functools.cache
def warm_facts():
    return json.loads(json.dumps(facts()))  # the same types as from a subprocess


def fast_path_order(inside):
    """bmm (scores), then to (a bool (1, H, T, T) mask, one byte a number), then _masked_softmax."""
    names = [name for name, _, _ in inside]
    try:
        scores, to, softmax = names.index("bmm"), names.index("to"), names.index("_masked_softmax")
    except ValueError:
        return False
    _, shape, nbytes = inside[to]
    mask_bytes = HEADS * COUNT_TOKENS * COUNT_TOKENS
    return (
        scores < to < softmax
        and shape == [1, HEADS, COUNT_TOKENS, COUNT_TOKENS]
        and (nbytes >= mask_bytes)
    )


def flat(calls):
    return len(set(calls.values())) == 1


CLAIMS = {
    "fused and torch off make the same number of calls at every head count": lambda f: all(
        flat(f["calls"][n]) for n in ("fused", "torch_mha_nofast")
    ),
    "split and combined: one call more at two heads than at one, then the same": lambda f: all(
        f["calls"][n]["2"] == f["calls"][n]["1"] + 1
        and flat({h: c for h, c in f["calls"][n].items() if h != "1"})
        for n in ("split", "combined_qkv")
    ),
    "torch's fast path: 32 calls at one head, 6 from two heads on": lambda f: (
        f["calls"]["torch_mha"]["1"] == 32
        and all(f["calls"]["torch_mha"][str(h)] == 6 for h in HEAD_COUNTS[1:])
    ),
    "the split makes four score matrices and holds up to three at once": lambda f: all(
        f["held"][t]["split"][:2] == [4, 3] for t in f["held"]
    ),
    "the wrapper makes four per head and holds as many at once as the split": lambda f: all(
        f["held"][t]["wrapper"][0] == 4 * HEADS
        and f["held"][t]["wrapper"][1] == f["held"][t]["split"][1]
        for t in f["held"]
    ),
    "the fused module makes no score matrix": lambda f: all(
        f["held"][t]["fused"][0] == 0 for t in f["held"]
    ),
    "at long sequences the split holds far more alive at once (4x the peak or more)": lambda f: (
        f["held"]["1024"]["split"][2] >= 4 * f["held"]["1024"]["wrapper"][2]
    ),
    "the fast path: scores (bmm), then to(bool) of (1, H, T, T), then _masked_softmax": lambda f: (
        fast_path_order(f["fast_path"])
    ),
    "the mask's constructor frees two float temporaries of context_length²": lambda f: (
        f["mask_temporaries"] == 2
    ),
}


def failed_claims(where):
    found = facts_in(where)
    print(f"{where}: calls {found['calls']}, held {found['held']}")
    return [f"{where}: {claim}" for claim, holds in CLAIMS.items() if not holds(found)]


def test_every_claim_of_chapter_5_holds_in_this_warm_process():
    failed = failed_claims(WHERE[0])
    assert not failed, "\n".join(failed)


def test_every_claim_of_chapter_5_holds_in_fresh_processes_on_both_code_paths():
    failed = failed_claims(WHERE[1]) + failed_claims(WHERE[2])
    assert not failed, "\n".join(failed)


def test_each_claim_can_fail():
    """Each claim is false on facts that contradict it: a fast path that never drops, a split
    that holds all four tensors, a mask made before the scores, a constructor that keeps all."""
    true = facts_in("warm process")
    broken = json.loads(json.dumps(true))
    broken["calls"]["split"]["16"] += 15  # calls that grow with the heads
    broken["calls"]["fused"]["16"] += 15
    broken["calls"]["torch_mha"]["2"] = 32  # a fast path that starts later
    for t in broken["held"]:
        broken["held"][t]["split"] = [4, 4, 10]  # all four alive, a small peak
        broken["held"][t]["wrapper"] = [12, 1, 10]  # one score matrix per head
        broken["held"][t]["fused"] = [1, 1, 10]
    broken["fast_path"] = [s for s in true["fast_path"] if s[0] != "to"]
    broken["fast_path"].insert(0, ["to", [1, HEADS, COUNT_TOKENS, COUNT_TOKENS], 0])
    broken["mask_temporaries"] = 0
    for claim, holds in CLAIMS.items():
        assert holds(true), claim
        assert not holds(broken), claim


# --- page faults: measured, in fresh processes ---------------------------------------------

#: The chapter's experiment: the split at 1024 tokens with 9 heads of 16 (d_out 144).
EXPERIMENT_TOKENS, EXPERIMENT_HEADS, EXPERIMENT_D_OUT = QUICK.allocator_configuration()


def kept_probe():
    """The chapter's experiment, the split alone, as ``allocator_experiment`` runs it (two copies
    of this process, with their warm-up, the chapter's 3 timed calls): ``[large block's faults,
    the split's faults per call]`` in the copy under the settings. The split is timed in that
    copy only (``kept_only``): the default copy's timings are no claim, and it still checks the
    large block, as in the chapter."""
    found = allocator_experiment(
        names=("split",),
        tokens=(EXPERIMENT_TOKENS,),
        num_heads=EXPERIMENT_HEADS,
        d_out=EXPERIMENT_D_OUT,
        repeats=3,
        kept_only=("split",),
    )
    kept = SETTINGS[1]
    return [found.large_block[kept], found.probes[kept]["split", EXPERIMENT_TOKENS].minor_faults]


def kept_memory_reuses(
    large_block_faults, split_faults, num_tokens=EXPERIMENT_TOKENS, heads=EXPERIMENT_HEADS
):
    """Cell 46: with the settings, a freed score tensor's memory stays in the heap, and the next
    forward can reuse it. So the C library honours them (the large block stops faulting: under
    1 % of its pages per allocation) and no score tensor of the split's warmed-up calls comes
    from fresh memory: the median of its timed calls faults fewer pages than half of one score
    tensor holds (a single fresh score tensor would fault on every one of its pages).

    Not 0, and not 1 % of a tensor: the experiment runs in a copy of its process (``os.fork``),
    whose first write to a page it shares with the original faults once (copy on write; 2 such
    faults per allocation of the large block were measured), and a call touches memory besides
    the score tensors. Measured after the warm-up: 0 to 2 in most calls; 65 and 146 per call in
    fresh processes on the native path; 1,856 in one call whose heap grew, when what else the
    process allocated in between left no free chunk large enough (a median of 1,024 over 2
    calls). One score tensor at the experiment's size is 9,216 pages. How much the split faults
    *without* the settings depends on the process's history (4,040 and 49,348 faults per call
    were measured in two fresh processes), so that side is not a claim."""
    block_pages = LARGE_BLOCK_MIB * 2**20 // PAGE
    pages = heads * num_tokens * num_tokens * 4 // PAGE
    return large_block_faults < block_pages / 100 and split_faults < pages / 2


def honours_and_mostly_reuses(runs):
    """Cell 46 on one code path's fresh processes, ``[(large block's faults, the split's faults
    per call)]``: the C library honours the settings in every one (under 1 % of the large
    block's pages), and the split's freed memory is reused (``kept_memory_reuses``) in at least
    one. Not in every one: in some fresh processes the split still faulted one score tensor's
    pages on every warmed-up call under the settings (a median of 9,216 or 9,218 over 3 calls).
    Measured on the portable path, on 2 cores with one kept busy: in 1 of 12 processes, 1 of 10
    with address randomisation off, and once in a fresh clone's ``make test``; natively in none
    of 22 (65 and 146 at most). Why was not traced; the chapter says that it happens. With
    ``KEPT_PROCESSES`` = 3, at about 1 in 10 per process, a path misses every one about once in
    a thousand runs."""
    block_pages = LARGE_BLOCK_MIB * 2**20 // PAGE
    honoured = all(large < block_pages / 100 for large, _ in runs)
    return honoured and any(kept_memory_reuses(*run) for run in runs)


@functools.cache
def kept_faults_on_both_code_paths():
    """``{path: [(large block's faults, the split's faults per call)]}`` under the settings, from
    ``KEPT_PROCESSES`` fresh processes a path: those of ``in_fresh_processes``, then pairs that
    run the experiment alone."""
    code = "import json, sys; sys.path.insert(0, sys.argv[1]);"
    code += "import test_chapter5_claims as t; print(json.dumps(t.kept_probe()))"
    rounds = [{w: f["kept"] for w, f in in_fresh_processes().items()}]
    rounds += [fresh_pair(code) for _ in range(KEPT_PROCESSES - 1)]
    paths = dict(zip(WHERE[1:], ("native", "portable"), strict=True))
    return {path: [tuple(r[where]) for r in rounds] for where, path in paths.items()}


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's allocator on Linux")
def test_keeping_freed_memory_is_honoured_and_reused_on_both_code_paths():
    found = kept_faults_on_both_code_paths()
    print(f"under the settings, pages of {PAGE} B, (large block's faults, split's): {found}")
    missed = {path: f for path, f in found.items() if not honours_and_mostly_reuses(f)}
    assert not missed, f"under the settings, (large block's faults, split's per call): {missed}"


def test_the_fault_claims_can_fail():
    pages = EXPERIMENT_HEADS * EXPERIMENT_TOKENS**2 * 4 // PAGE
    assert kept_memory_reuses(0, 0)
    assert not kept_memory_reuses(0, pages)  # faulting when kept
    assert not kept_memory_reuses(0, pages // 2)  # half a score tensor fresh
    assert kept_memory_reuses(0, 146)  # measured in a fresh process, native path
    assert not kept_memory_reuses(16_385, 0)  # a C library that ignores them
    two_percent = LARGE_BLOCK_MIB * 2**20 // PAGE // 50
    assert not kept_memory_reuses(two_percent, 0)  # 2 % of the block's pages
    reused, fresh = (2.0, 1.0), (2.0, 9216.0)  # measured, the portable path
    assert honours_and_mostly_reuses([fresh, reused, fresh])
    assert not honours_and_mostly_reuses([fresh, fresh, fresh])  # never reused
    assert not honours_and_mostly_reuses([reused, (two_percent, 1.0), reused])  # once ignored


# --- the prose: no sentence in its wrong form ----------------------------------------------

WRONG = {
    "a larger one is mapped anew on every allocation": "only when no free heap chunk fits",
    "the kernel skipped work;": "a busy run printed 'faster' where 0 block pairs are skipped",
    "before it computes the full score": "the profiler shows bmm first, then to(bool)",
    "make about as many calls at every head count": "the fast path drops from 32 to 6 calls",
    "(never give freed memory back)": "the setting also freezes the mmap threshold",
}


def prose():
    cells = json.loads(CHAPTER.read_text())["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return re.sub(r"\s+", " ", text)


def infers_skipped_work_from_a_verdict(text):
    """A sentence that reads "faster" as "the kernel skipped work": a busy run contradicts it."""
    return bool(re.search(r"faster[^.]{0,120}(?<!not )skip(ped|s)? work", text))


def test_no_sentence_of_chapter_5_remains_in_its_wrong_form():
    text = prose()
    assert not [f"{old!r}: {why}" for old, why in WRONG.items() if old in text]
    assert not infers_skipped_work_from_a_verdict(text)
    assert "trim threshold" in text and "transparent huge pages" in text


def test_the_verdict_check_catches_the_old_reading():
    old = (
        "Where the causal call is faster beyond the spread (the quartiles of the two times do "
        "not overlap), the kernel skipped work; where it is inconclusive, it did not"
    )
    assert infers_skipped_work_from_a_verdict(old)
    new = "a causal call that came out faster there did not skip work (another program"
    assert not infers_skipped_work_from_a_verdict(new)


def blocks_named(text):
    """The sizes the prose gives the allocator experiment's large block ("a 40 MiB block")."""
    return {int(size) for size in re.findall(r"(\d+) MiB block", text)}


def test_the_prose_names_the_large_block_the_experiment_allocates():
    assert blocks_named(prose()) == {LARGE_BLOCK_MIB}
    assert blocks_named("a 64 MiB block, over any threshold") != {LARGE_BLOCK_MIB}


def experiment_sizes_named(text):
    """The sizes the prose gives the allocator experiment: "with 9 heads of the same width
    instead of 12 (`d_out` 144, ...): each of the split's score tensors is then 36 MiB instead of
    48, still above the 32 MiB cap"."""
    found = re.search(
        r"with (\d+) heads of the same width instead of (\d+) \(`d_out` (\d+).*?"
        r"score tensors is then (\d+) MiB instead of (\d+), still above the (\d+) MiB cap",
        text,
    )
    return tuple(int(n) for n in found.groups()) if found else None


def sizes_hold(named):
    """The prose's sizes are the experiment's and the sweep's, and the experiment's score tensor
    is above glibc's largest mmap threshold (32 MiB on 64-bit systems), as the prose says."""
    heads, sweep_heads, d_out, mib, sweep_mib, cap = named
    tensor_mib = EXPERIMENT_HEADS * EXPERIMENT_TOKENS**2 * 4 / 2**20
    sweep_tensor_mib = QUICK.tokens_sweep_heads * QUICK.tokens[-1] ** 2 * 4 / 2**20
    return (
        (heads, sweep_heads, d_out)
        == (EXPERIMENT_HEADS, QUICK.tokens_sweep_heads, EXPERIMENT_D_OUT)
        and (mib, sweep_mib, cap) == (tensor_mib, sweep_tensor_mib, 32)
        and tensor_mib > cap
        and EXPERIMENT_D_OUT // EXPERIMENT_HEADS == QUICK.d_out // QUICK.tokens_sweep_heads
    )


def test_the_prose_names_the_sizes_the_allocator_experiment_runs_at():
    named = experiment_sizes_named(prose())
    print(f"the prose: {named}; the code: {QUICK.allocator_configuration()}")
    assert named is not None and sizes_hold(named)


def test_the_size_check_can_fail():
    assert sizes_hold((9, 12, 144, 36, 48, 32))
    assert not sizes_hold((8, 12, 128, 32, 48, 32))  # another head count
    assert not sizes_hold((9, 12, 144, 48, 48, 32))  # another tensor size
    assert experiment_sizes_named("with 12 heads, d_out 192") is None


# --- the timer: the block's growth the prose names ------------------------------------------


def growth_of(timer_class):
    """The factor by which ``timer_class`` grows its block, read off the run counts it tries for
    a statement of 0.5 ms (the timer's own overhead a microsecond)."""
    tried = []

    class Scripted(timer_class):
        def _timeit(self, number):
            tried.append(number)
            return 1e-6 + number * 5e-4

    Scripted("pass")._estimate_block_size(0.01)
    counts = [n for n in tried if n]
    return {later // earlier for earlier, later in zip(counts, counts[1:])}


def steps_named(text):
    """The growth the prose gives the timer's block: "in steps of 2 instead of 10"."""
    found = re.search(r"grows the block in steps of (\d+) instead of (\d+)", text)
    return tuple(int(n) for n in found.groups()) if found else None


def test_the_prose_names_the_steps_the_timers_grow_their_blocks_by():
    named = steps_named(prose())
    print(f"the prose: {named}; BlockTimer: {growth_of(BlockTimer)}, Timer: {growth_of(Timer)}")
    assert named is not None
    assert {named[0]} == growth_of(BlockTimer) and {named[1]} == growth_of(Timer)


def test_the_steps_check_can_fail():
    assert growth_of(BlockTimer) != growth_of(Timer)  # the two timers differ
    assert steps_named("grows the block in steps of 4 instead of 10") != (2, 10)
    assert steps_named("grows the block in larger steps") is None


# --- the sweep: the blocks the prose says it asks for at long lengths ------------------------

NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def long_blocks_named(text):
    """What the prose says of the quick sweep's long lengths: "At the two longest lengths every
    call is slow, so the quick sweep asks there for two blocks instead of three"."""
    found = re.search(
        r"At the (\w+) longest lengths every call is slow, so the quick sweep asks there for "
        r"(\w+) blocks instead of (\w+)",
        text,
    )
    return tuple(NUMBER_WORDS.get(word) for word in found.groups()) if found else None


def long_blocks_hold(named, sweep=QUICK):
    """The lengths the prose names are the ones ``sweep`` asks fewer blocks at, and the counts
    are the sweep's."""
    lengths, blocks, usual = named
    fewer = [t for t in sweep.tokens if sweep.blocks_at("tokens", t) != sweep.min_blocks]
    return fewer == list(sweep.tokens[-lengths:]) and (blocks, usual) == (
        sweep.min_blocks_long,
        sweep.min_blocks,
    )


def test_the_prose_names_the_blocks_the_sweep_asks_for_at_long_lengths():
    named = long_blocks_named(prose())
    print(f"the prose: {named}; the sweep: from {QUICK.long_from} tokens, {QUICK.min_blocks_long}")
    assert named is not None and long_blocks_hold(named)


def test_the_long_blocks_check_can_fail():
    assert long_blocks_hold((2, 2, 3))
    assert not long_blocks_hold((1, 2, 3))  # only the longest length
    assert not long_blocks_hold((2, 3, 3))  # another count
    assert long_blocks_named("At the longest length every call is slow") is None
