"""Figures for the book. Each function takes real tensors and returns a matplotlib Figure.

Colours are fixed for the whole book: head ``h`` (counted from 0) is always ``head_colour(h)``,
taken from the Okabe–Ito colour-blind-safe palette; heatmaps use ``cividis``.
Figures are built with ``matplotlib.figure.Figure`` rather than pyplot, so a cell shows a figure
exactly once: when the cell returns it.
"""

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from .data import TOKENS

#: Okabe–Ito, ordered so that the first heads get the most distinct colours (yellow comes late).
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#F0E442", "#000000")
HEATMAP_CMAP = "cividis"


def head_colour(h):
    """The colour of head ``h`` (0-based) everywhere in the book."""
    return OKABE_ITO[h % len(OKABE_ITO)]


def outline_head_blocks(ax, num_heads, block_width, num_rows, *, label=True, linewidth=3):
    """Draw one coloured rectangle per head around its columns of a heatmap drawn with ``imshow``."""
    for h in range(num_heads):
        left = h * block_width - 0.5
        ax.add_patch(
            Rectangle((left, -0.5), block_width, num_rows, fill=False, edgecolor=head_colour(h),
                      linewidth=linewidth, clip_on=False)
        )
        if label:
            ax.text(left + block_width / 2, -0.75, f"head {h + 1}", ha="center", va="bottom",
                    color=head_colour(h), fontweight="bold")


def plot_concatenated_output(context, num_heads, tokens=TOKENS):
    """Heatmap of one sequence's context vectors ``(num_tokens, num_heads * d_out)``, head blocks outlined."""
    context = context.detach().cpu()
    num_tokens, width = context.shape
    block_width = width // num_heads
    fig = Figure(figsize=(1.1 * width + 2.5, 0.55 * num_tokens + 1.6), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(context.numpy(), cmap=HEATMAP_CMAP, aspect="auto")
    for (row, col), value in _cells(context):
        ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=9,
                color="white" if value < context.mean() else "black")
    outline_head_blocks(ax, num_heads, block_width, num_tokens)
    ax.set_yticks(range(num_tokens), tokens[:num_tokens])
    ax.set_xticks(range(width), [f"{c % block_width + 1}" for c in range(width)])
    ax.set_xlabel("output column (numbered within its head)")
    ax.set_title("torch.cat puts each head's context vectors side by side", pad=28)
    fig.colorbar(image, ax=ax, shrink=0.8, label="value")
    return fig


def _cells(matrix):
    """Every ``((row, col), value)`` of a 2-D tensor, for writing values into heatmap cells."""
    rows, cols = matrix.shape
    return (((r, c), float(matrix[r, c])) for r in range(rows) for c in range(cols))


# ---------------------------------------------------------------------------------------------
# Chapter 2 figures
# ---------------------------------------------------------------------------------------------

# (chapter 2 adds its figures here)


# ---------------------------------------------------------------------------------------------
# Chapter 3 figures
# ---------------------------------------------------------------------------------------------

# (chapter 3 adds its figures here)


# ---------------------------------------------------------------------------------------------
# Chapter 4 figures
# ---------------------------------------------------------------------------------------------

#: One colour (Okabe–Ito) and one marker per implementation, the same in every figure of the book.
IMPLEMENTATION_STYLES = {
    "wrapper": ("#D55E00", "o"),
    "split": ("#0072B2", "s"),
    "combined_qkv": ("#009E73", "^"),
    "fused": ("#CC79A7", "D"),
    "torch_mha": ("#000000", "x"),
}
IMPLEMENTATION_LABELS = {
    "wrapper": "MultiHeadAttentionWrapper",
    "split": "MultiHeadAttention (split)",
    "combined_qkv": "MultiHeadAttentionCombinedQKV",
    "fused": "FusedMultiHeadAttention",
    "torch_mha": "nn.MultiheadAttention",
}


def implementation_colour(name):
    """The colour of implementation ``name`` (a key of ``mha.variants.IMPLEMENTATIONS``) everywhere in the book."""
    return IMPLEMENTATION_STYLES[name][0]


def _implementation_line(ax, name, xs, ys):
    colour, marker = IMPLEMENTATION_STYLES[name]
    ax.plot(xs, ys, color=colour, marker=marker, label=IMPLEMENTATION_LABELS[name], linewidth=2)


def _rows(rows, sweep, name):
    return [r for r in rows if r.sweep == sweep and r.implementation == name]


def _names(rows):
    return [name for name in IMPLEMENTATION_STYLES if any(r.implementation == name for r in rows)]


def _draw_time_vs_heads(ax, rows):
    for name in _names(rows):
        found = _rows(rows, "heads", name)
        _implementation_line(ax, name, [r.num_heads for r in found], [r.median_ms for r in found])
    first = _rows(rows, "heads", "wrapper")[0]
    heads = [r.num_heads for r in _rows(rows, "heads", "wrapper")]
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(heads)
    ax.set_xlabel("num_heads")
    ax.set_ylabel("median time per forward (ms, log scale)")
    ax.set_title(f"Time vs head count\n({first.batch} × {first.num_tokens} tokens, d_out {first.d_out})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def _draw_split_speedup(ax, rows, crossover):
    wrapper = {r.num_tokens: r.median_ms for r in _rows(rows, "tokens", "wrapper")}
    split = _rows(rows, "tokens", "split")
    tokens = [r.num_tokens for r in split]
    _implementation_line(ax, "split", tokens, [wrapper[r.num_tokens] / r.median_ms for r in split])
    ax.axhline(1.0, color="grey", linewidth=1, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_xticks(tokens, [str(t) for t in tokens])
    ax.set_ylim(bottom=0)
    if crossover is not None:
        top = ax.get_ylim()[1]
        ax.axvline(crossover, color="grey", linestyle="--", linewidth=1.5)
        ax.axvspan(tokens[0], crossover, color="#E69F00", alpha=0.12, linewidth=0)
        ax.text(crossover, top * 0.98, "wrapper overhead-bound  ", ha="right", va="top", fontsize=9)
        ax.text(crossover, top * 0.98, "  wrapper compute-bound", ha="left", va="top", fontsize=9)
        ax.text(crossover, top * 0.91, f"  crossover ≈ {crossover:.0f} tokens", ha="left", va="top",
                fontsize=9, color="dimgrey")
    else:
        ax.text(0.5, 0.97, "no crossover in the measured range", transform=ax.transAxes,
                ha="center", va="top", fontsize=8)
    first = split[0]
    ax.set_xlabel("num_tokens (log scale)")
    ax.set_ylabel("wrapper time / split time (×)")
    ax.set_title(f"Speedup of the split over the wrapper\n({first.num_heads} heads, d_out {first.d_out})")
    ax.grid(True, alpha=0.3)


def _draw_throughput(ax, rows):
    for name in _names(rows):
        found = _rows(rows, "tokens", name)
        _implementation_line(ax, name, [r.num_tokens for r in found], [r.gflops for r in found])
    ceiling = rows[0].ceiling_gflops
    ax.axhline(ceiling, color="grey", linestyle="--", linewidth=1.5)
    ax.text(0.98, ceiling, f"matmul ceiling (large torch.mm): {ceiling:.0f} GFLOP/s",
            transform=ax.get_yaxis_transform(), ha="right", va="bottom", fontsize=9)
    tokens = [r.num_tokens for r in _rows(rows, "tokens", "wrapper")]
    ax.set_xscale("log", base=2)
    ax.set_xticks(tokens, [str(t) for t in tokens])
    ax.set_ylim(0, ceiling * 1.15)
    ax.set_xlabel("num_tokens (log scale)")
    ax.set_ylabel("achieved GFLOP/s (matmul FLOPs / median time)")
    ax.set_title("Achieved throughput vs the matmul ceiling")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, 0.86))


def plot_time_vs_heads(rows):
    """Median forward time of each implementation against the head count (``rows`` from ``mha.bench``)."""
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    _draw_time_vs_heads(fig.subplots(), rows)
    return fig


def plot_split_speedup(rows, crossover):
    """Wrapper time / split time against sequence length, the wrapper's overhead → compute crossover marked."""
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    _draw_split_speedup(fig.subplots(), rows, crossover)
    return fig


def plot_throughput(rows):
    """Achieved GFLOP/s of each implementation against sequence length, under the measured matmul ceiling."""
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    _draw_throughput(fig.subplots(), rows)
    return fig


def plot_benchmark(rows, crossover):
    """The three benchmark plots side by side: what ``python -m mha.bench`` saves as a PNG."""
    fig = Figure(figsize=(19, 5.5), layout="constrained")
    time_ax, speedup_ax, throughput_ax = fig.subplots(1, 3)
    _draw_time_vs_heads(time_ax, rows)
    _draw_split_speedup(speedup_ax, rows, crossover)
    _draw_throughput(throughput_ax, rows)
    return fig
