"""Figures for the book. Each function takes real tensors and returns a matplotlib Figure.

Colours are fixed for the whole book: head ``h`` (counted from 0) is always ``head_colour(h)``,
taken from the Okabe–Ito colour-blind-safe palette; heatmaps use ``cividis``.
Figures are built with ``matplotlib.figure.Figure`` rather than pyplot, so a cell shows a figure
exactly once: when the cell returns it.

Every figure is drawn to be read on a phone as well as on a desktop. The criterion, checked for
every function here by ``tests/test_figures.py`` and on the built pages by ``tests/browser``:

- saved as Jupyter's inline backend saves it (``FIGURE_DPI`` = 100 dpi, ``bbox_inches="tight"``),
  a figure is at most ``MAX_WIDTH_IN`` = 5.5 in wide, 550 px;
- every piece of text drawn, tick labels and values in cells included, is at least
  ``MIN_TEXT_PT`` = 11 pt, which is 15.3 px at 100 dpi.

Why these numbers: at a 390 px phone width the book's text column is 342 px, so the widest figure
is shown at 342 / 550 = 0.62 of its size and its smallest text at 9.5 CSS px; on a desktop (a
672 px column) figures show at full size. On narrower phones ``_static/figures.css`` keeps a
figure at least ``PHONE_MIN_WIDTH_PX`` wide, scrolling sideways inside its output box: smallest
text 15.3 × 330 / 550 = 9.2 px. To fit, wide grids become rows of at most three panels, and
heatmaps write their values in the cells only where a cell is wide enough (the colourbar always
gives the scale).

Head colours are for lines, frames and fills. Text that names a head is black on a light tint of
the head's colour, framed in that colour (``head_label``): sky blue and yellow are too light to
be legible as text on white.
"""

import functools
import math
import textwrap

import matplotlib
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.patches import PathPatch, Rectangle
from matplotlib.path import Path
from matplotlib.transforms import Affine2D

from .data import TOKENS

#: Okabe–Ito, ordered so that the first heads get the most distinct colours (yellow comes late).
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#F0E442", "#000000")
#: The colours heads take: every hue of the palette. Black is never a head: it is for what is not
#: one (points, implementations), so a head and an implementation never share a colour.
HEAD_COLOURS = OKABE_ITO[:-1]
HEATMAP_CMAP = "cividis"

#: The phone-legibility criterion (see the module docstring).
FIGURE_DPI = 100
MAX_WIDTH_IN = 5.5
MIN_TEXT_PT = 11
TITLE_PT = 12
#: ``bbox_inches="tight"`` adds 0.1 in of padding on each side; the drawing gets the rest.
DRAWING_WIDTH_IN = MAX_WIDTH_IN - 0.2
#: The narrowest width ``_static/figures.css`` lets a figure shrink to, in CSS px.
PHONE_MIN_WIDTH_PX = 330

#: Every figure is built under these settings, so that text without an explicit size gets
#: MIN_TEXT_PT.
FIGURE_STYLE = {
    "figure.dpi": FIGURE_DPI,
    "font.size": MIN_TEXT_PT,
    "axes.labelsize": MIN_TEXT_PT,
    "axes.titlesize": TITLE_PT,
    "figure.titlesize": TITLE_PT,
    "xtick.labelsize": MIN_TEXT_PT,
    "ytick.labelsize": MIN_TEXT_PT,
    "legend.fontsize": MIN_TEXT_PT,
    "legend.title_fontsize": MIN_TEXT_PT,
}
#: Figures are shown as PNGs with this many pixels per pixel of their size (IPython's "retina"),
#: so they stay sharp on high-density phone and laptop screens. Jupyter and the book show them
#: at their size, which the PNG's metadata carries; a figure's text repr (what strict nbval
#: compares) does not change.
FIGURE_DENSITY = 2


def show_sharp_figures():
    """In IPython, show every figure at ``FIGURE_DENSITY`` times its pixels ("retina" PNGs).

    Runs when this module is imported, so every chapter that draws gets sharp figures without
    a line of its own; it stays in force if the chapter runs ``%matplotlib inline`` afterwards.
    Outside IPython it does nothing.
    """
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
        from matplotlib_inline.config import InlineBackend
    except ImportError:
        return
    if get_ipython() is None:
        return
    InlineBackend.instance().figure_formats = {"retina"}  # what %matplotlib inline selects
    set_matplotlib_formats("retina")


show_sharp_figures()

#: Space around each panel, enough for the frame that ``head_label`` draws around its text.
LAYOUT_PAD_IN = 6 / 72
#: A heatmap cell this wide (in inches) holds a value such as "-0.45" at MIN_TEXT_PT with a margin.
VALUE_CELL_IN = 0.65


def head_colour(h):
    """The colour of head ``h`` (0-based) everywhere in the book."""
    return HEAD_COLOURS[h % len(HEAD_COLOURS)]


def head_label(h):
    """Text settings for a label that names head ``h``.

    Black on a tint of the head's colour, framed in it.
    """
    return {
        "color": "black",
        "fontweight": "bold",
        "bbox": {
            "boxstyle": "round,pad=0.3",
            "facecolor": _tint(head_colour(h)),
            "edgecolor": head_colour(h),
            "linewidth": 2,
        },
    }


def _tint(colour, amount=0.45):
    """``colour`` mixed with white: light enough to write black text on."""
    return tuple(1 - amount * (1 - c) for c in to_rgb(colour))


def _phone_legible(draw):
    """Build the figure under ``FIGURE_STYLE``.

    That is 100 dpi, and MIN_TEXT_PT for any text not sized otherwise.
    """

    @functools.wraps(draw)
    def build(*args, **kwargs):
        with matplotlib.rc_context(FIGURE_STYLE):
            return draw(*args, **kwargs)

    return build


def _new_figure(width, height):
    """A new figure, no wider than the criterion allows.

    The width is capped so that the figure still fits once saved with its 0.1 in padding on each
    side.
    """
    return Figure(
        figsize=(min(width, DRAWING_WIDTH_IN), height),
        dpi=FIGURE_DPI,
        layout=ConstrainedLayoutEngine(h_pad=LAYOUT_PAD_IN, w_pad=LAYOUT_PAD_IN),
    )


def _wrap(text, fontsize=TITLE_PT, width_in=DRAWING_WIDTH_IN - 0.2):
    """``text`` broken into lines that fit ``width_in`` at ``fontsize``.

    A character is taken to be about 0.55 em wide.
    """
    chars = int(width_in * 72 / (0.55 * fontsize))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def _cell_width(columns, reserved_in):
    """The width of one heatmap cell.

    ``columns`` cells and ``reserved_in`` inches of labels share the drawing's width.
    """
    return min(VALUE_CELL_IN, (DRAWING_WIDTH_IN - reserved_in) / columns)


def _values_fit(cell_width):
    """Whether cells ``cell_width`` wide can hold their values at MIN_TEXT_PT."""
    return round(cell_width, 3) >= VALUE_CELL_IN


def outline_head_blocks(ax, num_heads, block_width, num_rows, *, label=True, linewidth=3):
    """Draw one coloured rectangle per head around its columns.

    The heatmap is one drawn with ``imshow``.
    """
    for h in range(num_heads):
        left = h * block_width - 0.5
        inset = 0.06  # keeps neighbouring outlines from drawing over each other
        ax.add_patch(
            Rectangle(
                (left + inset, -0.5 + inset),
                block_width - 2 * inset,
                num_rows - 2 * inset,
                fill=False,
                edgecolor=head_colour(h),
                linewidth=linewidth,
                clip_on=False,
            )
        )
        if label:
            ax.annotate(
                f"head {h + 1}",
                (left + block_width / 2, -0.5),
                xytext=(0, 8),
                textcoords="offset points",
                ha="center",
                va="bottom",
                **head_label(h),
            )


@_phone_legible
def plot_concatenated_output(context, num_heads, tokens=TOKENS):
    """Heatmap of one sequence's context vectors, head blocks outlined.

    ``context`` has shape ``(num_tokens, num_heads * d_out)``.
    """
    context = context.detach().cpu()
    num_tokens, width = context.shape
    block_width = width // num_heads
    cell = _cell_width(width, reserved_in=1.0)
    fig = _new_figure(cell * width + 1.0, 0.42 * num_tokens + 2.8)
    ax = fig.subplots()
    image = _annotated_heatmap(ax, context, write_values=_values_fit(cell))
    outline_head_blocks(ax, num_heads, block_width, num_tokens)
    ax.set_yticks(range(num_tokens), tokens[:num_tokens])
    ax.set_xticks(range(width), [f"{c % block_width + 1}" for c in range(width)])
    ax.set_xlabel("output column\n(numbered within its head)")
    ax.set_title(
        _wrap("torch.cat puts each head's context vectors side by side", width_in=3.6), pad=34
    )
    fig.colorbar(image, ax=ax, location="bottom", shrink=0.7, aspect=30, label="value")
    return fig


def _row_labels(ax, labels):
    """Label the rows of a heatmap with ``labels``; ``None`` leaves no tick marks either.

    A panel beside the first shares its row labels: tick marks without labels there would
    stand between the panels as stray dashes.
    """
    if labels is None:
        ax.tick_params(axis="y", left=False, labelleft=False)
    else:
        ax.set_yticks(range(len(labels)), labels)


def _cells(matrix):
    """Every ``((row, col), value)`` of a 2-D tensor, for writing values into heatmap cells."""
    rows, cols = matrix.shape
    return (((r, c), float(matrix[r, c])) for r in range(rows) for c in range(cols))


def _annotated_heatmap(ax, matrix, *, write_values=True, **limits):
    """``imshow`` a 2-D tensor in the heatmap colours.

    Each value is written in its cell if ``write_values``.
    """
    image = ax.imshow(matrix.numpy(), cmap=HEATMAP_CMAP, aspect="auto", **limits)
    low, high = image.get_clim()
    if write_values:
        for (row, col), value in _cells(matrix):
            ax.text(
                col,
                row,
                f"{value:.2f}",
                ha="center",
                va="center",
                color="white" if value < (low + high) / 2 else "black",
            )
    return image


# ---------------------------------------------------------------------------------------------
# Chapter 2 figures
# ---------------------------------------------------------------------------------------------


@_phone_legible
def plot_two_dim_context(context, tokens=TOKENS):
    """Scatter one sequence's 2-D context vectors: head 1's value across, head 2's value up.

    With ``num_heads=2`` and ``d_out=1`` each head owns one coordinate of every context vector,
    so each token becomes a point in a plane whose axes belong to the two heads.
    """
    context = context.detach().cpu()
    if context.dim() != 2 or context.shape[1] != 2:
        raise ValueError(
            "plot_two_dim_context expects one sequence's context vectors, shape (num_tokens, 2), "
            f"got {tuple(context.shape)}. Pass e.g. mha(batch)[0] from a wrapper with "
            "num_heads=2 and d_out=1."
        )
    fig = _new_figure(5.2, 5.0)
    ax = fig.subplots()
    ax.scatter(context[:, 0].numpy(), context[:, 1].numpy(), s=60, color="black", zorder=3)
    points = context.tolist()
    span_x, span_y = (
        max(float(spread), 1e-9) for spread in context.max(dim=0).values - context.min(dim=0).values
    )
    for token, (x, y) in zip(tokens, points):
        # A label goes below its dot when another dot sits just above it, where the label would be.
        crowded = any(
            abs(x2 - x) < 0.15 * span_x and 0 < y2 - y < 0.1 * span_y for x2, y2 in points
        )
        ax.annotate(
            token,
            (x, y),
            xytext=(7, -4 if crowded else 4),
            textcoords="offset points",
            va="top" if crowded else "bottom",
        )
    head_axes = ((ax.xaxis, "bottom", ax.set_xlabel), (ax.yaxis, "left", ax.set_ylabel))
    for h, (axis, spine, set_label) in enumerate(head_axes):
        set_label(f"head {h + 1}'s output (one value per token)", labelpad=8, **head_label(h))
        ax.spines[spine].set(color=head_colour(h), linewidth=3)
        axis.set_tick_params(color=head_colour(h), width=2)
    ax.spines[["top", "right"]].set_visible(False)
    ax.margins(0.2)
    ax.set_title(_wrap("Each head owns one coordinate of every context vector", width_in=4.2))
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 3 figures
# ---------------------------------------------------------------------------------------------

# Imports only this section needs sit here, so that each chapter edits only its own section.
import torch  # noqa: E402
from matplotlib.patches import ConnectionPatch  # noqa: E402

#: At most this many panels side by side; more heads continue on the next row.
PANELS_PER_ROW = 3


@_phone_legible
def plot_combined_weight(weight, num_heads, name="W_query", rows="input", shape="(d_in, d_out)"):
    """Heatmap of one combined projection, one outlined column block per head.

    The weight is drawn as ``x @ W`` uses it, ``(d_in, d_out)``.
    Pass ``module.W_query.weight.T``: ``nn.Linear`` stores its weight as ``(d_out, d_in)``.
    ``rows`` names what a row multiplies and ``shape`` names the axes, for a projection whose
    input is not a token (``W_up_key`` reads a latent: ``rows="latent"``).
    """
    weight = weight.detach().cpu()
    d_in, d_out = weight.shape
    head_dim = d_out // num_heads
    cell = _cell_width(d_out, reserved_in=1.0)
    fig = _new_figure(cell * d_out + 1.0, 0.5 * d_in + 3.2)
    ax = fig.subplots()
    image = _annotated_heatmap(ax, weight, write_values=_values_fit(cell))
    outline_head_blocks(ax, num_heads, head_dim, d_in)
    ax.set_yticks(range(d_in), [f"{rows} {i + 1}" for i in range(d_in)])
    ax.set_xticks(range(d_out), [f"{c % head_dim + 1}" for c in range(d_out)])
    ax.set_xlabel(f"output column\n(numbered within its head; head_dim = {head_dim})")
    ax.set_title(
        _wrap(f"One {name} for all {num_heads} heads:\nshape {shape} = {tuple(weight.shape)}"),
        pad=34,
    )
    fig.colorbar(image, ax=ax, location="bottom", shrink=0.7, aspect=30, label="weight")
    return fig


@_phone_legible
def plot_heads_in_combined_weight(head_weights, combined, name="W_query"):
    """Each wrapper head's small matrix, above the column block it becomes in ``combined``.

    Each head's matrix is ``(d_in, head_dim)``. ``head_weights[h]`` and ``combined`` are drawn as
    ``x @ W`` uses them (``.weight.T``), on one colour scale.
    """
    head_weights = [w.detach().cpu() for w in head_weights]
    combined = combined.detach().cpu()
    num_heads = len(head_weights)
    d_in, head_dim = head_weights[0].shape
    vmin, vmax = float(combined.min()), float(combined.max())
    cell = _cell_width(num_heads * head_dim, reserved_in=1.0)
    write_values = _values_fit(cell)
    fig = _new_figure(cell * num_heads * head_dim + 1.0, 1.0 * d_in + 4.6)
    top, bottom = fig.subfigures(2, 1, height_ratios=(1, 1.25), hspace=0.1)
    small_axes = top.subplots(1, num_heads, squeeze=False)[0]
    for h, (ax, w) in enumerate(zip(small_axes, head_weights)):
        _annotated_heatmap(ax, w, write_values=write_values, vmin=vmin, vmax=vmax)
        _frame(ax, head_colour(h))
        ax.set_title(f"head {h + 1}", pad=8, **head_label(h))
        ax.set_xticks(range(head_dim), [str(c + 1) for c in range(head_dim)])
        _row_labels(ax, [f"input {i + 1}" for i in range(d_in)] if h == 0 else None)
    top.suptitle(
        _wrap(
            f"Each wrapper head's own {name}, shape {tuple(head_weights[0].shape)}, becomes "
            f"one block of {head_dim} columns of the combined {name} below"
        )
    )
    ax = bottom.subplots()
    image = _annotated_heatmap(ax, combined, write_values=write_values, vmin=vmin, vmax=vmax)
    outline_head_blocks(ax, num_heads, head_dim, d_in, label=False)
    ax.set_yticks(range(d_in), [f"input {i + 1}" for i in range(d_in)])
    ax.set_xticks(range(num_heads * head_dim), [str(c + 1) for c in range(num_heads * head_dim)])
    ax.set_xlabel(f"column of the weight-split module's one {name},\nshape {tuple(combined.shape)}")
    bottom.colorbar(image, ax=ax, location="bottom", shrink=0.7, aspect=30, label="weight")
    for h, small in enumerate(small_axes):
        fig.add_artist(
            ConnectionPatch(
                xyA=((head_dim - 1) / 2, d_in - 0.5),
                coordsA=small.transData,
                xyB=(h * head_dim + (head_dim - 1) / 2, -0.5),
                coordsB=ax.transData,
                arrowstyle="-|>",
                color=head_colour(h),
                linewidth=2.5,
                mutation_scale=18,
            )
        )
    return fig


def plot_split_heads(queries, num_heads, tokens=TOKENS):
    """A query matrix regrouped as ``view`` + ``transpose`` regroup it.

    The ``(num_tokens, d_out)`` matrix becomes ``(num_heads, num_tokens, head_dim)``.
    Each cell keeps the colour of the head whose columns it came from and names its token.
    """
    num_tokens, d_out = queries.shape

    def regroup(t):
        return t.reshape(num_tokens, num_heads, d_out // num_heads).transpose(0, 1)

    return _plot_regrouping(
        queries,
        num_heads,
        regroup,
        tokens,
        "view(num_tokens, num_heads, head_dim), then transpose(0, 1)",
        "one sequence, so the batch axis is dropped: the code's transpose(1, 2) "
        "becomes transpose(0, 1)",
    )


def plot_split_heads_without_transpose(queries, num_heads, tokens=TOKENS):
    """The same query matrix viewed straight to a new shape: tokens and heads scrambled.

    The view goes from ``(num_tokens, d_out)`` to ``(num_heads, num_tokens, head_dim)`` without the
    transpose.
    """
    num_tokens, d_out = queries.shape

    def regroup(t):
        return t.reshape(num_heads, num_tokens, d_out // num_heads)

    return _plot_regrouping(
        queries,
        num_heads,
        regroup,
        tokens,
        "view(num_heads, num_tokens, head_dim), no transpose",
        "one sequence, so the batch axis is dropped: the code's "
        "view(b, num_heads, num_tokens, head_dim) loses its b",
    )


@_phone_legible
def plot_attention_per_head(attn_weights, tokens=TOKENS):
    """One heatmap of attention weights per head, framed in the head's colour.

    Each head's weights are ``(num_tokens, num_tokens)``.
    At most ``PANELS_PER_ROW`` heads share a row, and the colourbar lies below them to leave the
    width to the heatmaps. On a phone the cells are too small to hold their values: the colourbar
    gives the scale.
    """
    attn_weights = attn_weights.detach().cpu()
    num_heads, num_tokens, _ = attn_weights.shape
    masked = attn_weights == 0  # (num_heads, num_tokens, num_tokens): what the mask removed
    columns = min(num_heads, PANELS_PER_ROW)
    rows = math.ceil(num_heads / columns)
    fig = _new_figure(DRAWING_WIDTH_IN, 1.45 * rows + 2.5)
    axes = fig.subplots(rows, columns, squeeze=False)
    for h, ax in enumerate(axes.flat):
        if h >= num_heads:
            ax.set_visible(False)
            continue
        image = ax.imshow(attn_weights[h].numpy(), cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0)
        _hatch_masked(ax, masked[h])
        _frame(ax, head_colour(h))
        ax.set_title(f"head {h + 1}", pad=8, **head_label(h))
        ax.set_xticks(range(num_tokens), tokens[:num_tokens], rotation=90)
        _row_labels(ax, tokens[:num_tokens] if h % columns == 0 else None)
        if h % columns == 0:
            ax.set_ylabel("query (attending)")
        if h % columns == columns // 2:
            ax.set_xlabel("key (attended to)")
    fig.colorbar(image, ax=axes, location="bottom", shrink=0.7, aspect=30, label="attention weight")
    if masked.any():
        masked_patch = Rectangle((0, 0), 1, 1, **MASKED_STYLE)
        fig.legend(
            [masked_patch], ["masked: a later token"], loc="outside lower center", frameon=False
        )
    fig.suptitle(
        _wrap("Attention weights of each head, all computed in one batched matrix multiplication")
    )
    return fig


#: How a masked cell is drawn: white with grey hatching, unlike any colour of ``cividis``.
MASKED_STYLE = {"facecolor": "white", "edgecolor": "grey", "hatch": "///", "linewidth": 0}


def _hatch_masked(ax, masked):
    """Cover each cell where ``masked`` is true, so a masked weight never looks like a small one.

    A weight of exactly 0 comes only from the causal mask: softmax gives every unmasked score
    some weight.

    All the cells are one patch, a path of one square each, drawn once. A patch per cell drew
    the same pixels, but chapter 4's figure of seven heads has 315 of them, each added and hatched
    on its own: building and saving it took 1.0 s, one patch per head 0.45 s (2-core AMD EPYC).
    """
    squares = [
        Path.unit_rectangle().transformed(Affine2D().translate(col - 0.5, row - 0.5))
        for row, col in masked.nonzero().tolist()
    ]
    if squares:
        ax.add_patch(PathPatch(Path.make_compound_path(*squares), **MASKED_STYLE))


def _frame(ax, colour):
    for spine in ax.spines.values():
        spine.set_edgecolor(colour)
        spine.set_linewidth(3)


@_phone_legible
def _plot_regrouping(queries, num_heads, regroup, tokens, how, batch_note):
    """Draw ``queries`` above ``regroup(queries)``, each number marked with where it came from.

    Every number is coloured by the head and token it came from.

    ``how`` names the regrouping as done on one sequence; ``batch_note`` says how it maps to the
    batched code, which has a batch axis in front.

    The same ``regroup`` is applied to two index matrices (which token, which head block each number
    came from), so every cell below shows where its number really started.
    """
    queries = queries.detach().cpu()
    num_tokens, d_out = queries.shape
    head_dim = d_out // num_heads
    token_of = torch.arange(num_tokens).repeat_interleave(d_out).view(num_tokens, d_out)
    head_of = (torch.arange(d_out) // head_dim).repeat(num_tokens, 1)
    values = regroup(queries)  # (num_heads, num_tokens, head_dim)

    columns = min(num_heads, PANELS_PER_ROW)
    panel_rows = math.ceil(num_heads / columns)
    fig = _new_figure(DRAWING_WIDTH_IN, 0.42 * num_tokens + 0.55 * num_tokens * panel_rows + 3.4)
    top, bottom = fig.subfigures(
        2, 1, height_ratios=(0.42 * num_tokens + 1.0, (0.55 * num_tokens + 1.0) * panel_rows)
    )
    ax = top.subplots()
    _tinted_cells(ax, queries, token_of, head_of, tokens, show_token=False)
    outline_head_blocks(ax, num_heads, head_dim, num_tokens, linewidth=2)
    ax.set_yticks(range(num_tokens), tokens[:num_tokens])
    ax.set_xticks(range(d_out), [f"{c % head_dim + 1}" for c in range(d_out)])
    ax.set_title(f"queries: (num_tokens, d_out) = {tuple(queries.shape)}", pad=34)
    top.suptitle(_wrap(f"{how}: {tuple(queries.shape)} → {tuple(values.shape)}\n({batch_note})"))

    axes = bottom.subplots(panel_rows, columns, squeeze=False)
    for h, ax in enumerate(axes.flat):
        if h >= num_heads:
            ax.set_visible(False)
            continue
        _tinted_cells(
            ax, values[h], regroup(token_of)[h], regroup(head_of)[h], tokens, show_token=True
        )
        ax.set_title(f"[{h}]: treated as\nhead {h + 1}", pad=8, **head_label(h))
        ax.set_xticks(range(head_dim), [str(c + 1) for c in range(head_dim)])
        _row_labels(ax, [f"row {r + 1}" for r in range(num_tokens)] if h % columns == 0 else None)
    bottom.suptitle(_wrap("each number keeps the colour of its head and the name of its token"))
    return fig


def _tinted_cells(ax, values, token_of, head_of, tokens, *, show_token):
    """Cells tinted by the head each number came from, with the value (and its token) written in."""
    rows, cols = values.shape
    ax.imshow(
        [[_tint(head_colour(int(head_of[r, c]))) for c in range(cols)] for r in range(rows)],
        aspect="auto",
    )
    for (r, c), value in _cells(values):
        label = f"{value:.2f}\n{tokens[int(token_of[r, c])]}" if show_token else f"{value:.2f}"
        ax.text(c, r, label, ha="center", va="center", linespacing=1.1)
    ax.set_xticks([])
