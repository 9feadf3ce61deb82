"""Figures for the book. Each function takes real tensors and returns a matplotlib Figure.

Colours are fixed for the whole book: head ``h`` (counted from 0) is always ``head_colour(h)``,
taken from the Okabe–Ito colour-blind-safe palette; heatmaps use ``cividis``.
Figures are built with ``matplotlib.figure.Figure`` rather than pyplot, so a cell shows a figure
exactly once: when the cell returns it.
"""

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

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
    ax.scatter(context[:, 0].numpy(), context[:, 1].numpy(), s=60, color="#333333", zorder=3)
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

# (chapter 3 adds its figures here)


# ---------------------------------------------------------------------------------------------
# Chapter 4 figures
# ---------------------------------------------------------------------------------------------

# (chapter 4 adds its figures here)
