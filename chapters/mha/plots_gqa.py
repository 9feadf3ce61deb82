"""Figures for chapter 6, "Sharing keys and values".

They follow the rules at the top of ``mha.plots`` (phone-legible sizes, head
``h`` in ``head_colour(h)``, heatmaps in ``cividis``) and reuse its helpers.
"""

from matplotlib.patches import ConnectionPatch, Rectangle

from .plots import (
    DRAWING_WIDTH_IN,
    HEATMAP_CMAP,
    OKABE_ITO,
    _new_figure,
    _phone_legible,
    _wrap,
    head_colour,
    head_label,
)

#: Width of one heatmap column, in inches: eight columns and the row labels
#: fill the drawing's width.
COLUMN_IN = 0.5
#: Length of one dash, in points, of an outline shared by several heads.
DASH_PT = 6


@_phone_legible
def plot_shared_key_blocks(query_weight, key_weight, num_heads, block_of_head=None, how=None):
    """``W_query`` above ``W_key``, both as ``x @ W`` uses them (pass
    ``.weight.T``), with an arrow from each head's query block to the key
    block it reads.

    Query blocks are outlined in their head's colour. A key block's outline
    is dashed in the colours of all the heads that read it, so a block
    shared by a group shows the group's colours. ``block_of_head[h]`` is the
    key block head ``h`` reads; by default ``h // group_size``, the module's
    layout. ``how`` names the mapping in the title; the default names no
    PyTorch call, since the chapter asks which call gives the layout.
    """
    query_weight = query_weight.detach().cpu()
    key_weight = key_weight.detach().cpu()
    d_in, d_out = query_weight.shape
    head_dim = d_out // num_heads
    num_kv_groups = key_weight.shape[1] // head_dim
    group_size = num_heads // num_kv_groups
    if block_of_head is None:
        block_of_head = [h // group_size for h in range(num_heads)]
    how = how or "the module's layout: consecutive heads share a block"
    readers = [[h for h in range(num_heads) if block_of_head[h] == g] for g in range(num_kv_groups)]
    low = float(min(query_weight.min(), key_weight.min()))
    high = float(max(query_weight.max(), key_weight.max()))
    first_key_column = (d_out - key_weight.shape[1]) / 2

    width = min(DRAWING_WIDTH_IN, COLUMN_IN * d_out + 1.2)
    fig = _new_figure(width, 0.45 * 2 * d_in + 4.6)
    fig.get_layout_engine().set(hspace=0.1)
    query_ax, key_ax = fig.subplots(2, 1)
    image = _heatmap(query_ax, query_weight, 0, low, high)
    _heatmap(key_ax, key_weight, first_key_column, low, high)
    for ax in (query_ax, key_ax):
        ax.set_xlim(-0.5, d_out - 0.5)
        ax.set_ylim(d_in - 0.5, -0.5)
        ax.set_yticks(range(d_in), [f"input {i + 1}" for i in range(d_in)])
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)

    query_ax.set_xticks([])
    for h in range(num_heads):
        _outline(query_ax, h * head_dim, head_dim, d_in, [h])
        query_ax.annotate(
            f"head {h + 1}",
            (h * head_dim + (head_dim - 1) / 2, -0.5),
            xytext=(0, 8),
            textcoords="offset points",
            ha="center",
            va="bottom",
            **head_label(h),
        )
    centres = []
    for g, heads in enumerate(readers):
        left = first_key_column + g * head_dim
        _outline(key_ax, left, head_dim, d_in, heads)
        centres.append(left + (head_dim - 1) / 2)
    key_ax.set_xticks(
        centres,
        [
            f"block {g + 1}\nheads " + (", ".join(str(h + 1) for h in heads) or "none")
            for g, heads in enumerate(readers)
        ],
    )
    for h, g in enumerate(block_of_head):
        fig.add_artist(
            ConnectionPatch(
                xyA=(h * head_dim + (head_dim - 1) / 2, d_in - 0.5),
                coordsA=query_ax.transData,
                xyB=(centres[g], -0.5),
                coordsB=key_ax.transData,
                arrowstyle="-|>",
                color=head_colour(h),
                linewidth=2.5,
                mutation_scale=18,
            )
        )

    query_ax.set_title(f"W_query {tuple(query_weight.shape)}: one block per head", pad=36)
    key_ax.set_xlabel(f"W_key {tuple(key_weight.shape)}: one block per group")
    fig.suptitle(_wrap(how))
    fig.colorbar(
        image, ax=[query_ax, key_ax], location="bottom", shrink=0.7, aspect=30, label="weight"
    )
    return fig


def _heatmap(ax, matrix, first_column, low, high):
    """``matrix`` as a heatmap whose first column sits at x = first_column."""
    rows, columns = matrix.shape
    extent = (first_column - 0.5, first_column + columns - 0.5, rows - 0.5, -0.5)
    return ax.imshow(
        matrix.numpy(), cmap=HEATMAP_CMAP, vmin=low, vmax=high, extent=extent, aspect="auto"
    )


def _outline(ax, left, width, rows, heads):
    """A rectangle around ``width`` columns from ``left``, dashed in the
    colours of ``heads`` (solid for one head, grey for none)."""
    inset = 0.06  # neighbouring outlines do not draw over each other
    corner = (left - 0.5 + inset, -0.5 + inset)
    size = (width - 2 * inset, rows - 2 * inset)
    if not heads:
        ax.add_patch(
            Rectangle(
                corner,
                *size,
                fill=False,
                edgecolor="grey",
                linewidth=3,
                linestyle=":",
                clip_on=False,
            )
        )
    for i, h in enumerate(heads):
        gap = DASH_PT * (len(heads) - 1)
        style = "-" if len(heads) == 1 else (i * DASH_PT, (DASH_PT, gap))
        ax.add_patch(
            Rectangle(
                corner,
                *size,
                fill=False,
                edgecolor=head_colour(h),
                linewidth=3,
                linestyle=style,
                clip_on=False,
            )
        )


#: One colour and marker per attention variant in the cache-size figure.
VARIANT_STYLES = (
    (OKABE_ITO[5], "o", "-"),
    (OKABE_ITO[4], "s", "--"),
    (OKABE_ITO[7], "^", ":"),
)


@_phone_legible
def plot_kv_cache_size(num_tokens, cache_bytes, title):
    """Key/value cache size against sequence length, one line per variant.

    ``cache_bytes`` maps a variant's name to its cache size in bytes at each
    length in ``num_tokens``; sizes are drawn in GiB.
    """
    fig = _new_figure(DRAWING_WIDTH_IN, 4.6)
    ax = fig.subplots()
    for (name, sizes), (colour, marker, line) in zip(
        cache_bytes.items(), VARIANT_STYLES, strict=False
    ):
        gib = [size / 2**30 for size in sizes]
        ax.plot(
            num_tokens, gib, color=colour, marker=marker, linestyle=line, linewidth=2, label=name
        )
    ax.set_xlabel("tokens in the cache")
    ax.set_ylabel("key/value cache (GiB)")
    ax.set_xticks(num_tokens, [f"{n:,}" for n in num_tokens])
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(_wrap(title))
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=1, frameon=False)
    return fig
