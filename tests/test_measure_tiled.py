"""Chapter 7's measurements and figures: the helpers behind its verdicts, and legible plots."""

import json
import math

import pytest
import torch

from mha import MultiHeadAttention
from mha.bench.timing import Timing
from mha.measure_tiled import (
    BLOCK_SETTINGS,
    TILED_TARGETS,
    Point,
    block_fault_story,
    fault_verdict,
    main,
    names_at,
    new_tensors_of_shape,
    score_block_bytes,
)
from mha.plots import FIGURE_DPI, MAX_WIDTH_IN, MIN_TEXT_PT
from mha.plots_tiled import plot_block_grid, plot_tiled_lengths
from test_figures import save_as_jupyter_does


def test_the_split_makes_four_score_sized_tensors_per_forward():
    torch.manual_seed(0)
    split = MultiHeadAttention(8, 8, 16, 0.0, num_heads=2).eval()
    assert new_tensors_of_shape(split, torch.randn(1, 16, 8), (1, 2, 16, 16)) == 4


def test_the_targets_are_the_issues_two_claims():
    faster, close = TILED_TARGETS
    assert (faster.references, faster.num_tokens, faster.max_time_ratio) == (("split",), 1024, 0.5)
    assert (close.references, close.num_tokens, close.max_time_ratio) == (("fused",), 4096, 4.0)
    assert all((t.batch, t.d_out, t.num_heads) == (1, 192, 12) for t in TILED_TARGETS)


@pytest.mark.parametrize(
    "tiled, split, verdict",
    [(0, 49_156, "met"), (491, 49_156, "met"), (492, 49_156, "missed"), (0, 0, "untested")],
)
def test_the_fault_verdict_allows_one_percent_and_says_when_it_tests_nothing(tiled, split, verdict):
    assert fault_verdict(tiled, split).startswith(verdict)


def test_the_split_is_timed_only_up_to_1024_tokens_and_block_sizes_are_sized_right():
    assert names_at(1024) == ("split", "tiled", "fused") and names_at(4096) == ("tiled", "fused")
    assert score_block_bytes(64) == 192 * 1024 and score_block_bytes(256) == 3 * 2**20


def test_each_process_of_the_block_experiment_prints_faults_per_block_size(capsys):
    assert main(["--tokens", "32", "--blocks", "8", "16"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert set(found) == {"8", "16"} and all(f >= 0 for f in found.values())


def test_the_block_experiment_runs_each_setting_alone_and_both():
    assert list(BLOCK_SETTINGS) == ["default", "no mmap", "no trim", "both"]
    assert BLOCK_SETTINGS["no mmap"].keys() | BLOCK_SETTINGS["no trim"].keys() == set(
        BLOCK_SETTINGS["both"]
    )
    assert not BLOCK_SETTINGS["no mmap"].keys() & BLOCK_SETTINGS["no trim"].keys()


def runs(default, no_mmap, no_trim, both):
    """Faults of blocks of 256 (and none of 64 by default) under the four settings."""
    counts = {"default": default, "no mmap": no_mmap, "no trim": no_trim, "both": both}
    return {setting: {64: 0.0, 256: float(n)} for setting, n in counts.items()}


@pytest.mark.parametrize(
    "results, says, never",
    [
        (runs(10_000, 0, 9_000, 0), "fresh mmaps cause them", "returned"),
        (runs(10_000, 9_000, 0, 0), "memory returned to the kernel causes them", "mmaps cause"),
        (runs(10_000, 0, 0, 0), "cannot tell mmap from returned memory", "cause them"),
        (runs(10_000, 5_000, 30_000, 0), "only both settings together", "cause them"),
        (runs(10_000, 9_000, 9_000, 8_000), "explains only part of them, or none", "cause them"),
    ],
)
def test_the_block_story_names_a_cause_only_where_the_runs_separate_it(results, says, never):
    story = block_fault_story(results, {256})
    assert says in story and never not in story


def test_the_block_story_notes_blocks_that_fault_only_under_one_setting():
    results = runs(10_000, 5_000, 30_000, 0)
    results["no trim"][64] = 17_000.0
    story = block_fault_story(results, {256})
    assert "Blocks of 64 fault under one setting alone (17,000 under 'no trim'" in story
    assert "nothing" in block_fault_story(runs(0, 0, 0, 0), set())


def timing(ms):
    return Timing(ms, 0.9 * ms, 1.1 * ms, 3, 3, False, 1)


def fake_results():
    return {
        256: {
            n: Point(n, 256, timing(ms), 0.0)
            for n, ms in [("split", 13), ("tiled", 10), ("fused", 5)]
        },
        1024: {
            "split": Point("split", 1024, timing(300), 49_156.0),
            "tiled": Point("tiled", 1024, timing(60), 0.0),
            "fused": Point("fused", 1024, timing(28), 0.0),
        },
        4096: {
            n: Point(n, 4096, timing(ms), math.nan) for n, ms in [("tiled", 1800), ("fused", 400)]
        },
    }


@pytest.mark.parametrize(
    "draw",
    [
        lambda: plot_block_grid(1024, 128),
        lambda: plot_block_grid(10, 4),
        lambda: plot_tiled_lengths(fake_results()),
    ],
    ids=["grid of 8", "grid of 3", "lengths"],
)
def test_the_figures_fit_a_phone_and_write_no_small_text(draw, monkeypatch):
    saved = save_as_jupyter_does(draw(), monkeypatch)
    assert saved.width_px <= MAX_WIDTH_IN * FIGURE_DPI
    assert all(t.points >= MIN_TEXT_PT for t in saved.texts)


def test_the_grid_counts_nothing_in_its_title_before_the_prediction_and_draws_each_kind():
    fig = plot_block_grid(1024, 128)
    title = fig.axes[0].get_title().replace("\n", " ")
    assert "1024 tokens in blocks of 128" in title
    assert not any(str(n) in title for n in (36, 64)), "the reader counts the blocks later"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["computed", "diagonal: computed, then masked", "above the diagonal: skipped"]
    hatched = [p for p in fig.axes[0].patches if p.get_hatch() == "///"]
    assert len(hatched) == 8 * 7 // 2


def test_the_lengths_figure_leaves_out_what_was_not_measured():
    time_ax, fault_ax = plot_tiled_lengths(fake_results()).axes
    points = {line.get_label(): len(line.get_xdata()) for line in time_ax.get_lines()}
    assert points == {
        "MultiHeadAttention (split)": 2,
        "FusedMultiHeadAttention": 3,
        "TiledAttention (blocks of 64)": 3,
    }
    assert all(len(line.get_xdata()) == 2 for line in fault_ax.get_lines())
