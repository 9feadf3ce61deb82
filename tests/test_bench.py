"""The benchmark's arithmetic, verdicts, files and command line.

No test asserts a real timing: the timer is replaced by ``FakeTimer``, which returns scripted
block times, and the rows that feed tables and figures are ``synthetic``.
"""

import csv
import dataclasses
import math
import subprocess
import sys

import pytest
import torch
from torch.utils.benchmark import Measurement, Timer
from torch.utils.flop_counter import FlopCounterMode

from mha.bench import (
    BENCHED,
    COLUMNS,
    CSV_COLUMNS,
    HEAD_COUNTS,
    LABELS,
    QUICK,
    TARGETS,
    TIMED,
    BlockTimer,
    FastPathOff,
    Row,
    Sweep,
    Timing,
    causal_block_prediction,
    compare,
    comparison,
    flop_breakdown,
    forward_flops,
    held_in_memory,
    markdown,
    measure,
    method_note,
    overhead_crossover,
    part_of_whole,
    pass_flops,
    ratios,
    report_targets,
    run_sweep,
    score_steps,
    speedup_lines,
    summary,
    target_verdict,
    time_causal_attention,
    time_in_rounds,
    timed_modules,
    timing_tables,
    usage_table,
    verdicts,
    write_csv,
)
from mha.bench import __main__ as cli
from mha.bench import timing as timing_module
from mha.counting import matmul_sizes
from mha.plots_bench import (
    IMPLEMENTATION_STYLES,
    implementation_colour,
    plot_benchmark,
    plot_split_speedup,
    plot_throughput,
    plot_time_vs_heads,
)
from mha.variants import equivalent_modules

TINY = Sweep(
    d_out=8,
    batch=2,
    heads=(1, 2),
    heads_sweep_tokens=4,
    tokens=(2, 4, 8),
    tokens_sweep_heads=2,
    min_run_time=0.001,
    min_blocks=3,
    max_run_time=0.01,
    rounds=2,
    budget=60,
    ceiling_size=32,
)


class FakeTimer:
    """Stands in for ``Timer``: ``blocked_autorange``, ``_timeit`` return scripted block times."""

    def __init__(self, label, script, log):
        self.label, self.script, self.log = label, script, log

    def blocked_autorange(self, min_run_time):
        self.log.append((self.label, min_run_time))
        times = self.script[self.label]
        raw = times.pop(0) if isinstance(times[0], list) else times  # per call, or fixed
        return Measurement(number_per_run=1, raw_times=list(raw), task_spec=None)

    def _timeit(self, number):
        """Seconds for one block: the next time of the next scripted call (or the fixed first)."""
        self.log.append((self.label, "timeit"))
        times = self.script[self.label]
        if not isinstance(times[0], list):
            return times[0]
        block = times[0].pop(0)
        if not times[0]:
            times.pop(0)
        return block


def fake_timer(monkeypatch, script, log=None):
    log = [] if log is None else log
    monkeypatch.setattr(
        timing_module, "_timer", lambda stmt, label, **values: FakeTimer(label, script, log)
    )
    return log


def fake_cases(names):
    """One case of modules that do nothing (the fake timer never calls them; the warm-up does)."""
    return [lambda: ({name: (lambda x: x) for name in names}, None)]


def timing(median, low, high):
    return Timing(
        median_ms=median, low_ms=low, high_ms=high, blocks=5, runs=5, capped=False, rounds=1
    )


def synthetic(times, tokens=(16, 32, 64, 128, 256), sweep="tokens", spread=0.0):
    base = dict(
        timed="forward",
        device="cpu",
        threads=1,
        batch=1,
        d_in=8,
        d_out=8,
        blocks=5,
        runs=5,
        capped=False,
        rounds=2,
        user_ms=1.0,
        sys_ms=0.0,
        minor_faults=0.0,
        flops=1,
        gflops=1.0,
        ceiling_gflops=10.0,
        aten_ops=1,
        matmul_ops=1,
    )
    key = "num_tokens" if sweep == "tokens" else "num_heads"
    other = {"num_heads": 2} if sweep == "tokens" else {"num_tokens": 16}
    return [
        Row(
            sweep=sweep,
            implementation=name,
            median_ms=ms,
            low_ms=ms - spread,
            high_ms=ms + spread,
            **{key: t},
            **other,
            **base,
        )
        for name, series in times.items()
        for t, ms in zip(tokens, series, strict=True)
    ]


def both_sweeps():
    """Synthetic rows of every timed implementation in a head sweep and a length sweep."""
    times = {name: [1.0 + i, 2.0 + i, 4.0 + i] for i, name in enumerate(TIMED)}
    return synthetic(times, tokens=(1, 2, 4), sweep="heads") + synthetic(
        times, tokens=(16, 64, 256), spread=0.1
    )


# --- FLOPs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["wrapper", "split", "combined_qkv"])
@pytest.mark.parametrize(
    "batch, num_tokens, d_model, num_heads", [(2, 6, 8, 2), (1, 5, 12, 3), (3, 4, 16, 1)]
)
def test_flop_formula_matches_the_multiply_adds_the_dispatcher_sees(
    name, batch, num_tokens, d_model, num_heads
):
    module = equivalent_modules([name], d_model, d_model, num_tokens, num_heads)[name]
    counted = 2 * sum(matmul_sizes(module, torch.randn(batch, num_tokens, d_model)))
    assert forward_flops(name, batch, num_tokens, d_model, d_model) == counted


def test_flops_do_not_depend_on_the_head_count():
    for name in ("wrapper", "split"):
        counts = set()
        for num_heads in HEAD_COUNTS:
            module = equivalent_modules([name], 48, 48, 5, num_heads)[name]
            counts.add(2 * sum(matmul_sizes(module, torch.randn(1, 5, 48))))
        assert counts == {forward_flops(name, 1, 5, 48, 48)}


def test_the_split_does_the_wrappers_arithmetic_plus_only_the_output_projection():
    wrapper = flop_breakdown(4, 512, 768, 768, out_proj=False)
    split = flop_breakdown(4, 512, 768, 768)
    assert {k: v for k, v in split.items() if k in wrapper} == wrapper
    assert split["output projection"] == 2 * 4 * 512 * 768 * 768


@pytest.mark.parametrize("name", ["wrapper", "split", "combined_qkv"])
def test_a_training_step_does_three_times_the_forwards_matmul_flops(name):
    module = equivalent_modules([name], 12, 12, 5, 3)[name].train()
    x = torch.randn(2, 5, 12, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        module(x).backward(torch.ones(2, 5, 12))
    assert counter.get_total_flops() == pass_flops(name, 2, 5, 12, 12, backward=True)


# --- nn.MultiheadAttention's fast path -----------------------------------------------------------


def test_the_fast_path_switch_holds_only_during_the_call_and_changes_the_path():
    module = timed_modules(["torch_mha", "torch_mha_nofast"], 8, 6, 2)
    x = torch.randn(1, 6, 8)
    assert isinstance(module["torch_mha_nofast"], FastPathOff)
    from mha.counting import count_ops

    assert "_native_multi_head_attention" in count_ops(module["torch_mha"], x)
    assert "_native_multi_head_attention" not in count_ops(module["torch_mha_nofast"], x)
    assert torch.backends.mha.get_fastpath_enabled()
    with torch.no_grad():
        torch.testing.assert_close(module["torch_mha_nofast"](x), module["torch_mha"](x))


def test_unknown_implementations_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="torch_mha_nofast"):
        timed_modules(["tpu"], 8, 4, 2)


# --- timing method, with a fake timer ------------------------------------------------------------


def test_each_module_keeps_the_median_and_quartiles_of_its_quietest_round(monkeypatch):
    script = {"a": [[3.0] * 3, [1.0, 1.0, 9.0], [2.0] * 3], "b": [[5.0] * 3, [6.0] * 3, [4.0] * 3]}
    fake_timer(monkeypatch, script)
    (kept,) = time_in_rounds(
        fake_cases(["a", "b"]), min_run_time=0.1, min_blocks=3, max_run_time=10, rounds=3
    )
    assert kept["a"].median_ms == 1000.0 and kept["b"].median_ms == 4000.0
    assert kept["a"].low_ms == 1000.0 and kept["a"].high_ms == 5000.0  # quartiles of 1, 1, 9
    assert kept["a"].rounds == 3


def test_every_module_is_warmed_up_before_the_first_round(monkeypatch):
    events = []
    script = {name: [1.0] * 3 for name in "ab"}
    log = fake_timer(monkeypatch, script)
    monkeypatch.setattr(
        timing_module, "warm_up", lambda modules, x, **kw: events.append(("warm", list(modules)))
    )
    time_in_rounds(fake_cases(["a", "b"]), min_run_time=0.1, min_blocks=3, max_run_time=1, rounds=1)
    assert events == [("warm", ["a", "b"])] and len(log) == 2


def test_the_warm_up_calls_each_module_at_least_twice():
    calls = []
    modules = {name: (lambda x, n=name: calls.append(n)) for name in "ab"}
    timing_module.warm_up(modules, None, seconds=0.0)
    assert calls == ["a", "a", "b", "b"]


def test_the_modules_take_turns_at_being_timed_first(monkeypatch):
    script = {name: [1.0] * 3 for name in "abc"}
    log = fake_timer(monkeypatch, script)
    time_in_rounds(
        fake_cases(["a", "b", "c"]), min_run_time=0.1, min_blocks=3, max_run_time=1, rounds=3
    )
    assert "".join(label for label, _ in log) == "abcbcacab"


def test_a_slow_measurement_with_too_few_blocks_gets_the_missing_ones_one_call_each(monkeypatch):
    log = fake_timer(monkeypatch, {"slow": [[0.3], [0.3, 0.2, 0.3]]})
    (kept,) = time_in_rounds(
        fake_cases(["slow"]), min_run_time=0.1, min_blocks=4, max_run_time=10, rounds=1
    )
    assert log == [("slow", 0.1)] + [("slow", "timeit")] * 3  # no second estimate of the size
    assert kept["slow"].blocks == 4 and not kept["slow"].capped  # the first call's block is kept


def test_a_fast_measurement_gets_its_missing_blocks_at_the_same_size_without_a_new_estimate():
    class Timer:  # 10 runs a block: the missing blocks are 10 runs each, timed directly
        def __init__(self):
            self.asked, self.timed = [], []

        def blocked_autorange(self, min_run_time):
            self.asked.append(min_run_time)
            return Measurement(10, [0.01], task_spec=None)

        def _timeit(self, number):
            self.timed.append(number)
            return 0.02

    timer = Timer()
    measurement, capped = measure(timer, min_run_time=0.001, min_blocks=3, max_run_time=1.0)
    assert timer.asked == [0.001] and timer.timed == [10, 10]  # no second blocked_autorange
    assert measurement.number_per_run == 10 and measurement.raw_times == [0.01, 0.02, 0.02]
    assert not capped


def scripted_block_size(timer_class, per_call, min_run_time=0.01, overhead=1e-6):
    """The runs per block ``timer_class`` picks for a statement of ``per_call`` seconds, and
    the run counts it tried; the timer's own overhead is ``overhead`` seconds a block."""
    tried = []

    class Scripted(timer_class):
        def _timeit(self, number):
            tried.append(number)
            return overhead + number * per_call

    return Scripted("pass")._estimate_block_size(min_run_time), [n for n in tried if n]


def test_the_block_size_grows_in_steps_of_2_by_pytorchs_rule():
    # 0.5 ms a call: overhead under 1e-4 of a block from 20 runs (10 ms): 32 runs, 16 ms.
    assert scripted_block_size(BlockTimer, 5e-4) == (32, [1, 2, 4, 8, 16, 32])
    assert scripted_block_size(Timer, 5e-4) == (100, [1, 10, 100])  # PyTorch's: 50 ms blocks
    assert scripted_block_size(BlockTimer, 0.02) == (1, [1])  # a call outlasts min_run_time
    assert scripted_block_size(BlockTimer, 2e-3) == (8, [1, 2, 4, 8])  # 16 ms
    assert scripted_block_size(BlockTimer, 0.0, overhead=1e-9)[0] < 2**31  # the int cap


def test_the_retry_is_capped_and_the_cap_is_reported():
    log = []
    timer = FakeTimer("slow", {"slow": [[2.0], [2.0]]}, log)
    measurement, capped = measure(timer, min_run_time=0.1, min_blocks=5, max_run_time=3.0)
    assert log == [("slow", 0.1), ("slow", "timeit")]  # 4 more × 2 s would be 8 s: 1 fits in 3
    assert capped and len(measurement.raw_times) == 2


def test_once_the_budget_is_spent_no_round_starts_and_nothing_is_retried(monkeypatch):
    log = fake_timer(monkeypatch, {"a": [1.0], "b": [1.0]})
    (kept,) = time_in_rounds(
        fake_cases(["a", "b"]), min_run_time=0.1, min_blocks=3, max_run_time=5, rounds=4, budget=0
    )
    assert [label for label, _ in log] == ["a", "b"]  # one round, one call each
    assert kept["a"].rounds == 1 and kept["a"].capped


def test_the_sweep_times_every_implementation_at_every_configuration(monkeypatch):
    fake_timer(monkeypatch, {name: [0.001] * 3 for name in TIMED})
    monkeypatch.setattr(timing_module, "matmul_ceiling", lambda *args: 100.0)
    rows = run_sweep(TINY)
    expected = [(s, t, h, name) for s, t, h in TINY.configurations() for name in TIMED]
    assert [(r.sweep, r.num_tokens, r.num_heads, r.implementation) for r in rows] == expected
    assert all(r.median_ms == 1.0 and r.blocks == 3 for r in rows)
    ends = {("heads", min(TINY.heads)), ("heads", max(TINY.heads))}
    ends |= {("tokens", min(TINY.tokens)), ("tokens", max(TINY.tokens))}
    for r in rows:  # resource use at each sweep's ends, where the chapter reads it, only
        at_an_end = (r.sweep, r.num_heads if r.sweep == "heads" else r.num_tokens) in ends
        measured = [not math.isnan(v) for v in (r.user_ms, r.sys_ms, r.minor_faults)]
        assert measured == [at_an_end] * 3, (r.sweep, r.num_tokens, r.num_heads)
        assert not at_an_end or r.minor_faults >= 0
    for r in rows:  # counted independently: 2 × the multiply-adds of every matmul called
        # the fused kernel and the fast path hide their products from the counter; they
        # compute the same products as the split, so their rows carry the split's count
        explicit = ("wrapper", "split", "combined_qkv")
        counted_as = r.implementation if r.implementation in explicit else "split"
        module = equivalent_modules([counted_as], 8, 8, r.num_tokens, r.num_heads)[counted_as]
        x = torch.randn(r.batch, r.num_tokens, 8)
        assert r.flops == 2 * sum(matmul_sizes(module, x)), r
    wrapper = [
        (r.aten_ops, r.matmul_ops)
        for r in rows
        if r.sweep == "heads" and r.implementation == "wrapper"
    ]
    assert [m for _, m in wrapper] == [5, 10] and wrapper[1][0] == 2 * wrapper[0][0] - 1


def test_at_the_longest_length_only_the_named_implementations_are_timed(monkeypatch):
    fake_timer(monkeypatch, {name: [0.001] * 3 for name in TIMED})
    monkeypatch.setattr(timing_module, "matmul_ceiling", lambda *args: 100.0)
    few = dataclasses.replace(TINY, at_longest=("wrapper", "split"))
    rows = run_sweep(few)
    longest = [r.implementation for r in rows if (r.sweep, r.num_tokens) == ("tokens", 8)]
    assert longest == ["wrapper", "split"]
    assert len(rows) == len(run_sweep(TINY)) - (len(TIMED) - 2)
    fused = [r.num_tokens for r in rows if r.implementation == "fused" and r.sweep == "tokens"]
    assert fused == [2, 4]
    text = timing_tables(rows, sweeps=("tokens",))
    at_8 = [line.split() for line in text.splitlines() if line.startswith(f"{8:>10}")]
    assert at_8 == [["8", "1.000", "1.000", "-"], ["8", "-", "-", "-"]]
    assert list(ratios(rows, "fused", "torch_mha")) == [2, 4]  # only where both were timed
    assert list(verdicts(rows, "fused", "wrapper")) == [2, 4]
    assert list(verdicts(rows, "split", "wrapper")) == [2, 4, 8]


def test_the_quick_sweep_times_the_modules_whose_memory_chapter_5_counts_at_its_longest_length():
    assert QUICK.timed_at("tokens", QUICK.tokens[-1], TIMED) == ("wrapper", "split", "fused")
    assert QUICK.timed_at("tokens", QUICK.tokens[-2], TIMED) == TIMED
    assert QUICK.timed_at("heads", QUICK.heads_sweep_tokens, TIMED) == TIMED
    assert QUICK.blocks_at("tokens", QUICK.tokens[-1]) == 2
    assert QUICK.blocks_at("tokens", QUICK.tokens[-2]) == 2  # 512 tokens: calls are slow too
    assert QUICK.blocks_at("tokens", QUICK.tokens[-3]) == QUICK.min_blocks == 3
    assert QUICK.blocks_at("heads", QUICK.heads_sweep_tokens) == 3


def test_slow_calls_at_long_lengths_get_the_fewer_blocks_asked_for(monkeypatch):
    fake_timer(monkeypatch, {name: [0.005] for name in TIMED})  # one block a call: slow
    monkeypatch.setattr(timing_module, "matmul_ceiling", lambda *args: 100.0)
    rows = run_sweep(dataclasses.replace(TINY, min_blocks_long=2, long_from=4))
    long = {r.blocks for r in rows if r.sweep == "tokens" and r.num_tokens >= 4}
    elsewhere = {r.blocks for r in rows if r.sweep == "heads" or r.num_tokens < 4}
    assert long == {2} and elsewhere == {3}
    assert not any(r.capped for r in rows)


def test_blocks_added_one_at_a_time_bring_their_resource_use_and_the_sweep_reads_it(monkeypatch):
    log = fake_timer(monkeypatch, {name: [0.005] for name in TIMED})  # one block a call: slow
    (kept,) = time_in_rounds(
        fake_cases(["wrapper"]), min_run_time=0.001, min_blocks=3, max_run_time=1, rounds=1
    )
    assert log.count(("wrapper", "timeit")) == 2 and kept["wrapper"].usage is not None
    assert kept["wrapper"].usage.minor_faults >= 0  # per call of the two blocks added
    log.clear()
    monkeypatch.setattr(timing_module, "matmul_ceiling", lambda *args: 100.0)
    called = []
    monkeypatch.setattr(timing_module, "resource_use", lambda *a, **k: called.append(a))
    rows = run_sweep(TINY)
    assert not called  # every end's resource use came from the added blocks' calls
    assert sum(not math.isnan(r.user_ms) for r in rows) == 4 * len(TIMED)


def test_a_backward_sweep_counts_three_times_the_flops(monkeypatch):
    fake_timer(monkeypatch, {name: [0.001] * 3 for name in TIMED})
    monkeypatch.setattr(timing_module, "matmul_ceiling", lambda *args: 100.0)
    rows = run_sweep(TINY, implementations=("wrapper", "split"), backward=True)
    assert {r.timed for r in rows} == {"forward+backward"}
    assert all(r.flops == 3 * forward_flops(r.implementation, 2, r.num_tokens, 8, 8) for r in rows)


# --- verdicts ------------------------------------------------------------------------------------


def test_only_spreads_that_do_not_overlap_give_a_verdict():
    assert compare(timing(1.0, 0.9, 1.1), timing(2.0, 1.9, 2.1)) == "faster"
    assert compare(timing(2.0, 1.9, 2.1), timing(1.0, 0.9, 1.1)) == "slower"
    assert compare(timing(1.0, 0.8, 1.5), timing(1.2, 1.1, 1.3)) == "inconclusive"


def test_a_single_block_has_no_spread_to_judge_by():
    one_block = dataclasses.replace(timing(1.0, 1.0, 1.0), blocks=1)
    assert compare(one_block, timing(9.0, 8.9, 9.1)) == "inconclusive"
    assert compare(timing(9.0, 8.9, 9.1), one_block) == "inconclusive"


def test_a_part_longer_than_its_whole_is_a_measurement_problem():
    whole = timing(10.0, 9.0, 11.0)
    assert part_of_whole(369.8, whole) == "measurement problem"
    assert part_of_whole(5.0, whole) == "consistent"


def test_the_crossover_is_where_the_wrapper_takes_twice_its_overhead():
    assert 64 < overhead_crossover(synthetic({"wrapper": [1.0, 1.1, 1.5, 3.0, 6.0]})) < 128
    doubling = synthetic({"wrapper": [1.0, 2.0, 4.0, 8.0, 16.0]})
    assert overhead_crossover(doubling) == pytest.approx(32)
    assert overhead_crossover(synthetic({"wrapper": [1.0, 1.1, 1.2, 1.5, 1.9]})) is None


def test_ratios_and_verdicts_per_length():
    rows = synthetic(
        {"wrapper": [4.0, 4.0, 6.0, 9.0, 20.0], "split": [1.0, 2.0, 3.0, 9.0, 40.0]}, spread=0.5
    )
    assert ratios(rows, "wrapper", "split") == {16: 4.0, 32: 2.0, 64: 2.0, 128: 1.0, 256: 0.5}
    assert verdicts(rows, "split", "wrapper") == {
        16: "faster",
        32: "faster",
        64: "faster",
        128: "inconclusive",
        256: "slower",
    }


# --- targets, judged against the better nn.MultiheadAttention path --------------------------------


def test_the_fused_target_is_judged_against_the_faster_path():
    _, fused = TARGETS
    timings = {
        "fused": timing(1.0, 0.99, 1.01),
        "torch_mha": timing(3.0, 2.9, 3.1),
        "torch_mha_nofast": timing(1.2, 1.19, 1.21),
    }
    assert target_verdict(fused, timings) == ("PASS", "torch_mha_nofast")
    timings["torch_mha_nofast"] = timing(0.8, 0.79, 0.81)
    assert target_verdict(fused, timings) == ("FAIL", "torch_mha_nofast")
    timings["torch_mha_nofast"] = timing(0.97, 0.9, 1.0)
    assert target_verdict(fused, timings)[0] == "INCONCLUSIVE"


def test_targets_on_the_command_line_time_both_paths_with_a_fake_timer(monkeypatch, capsys):
    script = {
        "wrapper": [3.0] * 5,
        "split": [1.0] * 5,
        "fused": [1.0] * 5,
        "torch_mha": [3.0] * 5,
        "torch_mha_nofast": [1.2] * 5,
    }
    fake_timer(monkeypatch, script)
    # Stand-in modules: the fake timer never calls them, and the warm-up (tested on its own)
    # would run the GPT-2-sized target's layers for real, in every round's preparation too.
    prepared = []
    monkeypatch.setattr(
        comparison,
        "prepare",
        lambda names, *args: prepared.append(tuple(names)) or (dict.fromkeys(names), None),
    )
    monkeypatch.setattr(timing_module, "warm_up", lambda *args, **kwargs: None)
    threads = torch.get_num_threads()
    try:
        assert cli.main(["--targets"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert set(prepared) == {(*t.references, t.implementation) for t in TARGETS}
    out = capsys.readouterr().out
    assert out.count("PASS") == 2
    assert "nn.MultiheadAttention, fast path: 3000.000 ms" in out
    assert "time ratio to nn.MultiheadAttention, fast path off: 0.833" in out
    script["fused"] = [2.0] * 5
    fake_timer(monkeypatch, script)
    try:
        assert cli.main(["--targets"]) == 1
    finally:
        torch.set_num_threads(threads)
    assert "FAIL  FusedMultiHeadAttention" in capsys.readouterr().out


def test_the_target_report_says_when_to_run_again():
    _, fused = TARGETS
    timings = {
        "fused": timing(1.0, 0.9, 1.1),
        "torch_mha": timing(3.0, 2.9, 3.1),
        "torch_mha_nofast": timing(1.0, 0.9, 1.1),
    }
    report = report_targets([(fused, timings)])
    assert report.startswith("INCONCLUSIVE") and "idle machine" in report


# --- reports, files, figures ---------------------------------------------------------------------


def test_every_printed_line_fits_a_phone():
    rows = both_sweeps()
    text = "\n".join(
        [
            timing_tables(rows),
            summary(rows),
            markdown(rows, TINY, "torch x, cpu", ["--quick"]),
        ]
    )
    too_long = [line for line in text.splitlines() if len(line) > 79 and not line.startswith("|")]
    assert not too_long


def test_every_timed_implementation_has_a_label_a_short_column_and_a_look():
    for name in BENCHED:
        assert name in LABELS and name in IMPLEMENTATION_STYLES, name
        assert len(COLUMNS[name]) <= 10, f"{COLUMNS[name]!r}: three columns must fit a phone"


def test_the_chapters_tables_fit_a_phones_output_box():
    rows = both_sweeps()
    text = "\n".join([timing_tables(rows), usage_table(rows, 256), *speedup_lines(rows)])
    too_long = [line for line in text.splitlines() if len(line) > 44]
    assert not too_long


def test_the_causal_prediction_follows_the_kernels_key_blocks_of_512():
    assert causal_block_prediction(256) == (0, 4, 1.0)  # one key block: nothing to skip
    assert causal_block_prediction(512) == (0, 8, 1.0)
    assert causal_block_prediction(1024) == (2, 8, 0.75)  # 4 query blocks of 256, 2 key blocks


def test_the_causal_timing_takes_the_heads_asked_for_as_wide_as_the_length_sweeps(monkeypatch):
    shapes = []

    def fake_rounds(cases, **kwargs):
        shapes.extend(tuple(case()[1].shape) for case in cases)  # (3, b, heads, tokens, head_dim)
        return [{} for _ in cases]

    monkeypatch.setattr(comparison, "time_in_rounds", fake_rounds)
    head_dim = QUICK.d_out // QUICK.tokens_sweep_heads
    assert set(time_causal_attention(QUICK, (16, 32), num_heads=1)) == {16, 32}
    assert shapes == [(3, QUICK.batch, 1, 16, head_dim), (3, QUICK.batch, 1, 32, head_dim)]
    shapes.clear()
    time_causal_attention(QUICK, (16,))  # by default, the length sweep's heads
    assert shapes == [(3, QUICK.batch, QUICK.tokens_sweep_heads, 16, head_dim)]


def test_the_causal_timing_says_what_is_wrong_with_a_head_count():
    for bad, words in ((0, "1 or more"), (-2, "1 or more"), (1.5, "whole number"), (True, "whole")):
        with pytest.raises(ValueError, match=words):
            time_causal_attention(QUICK, (16,), num_heads=bad)


def test_the_score_steps_compute_what_the_split_computes():
    modules, inputs = score_steps(1, 6, 8, 2)
    queries, keys, scores = inputs
    assert torch.equal(modules["scores"](inputs), scores)
    weights = modules["softmax"](inputs)  # (1, 2, 6, 6)
    assert torch.allclose(weights.sum(-1), torch.ones(1, 2, 6), atol=1e-6)
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))


def test_the_method_note_reports_caps_and_short_budgets():
    rows = both_sweeps()
    assert "No measurement needed more than the cap" in method_note(rows, TINY)
    capped = [r.__class__(**{**r.__dict__, "capped": True, "rounds": 1}) for r in rows[:2]]
    note = " ".join(method_note(capped + rows[2:], TINY).split())
    assert "2 of" in note and "ran out after 1 of 2 rounds" in note


def test_the_markdown_table_has_a_row_per_length_and_a_verdict_column():
    rows = both_sweeps()
    text = markdown(rows, TINY, "torch x, cpu", ["--quick", "--markdown"])
    table = [line for line in text.splitlines() if line.startswith("| 16 ")]
    assert len(table) == 1 and table[0].endswith(" |")
    assert "python -m mha.bench --quick --markdown" in text


def test_the_csv_has_one_documented_column_per_field(tmp_path):
    path = write_csv(both_sweeps(), tmp_path / "out" / "bench.csv")
    with path.open() as f:
        header = next(csv.reader(f))
        records = list(csv.reader(f))
    assert tuple(header) == CSV_COLUMNS and len(records) == len(both_sweeps())
    assert {"median_ms", "low_ms", "high_ms", "capped", "sys_ms", "minor_faults"} <= set(header)


def test_the_figures_draw_each_implementation_in_the_books_colour():
    rows = both_sweeps()
    fig = plot_time_vs_heads(rows)
    colours = [line.get_color() for line in fig.axes[0].get_lines()]
    assert colours == [implementation_colour(n) for n in TIMED]
    markers = [line.get_marker() for line in fig.axes[0].get_lines()]
    assert markers == [IMPLEMENTATION_STYLES[n][1] for n in TIMED]
    assert len(plot_benchmark(rows, crossover=30.0).axes) == 3
    for fig in (plot_split_speedup(rows, None), plot_throughput(rows)):
        assert fig.get_figwidth() <= 5.5


def test_quick_run_writes_its_csv_and_png_and_prints_a_summary(monkeypatch, tmp_path, capsys):
    swept = []
    monkeypatch.setattr(
        cli, "run_sweep", lambda sweep, **kwargs: swept.append((sweep, kwargs)) or both_sweeps()
    )
    assert cli.main(["--quick", "--backward", "--device", "cpu", "--out", str(tmp_path)]) == 0
    assert swept[0][0] == QUICK and swept[0][1]["backward"]
    out = capsys.readouterr().out
    assert "wrapper time / split time" in out and "matmul ceiling" in out
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "bench.csv").exists()


def test_the_command_line_runs_from_any_directory_and_its_help_lists_every_option(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mha.bench", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    for option in (
        "--quick",
        "--backward",
        "--device",
        "--threads",
        "--out",
        "--markdown",
        "--targets",
    ):
        assert option in result.stdout


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--threads", "0"], "--threads must be a positive integer"),
        (["--device", "tpu"], "invalid choice"),
    ],
)
def test_bad_command_line_arguments_exit_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_a_gpu_says_so(capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["--device", "cuda"])
    assert "no CUDA device is available" in capsys.readouterr().err


def test_held_in_memory_counts_score_matrices_and_refuses_an_input_without_a_batch_axis():
    split = timed_modules(("split",), 8, 16, 2)["split"]
    x = torch.randn(1, 16, 8)  # (b, num_tokens, d_in)
    held = held_in_memory(split, x)
    assert [name for name, _, _ in held.made] == ["bmm", "masked_fill", "div", "_softmax"]
    assert held.most_alive == 3 and held.peak_bytes >= 3 * 2 * 16 * 16 * 4
    with pytest.raises(ValueError, match="batch"):
        held_in_memory(split, x[0])
