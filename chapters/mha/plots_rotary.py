"""Chapter 9's figure: each head's query pairs as arrows, turning with the
token's position, each pair at its own speed.

Drawn under the book's phone criterion (``mha.plots``): at most 5.5 in wide,
no text under 11 pt, heads in their colours with black labels on a tint.
"""

import math

from matplotlib.patches import Circle

from .plots import (
    _new_figure,
    _phone_legible,
    _wrap,
    head_colour,
    head_label,
    plot_combined_weight,
)


@_phone_legible
def plot_turning_pairs(turned, rates):
    """One row per head, one panel per pair: the pair (x1, x2) of one query
    placed at positions 0, 1, ..., as arrows from the origin, fainter for
    earlier positions; the last position is numbered.

    ``turned`` is (num_heads, num_positions, rotary_dim) in the half layout
    (pair i is entries i and i + rotary_dim / 2); ``rates`` the angle per
    position of each pair, in radians.
    """
    turned = turned.detach().cpu()
    num_heads, num_positions, width = turned.shape
    pairs = width // 2
    fig = _new_figure(1.3 * pairs + 0.9, 1.45 * num_heads + 0.9)
    axes = fig.subplots(num_heads, pairs, squeeze=False)
    for h in range(num_heads):
        for i in range(pairs):
            ax = axes[h][i]
            x1, x2 = turned[h, :, i], turned[h, :, i + pairs]
            reach = 1.15 * float(max(x1.hypot(x2).max(), 1e-6))
            ax.add_patch(Circle((0, 0), reach / 1.15, fill=False, color="grey", lw=0.8))
            for p in range(num_positions):
                alpha = 0.3 + 0.7 * p / max(num_positions - 1, 1)
                ax.annotate(
                    "",
                    (float(x1[p]), float(x2[p])),
                    (0, 0),
                    arrowprops=dict(arrowstyle="-|>", color=head_colour(h), alpha=alpha, lw=2),
                )
            last = num_positions - 1
            tip = (float(x1[last]), float(x2[last]))
            ax.annotate(str(last), tip, ha="center", va="center", **head_label(h))
            ax.set(xlim=(-reach, reach), ylim=(-reach, reach), aspect="equal")
            ax.set(xticks=[], yticks=[])
            ax.set_axis_off()
            if h == 0:
                turn = math.degrees(float(rates[i]))
                ax.set_title(f"pair i = {i}\n{turn:.3g}° a step", fontsize=11)
        axes[h][0].text(
            -0.12,
            0.5,
            f"head {h + 1}",
            rotation=90,
            ha="right",
            va="center",
            transform=axes[h][0].transAxes,
            **head_label(h),
        )
    positions = f"0 to {num_positions - 1}"
    fig.suptitle(_wrap(f"One query at positions {positions}: each pair turns at its own speed"))
    return fig


def plot_reordered_weight(weight, num_heads, order, name="W_query"):
    """Chapter 3's picture of a combined weight (``x @ W``, head blocks
    framed), after its columns were reordered within each head by
    ``order``: each column is numbered by where it came from in its head."""
    fig = plot_combined_weight(weight, num_heads, name=name)
    ax = fig.axes[0]
    labels = [str(int(j) + 1) for j in order] * num_heads
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("output column, numbered by its place before the reordering")
    return fig
