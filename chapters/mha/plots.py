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
        inset = 0.06  # keeps neighbouring outlines from drawing over each other
        ax.add_patch(
            Rectangle((left + inset, -0.5 + inset), block_width - 2 * inset, num_rows - 2 * inset,
                      fill=False, edgecolor=head_colour(h), linewidth=linewidth, clip_on=False)
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

def plot_two_dim_context(context, tokens=TOKENS):
    """Scatter one sequence's 2-D context vectors: head 1's value across, head 2's value up.

    With ``num_heads=2`` and ``d_out=1`` each head owns one coordinate of every context vector,
    so each token becomes a point in a plane whose axes belong to the two heads.
    """
    context = context.detach().cpu()
    if context.dim() != 2 or context.shape[1] != 2:
        raise ValueError(
            "plot_two_dim_context expects one sequence's context vectors, shape (num_tokens, 2), "
            f"got {tuple(context.shape)}. Pass e.g. mha(batch)[0] from a wrapper with num_heads=2 and d_out=1."
        )
    fig = Figure(figsize=(6, 4.8), layout="constrained")
    ax = fig.subplots()
    ax.scatter(context[:, 0].numpy(), context[:, 1].numpy(), s=60, color="black", zorder=3)
    for token, (x, y) in zip(tokens, context.tolist()):
        ax.annotate(token, (x, y), xytext=(7, 5), textcoords="offset points", fontsize=11)
    head_axes = ((ax.xaxis, "bottom", ax.set_xlabel), (ax.yaxis, "left", ax.set_ylabel))
    for h, (axis, spine, set_label) in enumerate(head_axes):
        set_label(f"head {h + 1}'s output (its one value per token)", color=head_colour(h), fontweight="bold")
        ax.spines[spine].set(color=head_colour(h), linewidth=3)
        axis.set_tick_params(color=head_colour(h), width=2)
    ax.spines[["top", "right"]].set_visible(False)
    ax.margins(0.2)
    ax.set_title("Each head owns one coordinate of every context vector")
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 3 figures
# ---------------------------------------------------------------------------------------------

# Imports only this section needs sit here, so that each chapter edits only its own section.
import torch  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.patches import ConnectionPatch  # noqa: E402


def plot_combined_weight(weight, num_heads, name="W_query"):
    """Heatmap of one combined projection as ``x @ W`` uses it, ``(d_in, d_out)``: one outlined column block per head.

    Pass ``module.W_query.weight.T``: ``nn.Linear`` stores its weight as ``(d_out, d_in)``.
    """
    weight = weight.detach().cpu()
    d_in, d_out = weight.shape
    head_dim = d_out // num_heads
    fig = Figure(figsize=(1.0 * d_out + 2.8, 0.8 * d_in + 2.0), layout="constrained")
    ax = fig.subplots()
    image = _annotated_heatmap(ax, weight)
    outline_head_blocks(ax, num_heads, head_dim, d_in)
    ax.set_yticks(range(d_in), [f"input {i + 1}" for i in range(d_in)])
    ax.set_xticks(range(d_out), [f"{c % head_dim + 1}" for c in range(d_out)])
    ax.set_xlabel(f"output column (numbered within its head; head_dim = {head_dim})")
    ax.set_title(f"One {name} for all {num_heads} heads: shape (d_in, d_out) = {tuple(weight.shape)}", pad=46)
    fig.colorbar(image, ax=ax, shrink=0.8, label="weight")
    return fig


def plot_heads_in_combined_weight(head_weights, combined, name="W_query"):
    """Each wrapper head's small ``(d_in, head_dim)`` matrix, above the column block it becomes in ``combined``.

    ``head_weights[h]`` and ``combined`` are drawn as ``x @ W`` uses them (``.weight.T``), on one colour scale.
    """
    head_weights = [w.detach().cpu() for w in head_weights]
    combined = combined.detach().cpu()
    num_heads = len(head_weights)
    d_in, head_dim = head_weights[0].shape
    vmin, vmax = float(combined.min()), float(combined.max())
    fig = Figure(figsize=(1.0 * num_heads * head_dim + 3.5, 2.0 * d_in + 2.6), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=(1, 1.15), hspace=0.12)
    small_axes = top.subplots(1, num_heads, squeeze=False)[0]
    for h, (ax, w) in enumerate(zip(small_axes, head_weights)):
        _annotated_heatmap(ax, w, vmin=vmin, vmax=vmax)
        _frame(ax, head_colour(h))
        ax.set_title(f"wrapper head {h + 1}: its own {name}\n{tuple(w.shape)}", color=head_colour(h),
                     fontweight="bold", fontsize=10)
        ax.set_xticks(range(head_dim), [str(c + 1) for c in range(head_dim)])
        ax.set_yticks(range(d_in), [f"input {i + 1}" for i in range(d_in)] if h == 0 else [])
    ax = bottom.subplots()
    image = _annotated_heatmap(ax, combined, vmin=vmin, vmax=vmax)
    outline_head_blocks(ax, num_heads, head_dim, d_in, label=False)
    ax.set_yticks(range(d_in), [f"input {i + 1}" for i in range(d_in)])
    ax.set_xticks(range(num_heads * head_dim), [str(c + 1) for c in range(num_heads * head_dim)])
    ax.set_xlabel(f"column of the weight-split module's one {name}, shape {tuple(combined.shape)}")
    bottom.colorbar(image, ax=ax, shrink=0.8, label="weight")
    for h, small in enumerate(small_axes):
        fig.add_artist(ConnectionPatch(
            xyA=((head_dim - 1) / 2, d_in - 0.5), coordsA=small.transData,
            xyB=(h * head_dim + (head_dim - 1) / 2, -0.5), coordsB=ax.transData,
            arrowstyle="-|>", color=head_colour(h), linewidth=2.5, mutation_scale=18,
        ))
    fig.suptitle(f"Each wrapper head's {name} becomes one block of {head_dim} columns of the combined {name}",
                 fontsize=12)
    return fig


def plot_split_heads(queries, num_heads, tokens=TOKENS):
    """A ``(num_tokens, d_out)`` query matrix regrouped as ``view`` + ``transpose`` regroup it: ``(num_heads, num_tokens, head_dim)``.

    Each cell keeps the colour of the head whose columns it came from and names its token.
    """
    num_tokens, d_out = queries.shape

    def regroup(t):
        return t.reshape(num_tokens, num_heads, d_out // num_heads).transpose(0, 1)

    return _plot_regrouping(queries, num_heads, regroup, tokens,
                            "view(num_tokens, num_heads, head_dim), then transpose(0, 1)",
                            "one sequence, so the batch axis is dropped: the code's transpose(1, 2) "
                            "becomes transpose(0, 1)")


def plot_split_heads_without_transpose(queries, num_heads, tokens=TOKENS):
    """The same query matrix viewed straight to ``(num_heads, num_tokens, head_dim)``: tokens and heads scrambled."""
    num_tokens, d_out = queries.shape

    def regroup(t):
        return t.reshape(num_heads, num_tokens, d_out // num_heads)

    return _plot_regrouping(queries, num_heads, regroup, tokens,
                            "view(num_heads, num_tokens, head_dim), no transpose",
                            "one sequence, so the batch axis is dropped: the code's "
                            "view(b, num_heads, num_tokens, head_dim) loses its b")


def plot_attention_per_head(attn_weights, tokens=TOKENS):
    """One heatmap of attention weights ``(num_tokens, num_tokens)`` per head, framed in the head's colour."""
    attn_weights = attn_weights.detach().cpu()
    num_heads, num_tokens, _ = attn_weights.shape
    fig = Figure(figsize=(3.4 * num_heads + 1.2, 4.8), layout="constrained")
    axes = fig.subplots(1, num_heads, squeeze=False)[0]
    for h, ax in enumerate(axes):
        image = ax.imshow(attn_weights[h].numpy(), cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0)
        for (row, col), value in _cells(attn_weights[h]):
            if col <= row:  # the future is masked: its weights are exactly zero
                ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if value < 0.5 else "black")
        _frame(ax, head_colour(h))
        ax.set_title(f"head {h + 1}", color=head_colour(h), fontweight="bold")
        ax.set_xticks(range(num_tokens), tokens[:num_tokens], rotation=60, ha="right")
        ax.set_yticks(range(num_tokens), tokens[:num_tokens] if h == 0 else [])
        ax.set_xlabel("key (attended to)")
    axes[0].set_ylabel("query (attending)")
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="attention weight")
    fig.suptitle("Attention weights of each head, all computed in one batched matrix multiplication")
    return fig


def _annotated_heatmap(ax, matrix, **limits):
    """``imshow`` a 2-D tensor in the heatmap colours with each value written in its cell."""
    image = ax.imshow(matrix.numpy(), cmap=HEATMAP_CMAP, aspect="auto", **limits)
    low, high = image.get_clim()
    for (row, col), value in _cells(matrix):
        ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=9,
                color="white" if value < (low + high) / 2 else "black")
    return image


def _frame(ax, colour):
    for spine in ax.spines.values():
        spine.set_edgecolor(colour)
        spine.set_linewidth(3)


def _tint(colour, amount=0.45):
    """``colour`` mixed with white: light enough to write black text on."""
    return tuple(1 - amount * (1 - c) for c in to_rgb(colour))


def _plot_regrouping(queries, num_heads, regroup, tokens, how, batch_note):
    """Draw ``queries`` and ``regroup(queries)``, colouring every number by the head and token it came from.

    ``how`` names the regrouping as done on one sequence; ``batch_note`` says how it maps to the
    batched code, which has a batch axis in front.

    The same ``regroup`` is applied to two index matrices (which token, which head block each number
    came from), so every cell on the right shows where its number really started.
    """
    queries = queries.detach().cpu()
    num_tokens, d_out = queries.shape
    head_dim = d_out // num_heads
    token_of = torch.arange(num_tokens).repeat_interleave(d_out).view(num_tokens, d_out)
    head_of = (torch.arange(d_out) // head_dim).repeat(num_tokens, 1)
    values, token_of, head_of = regroup(queries), regroup(token_of), regroup(head_of)  # (num_heads, num_tokens, head_dim)

    fig = Figure(figsize=(0.85 * (d_out + num_heads * head_dim) + 2.4, 0.62 * num_tokens + 2.6),
                 layout="constrained")
    axes = fig.subplots(1, num_heads + 1, width_ratios=(d_out, *[head_dim] * num_heads))
    rows = torch.arange(num_tokens).unsqueeze(1).expand(num_tokens, d_out)
    columns = (torch.arange(d_out) // head_dim).expand(num_tokens, d_out)
    _tinted_cells(axes[0], queries, rows, columns, tokens, show_token=False)
    outline_head_blocks(axes[0], num_heads, head_dim, num_tokens, label=False, linewidth=2)
    axes[0].set_yticks(range(num_tokens), tokens[:num_tokens])
    axes[0].set_xticks(range(d_out), [f"{c % head_dim + 1}" for c in range(d_out)])
    axes[0].set_title(f"queries: (num_tokens, d_out) = {tuple(queries.shape)}", fontsize=10)
    for h in range(num_heads):
        ax = axes[h + 1]
        _tinted_cells(ax, values[h], token_of[h], head_of[h], tokens, show_token=True)
        ax.set_title(f"[{h}]: treated as head {h + 1}", color=head_colour(h), fontweight="bold", fontsize=10)
        ax.set_xticks(range(head_dim), [str(c + 1) for c in range(head_dim)])
        ax.set_yticks(range(num_tokens), [f"row {r + 1}" for r in range(num_tokens)] if h == 0 else [])
    fig.suptitle(f"{how}: {tuple(queries.shape)} → {tuple(values.shape)}\n({batch_note})\n"
                 "each number keeps the colour of its head and the name of its token", fontsize=11)
    return fig


def _tinted_cells(ax, values, token_of, head_of, tokens, *, show_token):
    """Cells tinted by the head each number came from, with the value (and its token) written in."""
    rows, cols = values.shape
    ax.imshow([[_tint(head_colour(int(head_of[r, c]))) for c in range(cols)] for r in range(rows)], aspect="auto")
    for (r, c), value in _cells(values):
        label = f"{value:.2f}\n{tokens[int(token_of[r, c])]}" if show_token else f"{value:.2f}"
        ax.text(c, r, label, ha="center", va="center", fontsize=8.5 if show_token else 9)
    ax.set_xticks([])



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
