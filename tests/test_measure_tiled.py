"""Chapter 7's measurements and figures: the helpers behind its verdicts, and legible plots."""

import math

import pytest
import torch

from mha import MultiHeadAttention, TiledAttention, measure_tiled
from mha.bench.timing import Timing
from mha.bench.usage import Usage
from mha.measure_tiled import (
    TILED_TARGETS,
    Point,
    faults_per_call,
    names_at,
    score_block_bytes,
    score_memory,
    score_shapes,
    steady_faults,
)
from mha.plots import FIGURE_DPI, MAX_WIDTH_IN, MIN_TEXT_PT
from mha.plots_tiled import plot_block_grid, plot_tiled_lengths
from test_figures import save_as_jupyter_does


def test_the_split_makes_four_score_sized_tensors_and_holds_three_at_once():
    torch.manual_seed(0)
    split = MultiHeadAttention(8, 8, 16, 0.0, num_heads=2).eval()
    memory = score_memory(split, torch.randn(1, 16, 8))
    assert (memory.tensors, memory.peak_tensors) == (4, 3)
    assert memory.total_bytes == 4 * 2 * 16 * 16 * 4 and memory.peak_bytes == 3 * 2 * 16 * 16 * 4


def test_score_shapes_follow_the_block_pairs_with_a_short_last_block():
    tiled = TiledAttention(8, 8, 16, 0.0, num_heads=2, block_size=4)
    assert score_shapes(tiled, 3, 10) == {(3, 2, 4, 4), (3, 2, 2, 4), (3, 2, 2, 2)}
    split = MultiHeadAttention(8, 8, 16, 0.0, num_heads=2)
    assert score_shapes(split, 1, 10) == {(1, 2, 10, 10)}


def test_a_storage_shared_by_views_counts_once_and_a_kept_block_stays_alive():
    class KeepsEveryBlock(TiledAttention):
        """Holds on to each block's scores: all of them stay alive until the forward ends."""

        def query_block(self, q, keys, values, q_start):
            self.kept.append(q @ keys[:, :, : q_start + q.shape[2]].transpose(2, 3))
            return super().query_block(q, keys, values, q_start)

    torch.manual_seed(0)
    x = torch.randn(1, 8, 8)
    plain = score_memory(TiledAttention(8, 8, 8, 0.0, 2, block_size=8).eval(), x)
    assert (plain.tensors, plain.peak_tensors) == (5, 3)  # product, scaled, masked, shifted, exp
    keeping = KeepsEveryBlock(8, 8, 8, 0.0, 2, block_size=8).eval()
    keeping.kept = []
    kept = score_memory(keeping, x)
    assert (kept.tensors, kept.peak_tensors) == (6, 4)


def test_the_targets_are_the_issues_two_claims():
    faster, close = TILED_TARGETS
    assert (faster.references, faster.num_tokens, faster.max_time_ratio) == (("split",), 1024, 0.5)
    assert (close.references, close.num_tokens, close.max_time_ratio) == (("fused",), 1536, 4.0)
    assert all((t.batch, t.d_out, t.num_heads) == (1, 192, 12) for t in TILED_TARGETS)


def test_the_split_is_timed_only_up_to_1024_tokens_and_block_sizes_are_sized_right():
    assert names_at(1024) == ("split", "tiled", "fused") and names_at(1536) == ("tiled", "fused")
    assert score_block_bytes(64) == 192 * 1024 and score_block_bytes(256) == 3 * 2**20


def timing(ms, usage=None):
    return Timing(ms, 0.9 * ms, 1.1 * ms, 3, 3, False, 1, usage)


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
        1536: {
            n: Point(n, 1536, timing(ms), math.nan) for n, ms in [("tiled", 260), ("fused", 90)]
        },
    }


def scripted_faults(monkeypatch, counts):
    """Makes ``measure_tiled``'s per-call reading return ``counts``, one a call; returns the
    list of calls made (the module's page faults would vary with the process's history)."""
    calls, counts = [], list(counts)

    def resource_use(module, x, runs, *, warm_up):
        calls.append((runs, warm_up))
        return Usage(wall_ms=1.0, user_ms=1.0, sys_ms=0.0, minor_faults=counts.pop(0))

    monkeypatch.setattr(measure_tiled, "resource_use", resource_use)
    return calls


@pytest.mark.parametrize(
    "counts, calls, faults",
    [([0, 0, 0, 0], 2, 0), ([900, 5, 5, 5], 3, 5), ([900, 600, 300, 200], 4, 200)],
    ids=["steady at once", "falls, then steady", "still falling at the last call"],
)
def test_steady_faults_stops_at_the_first_call_that_faults_no_less(
    counts, calls, faults, monkeypatch
):
    made = scripted_faults(monkeypatch, counts)
    assert steady_faults(None, None, max_calls=4) == faults
    assert made == [(1, False)] * calls, "each call is measured on its own, unwarmed"


def test_faults_come_from_the_timed_calls_when_the_timing_has_them(monkeypatch):
    made = scripted_faults(monkeypatch, [7, 7])
    usage = Usage(wall_ms=1.0, user_ms=1.0, sys_ms=0.0, minor_faults=49_156.0)
    assert faults_per_call(timing(300, usage), None, None) == 49_156.0 and not made
    assert faults_per_call(timing(3), None, None) == 7 and len(made) == 2


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
