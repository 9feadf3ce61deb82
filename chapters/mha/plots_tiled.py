"""Figures for chapter 7, "Attention without the score matrix".

They follow the rules at the top of ``mha.plots``: phone-legible sizes, greys for what is not a
head, and hatching for what is never computed (as masked cells are hatched in the heatmaps).
The measured figure draws each implementation in its benchmark style (``mha.plots_bench``).
"""

import math

from matplotlib.patches import Patch, Polygon, Rectangle
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from .bench.timing import LABELS
from .plots import DRAWING_WIDTH_IN, MASKED_STYLE, _new_figure, _phone_legible, _wrap
from .plots_bench import _implementation_line, _legend_below

#: A block of scores computed in full, and the computed part of a diagonal block.
COMPUTED_STYLE = {"facecolor": "grey", "edgecolor": "black", "linewidth": 1}
#: The masked part of a diagonal block: computed, then filled with -inf.
DIAGONAL_MASKED_STYLE = {**MASKED_STYLE, "hatch": "..", "edgecolor": "dimgrey"}
#: A block above the diagonal: never computed at all.
SKIPPED_STYLE = {**MASKED_STYLE, "edgecolor": "grey"}


@_phone_legible
def plot_block_grid(num_tokens, block_size):
    """The query blocks × key blocks of a causal pass: computed, diagonal, or skipped.

    Blocks below the diagonal are computed in full; a diagonal block is computed and its part
    above the diagonal masked (dotted); blocks above it are skipped (hatched), never computed.
    """
    blocks = -(-num_tokens // block_size)
    side = min(DRAWING_WIDTH_IN - 1.2, 0.45 * blocks + 1)
    fig = _new_figure(DRAWING_WIDTH_IN, side + 2.4)
    ax = fig.subplots()
    for i in range(blocks):
        for j in range(blocks):
            corner = (j, i)  # column = key block, row = query block
            if j < i:
                ax.add_patch(Rectangle(corner, 1, 1, **COMPUTED_STYLE))
            elif j > i:
                ax.add_patch(Rectangle(corner, 1, 1, **SKIPPED_STYLE))
            else:  # the lower-left half is seen, the upper-right half masked
                ax.add_patch(Polygon([(j, i), (j, i + 1), (j + 1, i + 1)], **COMPUTED_STYLE))
                ax.add_patch(Polygon([(j, i), (j + 1, i), (j + 1, i + 1)], **DIAGONAL_MASKED_STYLE))
                ax.add_patch(Rectangle(corner, 1, 1, facecolor="none", edgecolor="black"))
    ax.set_xlim(0, blocks)
    ax.set_ylim(blocks, 0)
    ax.set_aspect("equal")
    step = max(1, math.ceil(blocks / 8))
    ticks = list(range(0, blocks, step))
    ax.set_xticks([t + 0.5 for t in ticks], [str(t + 1) for t in ticks])
    ax.set_yticks([t + 0.5 for t in ticks], [str(t + 1) for t in ticks])
    ax.tick_params(length=0)
    ax.set_xlabel("key block")
    ax.set_ylabel("query block")
    # The title counts nothing: the chapter asks the reader to count the blocks afterwards.
    ax.set_title(
        _wrap(f"{num_tokens} tokens in blocks of {block_size}: the score blocks of a causal pass")
    )
    handles = [
        Patch(**COMPUTED_STYLE, label="computed"),
        Patch(**DIAGONAL_MASKED_STYLE, label="diagonal: computed, then masked"),
        Patch(**SKIPPED_STYLE, label="above the diagonal: skipped"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=1, frameon=False)
    return fig


@_phone_legible
def plot_tiled_lengths(results):
    """Time (above) and page faults per call (below) against the length, per implementation.

    ``results`` is ``measure_tiled.measure_lengths``'s ``{num_tokens: {name: Point}}``.
    Lengths where an implementation was not timed, or its faults not counted, have no point.
    """
    tokens = sorted(results)
    names = [n for n in LABELS if any(n in results[t] for t in tokens)]
    fig = _new_figure(DRAWING_WIDTH_IN, 7.6)
    time_ax, fault_ax = fig.subplots(2, 1, sharex=True)
    for name in names:
        at = [t for t in tokens if name in results[t]]
        _implementation_line(time_ax, name, at, [results[t][name].timing.median_ms for t in at])
        counted = [t for t in at if not math.isnan(results[t][name].minor_faults)]
        _implementation_line(
            fault_ax, name, counted, [results[t][name].minor_faults for t in counted]
        )
    time_ax.set_yscale("log")
    time_ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    time_ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    time_ax.yaxis.set_minor_formatter(NullFormatter())
    time_ax.set_ylabel("median ms per forward\n(log scale)")
    time_ax.set_title("Time and page faults vs length\n(batch 1, 12 heads, d_out 192)")
    fault_ax.set_yscale("symlog", linthresh=10)
    highest = max(
        (p.minor_faults for at in results.values() for p in at.values()),
        key=lambda f: -1 if math.isnan(f) else f,
    )
    fault_ax.set_ylim(-1, max(100, 3 * highest))
    fault_ax.yaxis.set_minor_formatter(NullFormatter())
    fault_ax.set_ylabel("minor page faults\nper call (0, then log)")
    fault_ax.set_xscale("log", base=2)
    fault_ax.set_xticks(tokens, [str(t) for t in tokens])
    fault_ax.xaxis.set_minor_formatter(NullFormatter())
    fault_ax.set_xlabel("num_tokens (log scale)")
    for ax in (time_ax, fault_ax):
        ax.grid(True, which="major", alpha=0.3)
    _legend_below(fig, time_ax)
    return fig
