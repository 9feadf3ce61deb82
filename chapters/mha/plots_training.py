"""Chapter 4's figures: what trained heads attend to, and what training did to
``W_query``.

The conventions are those of ``mha.plots`` (its docstring gives the numbers):
head ``h`` is drawn in ``head_colour(h)`` and named by ``head_label(h)``,
heatmaps use ``cividis``, and every figure is at most 5.5 in wide with no text
under 11 pt. The private helpers imported below are ``mha.plots``' own
building blocks for that criterion.
"""

from matplotlib.patches import Rectangle

from .plots import (
    DRAWING_WIDTH_IN,
    HEATMAP_CMAP,
    MASKED_STYLE,
    _frame,
    _hatch_masked,
    _new_figure,
    _phone_legible,
    _wrap,
    head_colour,
    head_label,
    outline_head_blocks,
)

#: Heads side by side in one row of ``plot_attention_maps``.
MAPS_PER_ROW = 4


@_phone_legible
def plot_attention_maps(maps):
    """Every head's attention map, one row of panels per model.

    ``maps`` is ``{row label: weights}``, with ``weights`` of shape
    ``(num_heads, T, T)`` (e.g. averaged over many sequences) and at most
    ``MAPS_PER_ROW`` heads. Head ``h`` is framed in its colour in every row,
    so head 1 looks the same in each model.
    """
    maps = {label: w.detach().cpu() for label, w in maps.items()}
    fig = _new_figure(DRAWING_WIDTH_IN, 1.55 * len(maps) + 1.9)
    axes = fig.subplots(len(maps), MAPS_PER_ROW, squeeze=False)
    for row, (label, weights) in zip(axes, maps.items(), strict=True):
        num_tokens = weights.shape[-1]
        ticks = [0, num_tokens - 1]
        for h, ax in enumerate(row):
            if h >= weights.shape[0]:
                ax.set_visible(False)
                continue
            image = ax.imshow(weights[h].numpy(), cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0)
            _hatch_masked(ax, weights[h] == 0)  # only the causal mask gives exactly 0
            _frame(ax, head_colour(h))
            ax.set_title(f"head {h + 1}", pad=6, **head_label(h))
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_yticks(ticks, [str(t) for t in ticks])
        row[0].set_ylabel(label)
    fig.colorbar(
        image,
        ax=axes,
        location="bottom",
        shrink=0.8,
        aspect=30,
        label="attention weight\n(row: query position, column: key position)",
    )
    fig.legend(
        [Rectangle((0, 0), 1, 1, **MASKED_STYLE)],
        ["masked: a later token"],
        loc="outside lower center",
        frameon=False,
    )
    fig.suptitle(_wrap("Where each trained head looks, averaged over the evaluation sequences"))
    return fig


@_phone_legible
def plot_query_weight_trained(untrained, trained, num_heads):
    """``W_query`` before and after training, side by side, head blocks outlined.

    Both are drawn as ``x @ W`` uses them, ``(d_in, d_out)``: pass
    ``module.W_query.weight.T``. Each panel has its own colour scale, given
    below it, because training grows the weights.
    """
    panels = {
        "before training": untrained.detach().cpu(),
        "after training": trained.detach().cpu(),
    }
    d_in, d_out = panels["after training"].shape
    head_dim = d_out // num_heads
    fig = _new_figure(DRAWING_WIDTH_IN, 4.1)
    axes = fig.subplots(1, 2)
    for ax, (title, weight) in zip(axes, panels.items(), strict=True):
        limit = float(weight.abs().max())
        image = ax.imshow(weight.numpy(), cmap=HEATMAP_CMAP, vmin=-limit, vmax=limit)
        outline_head_blocks(ax, num_heads, head_dim, d_in, label=False, linewidth=2)
        ax.set_title(title, pad=8)
        ax.set_xticks(
            [h * head_dim + (head_dim - 1) / 2 for h in range(num_heads)],
            [str(h + 1) for h in range(num_heads)],
        )
        for h, tick in enumerate(ax.get_xticklabels()):
            tick.set(**head_label(h))
        ax.set_yticks([0, d_in - 1], ["1", str(d_in)])
        ax.set_xlabel("head (its block\nof columns)")
        fig.colorbar(
            image,
            ax=ax,
            location="bottom",
            shrink=0.9,
            aspect=20,
            label="weight",
        )
    axes[0].set_ylabel("input dimension")
    fig.suptitle(
        _wrap(
            f"One W_query {tuple(panels['after training'].shape)}, "
            f"{num_heads} heads of {head_dim} columns each"
        )
    )
    return fig
