"""``python -m mha.bench`` times chapter 7's TiledAttention beside chapter 5's implementations."""

import torch

import mha.bench.__main__ as cli
from mha import TiledAttention
from mha.bench import BENCHED, COLUMNS, LABELS, TIMED, timed_modules
from mha.plots_bench import IMPLEMENTATION_LINESTYLES, IMPLEMENTATION_STYLES


def test_the_command_line_times_the_tiled_module_and_chapter_5_keeps_its_list():
    assert BENCHED == (*TIMED, "tiled") and "tiled" not in TIMED
    assert LABELS["tiled"].startswith("TiledAttention") and COLUMNS["tiled"] == "tiled"
    assert "tiled" in IMPLEMENTATION_STYLES and "tiled" in IMPLEMENTATION_LINESTYLES


def test_the_tiled_module_gets_the_splits_weights_and_computes_the_same_function():
    modules = timed_modules(("split", "tiled", "fused"), d_out=24, num_tokens=70, num_heads=4)
    assert isinstance(modules["tiled"], TiledAttention) and not modules["tiled"].training
    torch.manual_seed(0)
    x = torch.randn(1, 70, 24)  # (b, num_tokens, d_in): a partial second block of 64
    with torch.no_grad():
        split, tiled, fused = (modules[n](x) for n in ("split", "tiled", "fused"))
    torch.testing.assert_close(tiled, split, atol=1e-5, rtol=0)
    torch.testing.assert_close(tiled, fused, atol=1e-5, rtol=0)


def test_the_command_line_asks_the_sweep_for_every_benched_module(monkeypatch, tmp_path):
    asked = {}

    def sweep(sweep, **kwargs):
        asked.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(cli, "run_sweep", sweep)
    try:
        cli.main(["--quick", "--device", "cpu", "--out", str(tmp_path)])
    except SystemExit:
        pass
    assert asked["implementations"] == BENCHED


def test_a_tiny_real_sweep_reports_and_draws_the_tiled_module():
    from mha.bench import Sweep, markdown, run_sweep, summary
    from mha.plots_bench import plot_benchmark

    tiny = Sweep(
        d_out=24,
        batch=1,
        heads=(2,),
        heads_sweep_tokens=16,
        tokens=(16, 70),
        tokens_sweep_heads=4,
        min_run_time=0.001,
        min_blocks=2,
        rounds=1,
        ceiling_size=32,
    )
    rows = run_sweep(tiny, implementations=BENCHED)
    assert {r.implementation for r in rows} == set(BENCHED)
    assert " tiled" in summary(rows)
    assert "`tiled`" in markdown(rows, tiny, "torch x, cpu", ["--quick"])
    labels = [t.get_text() for t in plot_benchmark(rows, None).legends[0].get_texts()]
    assert LABELS["tiled"] in labels
