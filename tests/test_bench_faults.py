"""Page faults, system time and the allocator experiment: the verdicts follow the numbers.

The verdict tests use made-up ``Probe``s, so no real timing decides a test; one test runs the
experiment's subprocess machinery on a tiny configuration and checks only its structure.
"""

import math

import torch

from mha.bench import (
    KEEP_FREED_MEMORY,
    SETTINGS,
    Probe,
    allocator_experiment,
    allocator_table,
    allocator_verdict,
    resource_use,
)


def probe(name, tokens, ms, faults, spread=0.5):
    return Probe(
        name,
        tokens,
        ms,
        ms - spread,
        ms + spread,
        user_ms=ms,
        sys_ms=faults / 1000,
        minor_faults=faults,
    )


def results(split_default, split_kept, faults_default=9000, faults_kept=0, wrapper=10.0):
    return {
        SETTINGS[0]: {
            ("wrapper", 512): probe("wrapper", 512, wrapper, 0),
            ("split", 512): probe("split", 512, split_default, faults_default),
        },
        SETTINGS[1]: {
            ("wrapper", 512): probe("wrapper", 512, wrapper, 0),
            ("split", 512): probe("split", 512, split_kept, faults_kept),
        },
    }


def flat(text):
    return " ".join(text.split())


def test_faults_gone_and_time_saved_is_reported_with_both_times():
    text = flat(allocator_verdict(results(30.0, 8.0)))
    assert "without page faults the split took 8.0 ms instead of 30.0 ms" in text
    assert "faster than the wrapper in the same process (8.0 against 10.0 ms)" in text


def test_a_time_change_within_the_spread_is_inconclusive():
    text = flat(allocator_verdict(results(30.0, 29.8)))
    assert "the page faults are gone, but the split's time change is inconclusive" in text
    assert "slower than the wrapper" in text


def test_settings_that_leave_the_faults_in_place_test_nothing():
    text = flat(allocator_verdict(results(30.0, 8.0, faults_kept=9000)))
    assert "did not remove the page faults" in text and "tests nothing" in text


def test_no_faults_to_begin_with_means_nothing_to_remove():
    text = flat(allocator_verdict(results(30.0, 8.0, faults_default=0)))
    assert text == "512 tokens: the split had no page faults to remove."


def test_the_table_and_the_verdict_fit_a_phone():
    text = allocator_table(results(30.0, 8.0)) + "\n" + allocator_verdict(results(30.0, 8.0))
    assert max(len(line) for line in text.splitlines()) <= 79


def test_the_settings_are_glibcs_and_keep_freed_memory():
    assert KEEP_FREED_MEMORY == {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "100000000000"}


def test_resource_use_reports_per_call_figures_and_leaves_grad_mode_alone():
    module = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    usage = resource_use(module, x, 3)
    assert usage.wall_ms > 0 and usage.minor_faults >= 0 and not math.isnan(usage.sys_ms)
    assert torch.is_grad_enabled()
    usage = resource_use(module, x.requires_grad_(True), 2, grad=torch.ones(2, 4))
    assert module.weight.grad is not None


def test_the_experiment_runs_both_settings_in_fresh_processes():
    found = allocator_experiment(names=("wrapper",), tokens=(4,), num_heads=2, d_out=4, repeats=3)
    assert set(found) == set(SETTINGS)
    assert all(set(by_key) == {("wrapper", 4)} for by_key in found.values())
