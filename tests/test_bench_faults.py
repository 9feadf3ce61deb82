"""Page faults, system time and the allocator experiment: the verdicts follow the numbers.

The verdict tests use made-up ``Probe``s, so no real timing decides a test; one test runs the
experiment's machinery (two copies of this process, os.fork) on a tiny configuration and checks
only its structure, and that a copy's failure reaches the caller.
"""

import math
import os

import pytest
import torch

from mha.bench import (
    KEEP_FREED_MEMORY,
    SETTINGS,
    Probe,
    Usage,
    allocator_experiment,
    allocator_table,
    allocator_verdict,
    faults,
    resource_use,
)
from mha.bench.faults import Experiment


def probe(name, tokens, ms, faults, spread=0.5, steady=True):
    return Probe(
        name,
        tokens,
        ms,
        ms - spread,
        ms + spread,
        user_ms=ms,
        sys_ms=faults / 1000,
        minor_faults=faults,
        warmup_calls=4 if steady else 12,
        steady=steady,
    )


def results(
    split_default,
    split_kept,
    faults_default=9000,
    faults_kept=0,
    wrapper=10.0,
    large=(16384, 0),
    steady=True,
):
    return Experiment(
        probes={
            SETTINGS[0]: {
                ("wrapper", 512): probe("wrapper", 512, wrapper, 0),
                ("split", 512): probe("split", 512, split_default, faults_default, steady=steady),
            },
            SETTINGS[1]: {
                ("wrapper", 512): probe("wrapper", 512, wrapper, 0),
                ("split", 512): probe("split", 512, split_kept, faults_kept),
            },
        },
        large_block=dict(zip(SETTINGS, large, strict=True)),
    )


def flat(verdict):
    return " ".join(" ".join(f"{title} {text}" for title, text in verdict.items()).split())


def test_faults_gone_and_time_saved_is_reported_with_both_times():
    text = flat(allocator_verdict(results(30.0, 8.0)))
    assert "it honoured the settings" in text
    assert "page faults from 9,000 to 0 per call" in text
    assert "its time went from 30.0 to 8.0 ms: faster, beyond the spread" in text
    assert "faster than the wrapper in the same process (8.0 against 10.0 ms)" in text


def test_a_time_change_within_the_spread_is_inconclusive():
    text = flat(allocator_verdict(results(30.0, 29.8)))
    assert "from 30.0 to 29.8 ms, a change within the spread of single calls: inconclusive" in text
    assert "slower than the wrapper" in text


def test_faults_only_partly_removed_still_give_a_measured_conclusion():
    text = flat(allocator_verdict(results(30.0, 20.0, faults_kept=3000)))
    assert "page faults from 9,000 to 3,000 per call" in text
    assert "tests nothing" not in text and "faster, beyond the spread" in text


def test_a_c_library_that_ignores_the_settings_tests_nothing_whatever_the_modules_did():
    verdict = allocator_verdict(results(30.0, 8.0, large=(16384, 16384)))
    assert list(verdict) == ["The C library:"]
    assert "ignored the settings" in verdict["The C library:"]
    assert "tests nothing" in verdict["The C library:"]


@pytest.mark.parametrize("large", [(0, 0), (2, 1), (1, 0)])  # 1 or 2: copy-on-write faults
def test_a_c_library_that_reuses_large_blocks_by_default_has_nothing_to_change(large):
    verdict = allocator_verdict(results(30.0, 8.0, large=large))
    assert "nothing to change" in flat(verdict) and "tests nothing" in flat(verdict)
    assert "ignored" not in flat(verdict)


def test_a_system_without_fault_counts_says_so():
    verdict = allocator_verdict(results(30.0, 8.0, large=(math.nan, math.nan)))
    assert "Linux only" in flat(verdict) and "tests nothing here" in flat(verdict)


def test_off_linux_nothing_is_measured_and_the_verdict_says_so(monkeypatch):
    monkeypatch.setattr(faults.sys, "platform", "darwin")
    found = allocator_experiment(names=("wrapper",), tokens=(4,), num_heads=2, d_out=4)
    assert all(math.isnan(v) for v in found.large_block.values())
    assert "tests nothing here" in flat(allocator_verdict(found))
    assert allocator_table(found).startswith(f"{faults.LARGE_BLOCK_MIB} MiB block")


def test_no_faults_to_begin_with_means_nothing_to_remove():
    verdict = allocator_verdict(results(30.0, 29.9, faults_default=0))
    assert verdict["512 tokens:"].startswith("the split had no page faults per call to remove.")


def test_faults_still_falling_at_the_cap_are_reported():
    text = flat(allocator_verdict(results(30.0, 8.0, steady=False)))
    assert "still falling after 12 warm-up calls (the cap)" in text


def test_the_table_fits_a_phone():
    text = allocator_table(results(30.0, 8.0))
    assert max(len(line) for line in text.splitlines()) <= 44


def test_a_yardstick_timed_only_under_the_settings_gets_one_line_and_the_verdict_reads_it():
    found = results(30.0, 8.0)
    del found.probes[SETTINGS[0]]["wrapper", 512]  # kept_only=("wrapper",)
    lines = [line.split() for line in allocator_table(found).splitlines()]
    assert [line[:3] for line in lines if line[:1] in (["wrapper"], ["split"])] == [
        ["wrapper", "512", "kept"],
        ["split", "512", "default"],
        ["split", "512", "kept"],
    ]
    assert "faster than the wrapper in the same process (8.0 against 10.0 ms)" in flat(
        allocator_verdict(found)
    )


def test_kept_only_modules_are_left_out_of_the_default_copy_alone(monkeypatch):
    timed = {}
    monkeypatch.setattr(faults, "keep_freed_memory", lambda: True)  # this process stays default
    monkeypatch.setattr(faults, "large_block", lambda warmup: 0.0)
    monkeypatch.setattr(
        faults, "probe", lambda names, *args: timed.setdefault(len(timed), names) and []
    )
    threads = torch.get_num_threads()
    try:
        for setting in SETTINGS:
            faults.measured_under(setting, ("wrapper", "split"), (4,), 2, 4, 1, ("wrapper",))
    finally:
        torch.set_num_threads(threads)
    assert timed == {0: ("split",), 1: ("wrapper", "split")}  # SETTINGS: default, then kept


def scripted_faults(monkeypatch, counts):
    """Make ``faults.resource_use`` report ``counts`` (one per call) as page faults."""
    calls = iter(counts)
    monkeypatch.setattr(
        faults, "resource_use", lambda *args, **kwargs: Usage(1.0, 1.0, 0.0, next(calls))
    )


def test_warm_up_runs_until_the_faults_stop_falling(monkeypatch):
    scripted_faults(monkeypatch, [900, 500, 100, 0, 0, 0, 0] + [0] * 10)
    warmed = faults.warm_up({4: ({"split": None}, None)}, patience=3, cap=12)
    assert warmed["split", 4] == (7, True)  # the fall to 0, then 3 calls without a fall


def test_warm_up_stops_at_the_cap_and_says_the_faults_still_fell(monkeypatch):
    scripted_faults(monkeypatch, [1000 - 50 * i for i in range(20)])
    assert faults.warm_up({4: ({"split": None}, None)}, patience=3, cap=5)["split", 4] == (5, False)


def test_a_steady_count_needs_no_more_than_patience_calls(monkeypatch):
    scripted_faults(monkeypatch, [49156, 49160, 49150, 49156] + [49156] * 10)
    assert faults.warm_up({4: ({"split": None}, None)}, patience=3, cap=12)["split", 4] == (4, True)


def test_falling_ignores_small_wobbles():
    assert faults.falling([100, 50])
    assert not faults.falling([49156, 49150])
    assert not faults.falling([0, 0])


def test_the_large_block_faults_by_default_on_linux():
    if faults.resource is None:
        pytest.skip("no page-fault counts on this system")
    pages = faults.LARGE_BLOCK_MIB * 2**20 // os.sysconf("SC_PAGE_SIZE")  # 4 KiB or 16 KiB pages
    measured = faults.large_block(warmup=1, calls=2)
    print(f"a {faults.LARGE_BLOCK_MIB} MiB block: {measured:,.0f} faults, {pages:,} pages")
    assert measured > pages / 2  # most of its pages, whatever their size (huge pages aside)


def test_the_settings_are_glibcs_and_keep_freed_memory():
    assert KEEP_FREED_MEMORY == {"M_MMAP_MAX": 0, "M_TRIM_THRESHOLD": 2**31 - 1}
    assert faults.MALLOPT_OPTIONS == {"M_TRIM_THRESHOLD": -1, "M_MMAP_MAX": -4}  # malloc.h


def test_resource_use_reports_per_call_figures_and_leaves_grad_mode_alone():
    module = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    usage = resource_use(module, x, 3)
    assert usage.wall_ms > 0 and usage.minor_faults >= 0 and not math.isnan(usage.sys_ms)
    assert torch.is_grad_enabled()
    usage = resource_use(module, x.requires_grad_(True), 2, grad=torch.ones(2, 4))
    assert module.weight.grad is not None


def test_the_experiment_runs_both_settings_in_copies_of_this_process():
    found = allocator_experiment(names=("wrapper",), tokens=(4,), num_heads=2, d_out=4, repeats=3)
    assert set(found.probes) == set(found.large_block) == set(SETTINGS)
    assert all(set(by_key) == {("wrapper", 4)} for by_key in found.probes.values())
    assert all(p.warmup_calls >= 1 for by_key in found.probes.values() for p in by_key.values())


def test_a_copy_that_fails_raises_with_its_traceback():
    with pytest.raises(
        RuntimeError, match=r"(?s)the 'default' copy failed:.*ValueError: Unknown implementation"
    ):
        allocator_experiment(names=("no such module",), tokens=(4,), num_heads=2, d_out=4)


def test_glibc_accepts_the_settings_through_mallopt():
    if "glibc" not in (os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else ""):
        pytest.skip("mallopt is glibc's")
    pid = os.fork()  # in a copy: the settings would stay with this test process
    if pid == 0:
        os._exit(0 if faults.keep_freed_memory() else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_only_the_copy_with_the_settings_allocates_the_large_block_uncounted_first(monkeypatch):
    warmups = {}
    monkeypatch.setattr(faults, "keep_freed_memory", lambda: True)  # this process stays default
    monkeypatch.setattr(faults, "probe", lambda *args: [])
    threads = torch.get_num_threads()
    try:
        for setting in SETTINGS:
            monkeypatch.setattr(
                faults, "large_block", lambda warmup, s=setting: warmups.setdefault(s, warmup)
            )
            faults.measured_under(setting, ("split",), (4,), 2, 4, 1)
    finally:
        torch.set_num_threads(threads)
    assert warmups == {SETTINGS[0]: 0, SETTINGS[1]: faults.LARGE_BLOCK_WARMUP}
