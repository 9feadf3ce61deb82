"""The benchmark's arithmetic, files and command line (no timing is asserted: timings are not tests)."""

import csv
import subprocess
import sys

import pytest
import torch
from torch.utils.benchmark import Measurement

import mha.bench as bench
from conftest import CHAPTERS
from mha.bench import (
    CSV_COLUMNS,
    HEAD_COUNTS,
    TARGETS,
    Row,
    ScorePipeline,
    Sweep,
    flop_breakdown,
    forward_flops,
    overhead_crossover,
    ratios,
    read_csv,
    report_targets,
    target_passed,
    time_in_rounds,
    write_csv,
)
from mha.counting import matmul_sizes
from mha.plots import IMPLEMENTATION_STYLES, OKABE_ITO, plot_benchmark
from mha.variants import IMPLEMENTATIONS, equivalent_modules

TINY = Sweep(d_out=8, batch=2, heads=(1, 2), heads_sweep_tokens=4, tokens=(2, 4, 8), tokens_sweep_heads=2,
             min_run_time=0.001, min_blocks=3, rounds=1, ceiling_size=32)


@pytest.fixture(scope="module")
def tiny_rows():
    return bench.run_sweep(TINY)


@pytest.mark.parametrize("name", ["wrapper", "split", "combined_qkv"])
@pytest.mark.parametrize("batch, num_tokens, d_model, num_heads", [(2, 6, 8, 2), (1, 5, 12, 3), (3, 4, 16, 1)])
def test_flop_formula_matches_the_multiply_adds_the_dispatcher_sees(name, batch, num_tokens, d_model, num_heads):
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


def test_the_csv_has_one_documented_column_per_field_and_reads_back(tiny_rows, tmp_path):
    path = write_csv(tiny_rows, tmp_path / "out" / "bench.csv")
    with path.open() as f:
        header = next(csv.reader(f))
    assert tuple(header) == CSV_COLUMNS
    assert CSV_COLUMNS[:4] == ("sweep", "implementation", "device", "threads")
    assert {"median_ms", "flops", "gflops", "ceiling_gflops", "aten_ops", "matmul_ops"} <= set(CSV_COLUMNS)
    assert read_csv(path) == tiny_rows


def test_the_sweep_times_every_implementation_at_every_configuration(tiny_rows):
    expected = [(s, t, h, name) for s, t, h in TINY.configurations() for name in IMPLEMENTATIONS]
    assert [(r.sweep, r.num_tokens, r.num_heads, r.implementation) for r in tiny_rows] == expected
    assert all(r.median_ms > 0 and r.runs >= r.blocks >= TINY.min_blocks and r.ceiling_gflops > 0 for r in tiny_rows)


def test_each_row_counts_the_flops_the_dispatcher_sees(tiny_rows):
    """Counted independently of the formula: 2 × the multiply-adds of every matmul the module calls.

    The fused kernel and nn.MultiheadAttention's fast path hide their products from the counter;
    they compute the same products as the split, so their rows carry the split's count.
    """
    for r in tiny_rows:
        counted_as = r.implementation if r.implementation in ("wrapper", "split", "combined_qkv") else "split"
        module = equivalent_modules([counted_as], r.d_in, r.d_out, r.num_tokens, r.num_heads)[counted_as]
        assert r.flops == 2 * sum(matmul_sizes(module, torch.randn(r.batch, r.num_tokens, r.d_in))), r


def test_the_wrapper_makes_more_operator_calls_the_more_heads_it_has(tiny_rows):
    def calls(name):
        return [(r.aten_ops, r.matmul_ops) for r in tiny_rows if r.sweep == "heads" and r.implementation == name]

    (wrapper_ops_1, wrapper_matmuls_1), (wrapper_ops_2, wrapper_matmuls_2) = calls("wrapper")
    assert (wrapper_matmuls_1, wrapper_matmuls_2) == (5, 10)
    assert wrapper_ops_2 == 2 * wrapper_ops_1 - 1  # twice the heads' calls, one torch.cat
    split = calls("split")
    assert [matmuls for _, matmuls in split] == [6, 6]
    # The split's second head adds a few reshapes and copies, not another head's worth of calls.
    assert split[1][0] - split[0][0] <= 4 < wrapper_ops_2 - wrapper_ops_1


class FakeTimer:
    """Stands in for ``Timer``: each ``blocked_autorange`` returns the next scripted list of block times."""

    def __init__(self, label, script, log):
        self.label, self.script, self.log = label, script, log

    def blocked_autorange(self, min_run_time):
        self.log.append((self.label, min_run_time))
        return Measurement(number_per_run=1, raw_times=self.script[self.label].pop(0), task_spec=None)


def fake_cases(names):
    return [lambda: ({name: None for name in names}, None)]


def test_each_module_keeps_the_median_of_its_quietest_round(monkeypatch):
    script = {"a": [[3.0] * 3, [1.0, 1.0, 9.0], [2.0] * 3], "b": [[5.0] * 3, [6.0] * 3, [4.0] * 3]}
    log = []
    monkeypatch.setattr(bench, "_timer", lambda stmt, label, **values: FakeTimer(label, script, log))
    (kept,) = time_in_rounds(fake_cases(["a", "b"]), min_run_time=0.1, min_blocks=3, rounds=3)
    assert kept["a"].median == 1.0 and kept["b"].median == 4.0


def test_the_modules_take_turns_at_being_timed_first(monkeypatch):
    script = {name: [[1.0] * 3 for _ in range(3)] for name in "abc"}
    log = []
    monkeypatch.setattr(bench, "_timer", lambda stmt, label, **values: FakeTimer(label, script, log))
    time_in_rounds(fake_cases(["a", "b", "c"]), min_run_time=0.1, min_blocks=3, rounds=3)
    assert "".join(label for label, _ in log) == "abc" "bca" "cab"


def test_a_measurement_with_too_few_blocks_is_retaken_with_time_for_enough(monkeypatch):
    script = {"slow": [[0.3], [0.3, 0.2, 0.3, 0.3]]}
    log = []
    monkeypatch.setattr(bench, "_timer", lambda stmt, label, **values: FakeTimer(label, script, log))
    (kept,) = time_in_rounds(fake_cases(["slow"]), min_run_time=0.1, min_blocks=4, rounds=1)
    assert log == [("slow", 0.1), ("slow", pytest.approx(4 * 0.3))]
    assert len(kept["slow"].raw_times) == 4


def test_the_score_pipeline_gives_the_same_weights_all_heads_at_once_or_one_at_a_time():
    torch.manual_seed(0)
    scores = torch.randn(2, 3, 5, 5)  # (b, num_heads, num_tokens, num_tokens)
    together = ScorePipeline(5, head_dim=4, per_head=False)(scores)
    one_at_a_time = ScorePipeline(5, head_dim=4, per_head=True)(scores)
    torch.testing.assert_close(torch.stack(one_at_a_time, dim=1), together)
    assert torch.all(together.triu(diagonal=1) == 0)  # no weight on a later token


def synthetic(times, tokens=(16, 32, 64, 128, 256)):
    base = dict(sweep="tokens", device="cpu", threads=2, batch=1, d_in=8, d_out=8, num_heads=2, iqr_ms=0.0,
                blocks=1, runs=1, flops=1, gflops=1.0, ceiling_gflops=10.0, aten_ops=1, matmul_ops=1)
    return [Row(implementation=name, num_tokens=t, median_ms=ms, **base)
            for name, series in times.items() for t, ms in zip(tokens, series)]


def test_the_crossover_is_where_the_wrapper_takes_twice_its_overhead():
    rows = synthetic({"wrapper": [1.0, 1.1, 1.5, 3.0, 6.0]})
    crossover = overhead_crossover(rows)
    assert 64 < crossover < 128
    assert overhead_crossover(synthetic({"wrapper": [1.0, 2.0, 4.0, 8.0, 16.0]})) == pytest.approx(32)


def test_no_crossover_is_reported_when_the_time_never_doubles():
    assert overhead_crossover(synthetic({"wrapper": [1.0, 1.1, 1.2, 1.5, 1.9]})) is None


def test_ratios_divide_the_numerators_time_by_the_denominators():
    rows = synthetic({"wrapper": [4.0, 4.0, 6.0, 9.0, 20.0], "split": [1.0, 2.0, 3.0, 9.0, 40.0]})
    assert ratios(rows, "wrapper", "split") == {16: 4.0, 32: 2.0, 64: 2.0, 128: 1.0, 256: 0.5}


def test_targets_pass_or_fail_on_the_measured_ratio():
    first, second = TARGETS
    assert target_passed(first, {"split": 1.0, "wrapper": 3.0})
    assert not target_passed(first, {"split": 1.0, "wrapper": 2.4})
    assert target_passed(second, {"fused": 1.04, "torch_mha": 1.0})
    assert not target_passed(second, {"fused": 1.06, "torch_mha": 1.0})
    report = report_targets([(first, {"split": 1.0, "wrapper": 2.0}), (second, {"fused": 1.0, "torch_mha": 2.0})])
    assert report.splitlines()[0].startswith("FAIL") and report.splitlines()[2].startswith("PASS")


def test_every_implementation_has_its_own_okabe_ito_colour():
    colours = [colour for colour, _ in IMPLEMENTATION_STYLES.values()]
    assert set(IMPLEMENTATION_STYLES) == set(IMPLEMENTATIONS)
    assert len(set(colours)) == len(colours) and set(colours) <= set(OKABE_ITO)


def test_the_benchmark_figure_draws_each_implementation_in_its_colour(tiny_rows):
    fig = plot_benchmark(tiny_rows, crossover=3.0)
    time_ax = fig.axes[0]
    assert [line.get_color() for line in time_ax.get_lines()] == [c for c, _ in IMPLEMENTATION_STYLES.values()]
    assert len(fig.axes) == 3


def test_quick_run_writes_its_csv_and_png_and_prints_a_summary(tiny_rows, monkeypatch, tmp_path, capsys):
    swept = []
    monkeypatch.setattr(bench, "run_sweep", lambda sweep, **kwargs: swept.append(sweep) or tiny_rows)
    assert bench.main(["--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    assert swept == [bench.QUICK]
    out = capsys.readouterr().out
    assert "speedup of the split over the wrapper" in out and "matmul ceiling" in out
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert len(read_csv(tmp_path / "bench.csv")) == len(TINY.configurations()) * len(IMPLEMENTATIONS)


def test_the_command_line_help_lists_every_option():
    result = subprocess.run([sys.executable, "-m", "mha.bench", "--help"], cwd=CHAPTERS,
                            capture_output=True, text=True, check=True)
    for option in ("--quick", "--device", "--threads", "--out", "--targets"):
        assert option in result.stdout


@pytest.mark.parametrize("argv, message", [
    (["--threads", "0"], "--threads must be a positive integer"),
    (["--device", "tpu"], "invalid choice"),
])
def test_bad_command_line_arguments_exit_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_a_gpu_says_so(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--device", "cuda"])
    assert "no CUDA device is available" in capsys.readouterr().err
