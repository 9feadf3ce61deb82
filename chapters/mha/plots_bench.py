"""The benchmark's figures: chapter 5's plots and the PNG that ``python -m mha.bench`` saves.

They follow the rules at the top of ``mha.plots``: phone-legible, and no implementation in a
head's colour. Implementations are told apart three ways at once, by colour, marker and line
style (``IMPLEMENTATION_STYLES``, ``IMPLEMENTATION_LINESTYLES``), so that the lines separate at
a phone's 342 px, in print, and for colour-blind readers. This module imports ``mha.bench``'s
``timing`` and ``comparison``; of the benchmark package only the command line
(``mha.bench.__main__``) imports it, so imports run one way.
"""

from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from . import plots
from .bench.comparison import ratios, select
from .bench.timing import BENCHED, LABELS

#: The implementations' colours: black and the dark colours of Paul Tol's "muted" scheme
#: (colour-blind safe). Each is at least 20 CIELAB units from every head colour (Okabe–Ito) and
#: has at least 3:1 contrast on the white the figures keep in the dark theme. ``#CC6677`` (rose)
#: is chapter 7's ``tiled``.
IMPLEMENTATION_PALETTE = (
    "#000000",
    "#332288",
    "#882255",
    "#117733",
    "#AA4499",
    "#999933",
    "#CC6677",
)
#: One colour, marker and line style per implementation, the same in every figure of the book.
IMPLEMENTATION_STYLES = {
    "wrapper": ("#000000", "o"),
    "split": ("#332288", "s"),
    "combined_qkv": ("#882255", "^"),
    "fused": ("#117733", "D"),
    "torch_mha": ("#AA4499", "x"),
    "torch_mha_nofast": ("#999933", "+"),
    "tiled": ("#CC6677", "v"),
}
IMPLEMENTATION_LINESTYLES = {
    "wrapper": "solid",
    "split": "dashed",
    "combined_qkv": "dotted",
    "fused": "dashdot",
    "torch_mha": (0, (6, 2)),
    "torch_mha_nofast": (0, (4, 1.5, 1, 1.5, 1, 1.5)),
    "tiled": (0, (1, 1)),  # dense dots: apart from fused's dash-dot in chapter 7's figure
}


def implementation_colour(name):
    """The colour of implementation ``name`` (a name in ``mha.bench.BENCHED``) in every figure."""
    return IMPLEMENTATION_STYLES[name][0]


#: Width and height of one benchmark plot, with its legend below it.
PLOT_SIZE_IN = (plots.DRAWING_WIDTH_IN, 5.4)


def _implementation_line(ax, name, xs, ys):
    ax.plot(
        xs,
        ys,
        color=implementation_colour(name),
        marker=IMPLEMENTATION_STYLES[name][1],
        linestyle=IMPLEMENTATION_LINESTYLES[name],
        label=LABELS[name],
        linewidth=2,
        markersize=7,
        markeredgewidth=2,  # the thin "x" and "+" stay visible at a phone's 342 px
    )


def _names(rows):
    return [name for name in BENCHED if any(r.implementation == name for r in rows)]


def _legend_below(fig, ax, ncols=1):
    """The legend of ``ax`` under the plot, where it covers no data and needs no small font."""
    fig.legend(
        *ax.get_legend_handles_labels(), loc="outside lower center", ncols=ncols, frameon=False
    )


def _what(rows):
    return "training step" if rows[0].timed == "forward+backward" else "forward"


def _draw_time_vs_heads(ax, rows):
    for name in _names(rows):
        found = select(rows, "heads", name)
        _implementation_line(ax, name, [r.num_heads for r in found], [r.median_ms for r in found])
    first = select(rows, "heads", "wrapper")[0]
    heads = [r.num_heads for r in select(rows, "heads", "wrapper")]
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(heads)
    ax.set_xlabel("num_heads")
    ax.set_ylabel(f"median time per {_what(rows)}\n(ms, log scale)")
    ax.set_title(
        f"Time vs head count\n({first.batch} × {first.num_tokens} tokens, d_out {first.d_out})"
    )
    ax.grid(True, which="both", alpha=0.3)


def _draw_split_speedup(ax, rows, crossover):
    """The split's speedup; the reference lines and the overhead-bound span carry legend labels."""
    speedup = ratios(rows, "wrapper", "split")  # {num_tokens: wrapper time / split time}
    tokens = list(speedup)
    _implementation_line(ax, "split", tokens, list(speedup.values()))
    ax.axhline(1.0, color="grey", linewidth=1, linestyle=":", label="1×: both equally fast")
    ax.set_xscale("log", base=2)
    ax.set_xticks(tokens, [str(t) for t in tokens])
    ax.set_ylim(bottom=0)
    if crossover is not None:
        ax.axvspan(
            tokens[0],
            crossover,
            color="grey",
            alpha=0.15,
            linewidth=0,
            label="wrapper overhead-bound",
        )
        ax.axvline(
            crossover,
            color="grey",
            linestyle="--",
            linewidth=1.5,
            label=f"crossover ≈ {crossover:.0f} tokens: beyond it the wrapper\n"
            "is no longer overhead-bound",
        )
    else:
        ax.text(
            0.5,
            0.97,
            "no crossover in the measured range",
            transform=ax.transAxes,
            ha="center",
            va="top",
        )
    first = select(rows, "tokens", "split")[0]
    ax.set_xlabel("num_tokens (log scale)")
    ax.set_ylabel("wrapper time / split time (×)")
    ax.set_title(
        f"Speedup of the split over the wrapper\n({first.num_heads} heads, d_out {first.d_out})"
    )
    ax.grid(True, alpha=0.3)


def _draw_throughput(ax, rows):
    for name in _names(rows):
        found = select(rows, "tokens", name)
        _implementation_line(ax, name, [r.num_tokens for r in found], [r.gflops for r in found])
    ceiling = rows[0].ceiling_gflops
    ax.axhline(ceiling, color="grey", linestyle="--", linewidth=1.5)
    tokens = [r.num_tokens for r in select(rows, "tokens", "wrapper")]
    ax.set_xscale("log", base=2)
    ax.set_xticks(tokens, [str(t) for t in tokens])
    highest = max(r.gflops for r in rows if r.sweep == "tokens")
    ax.set_ylim(0, max(ceiling * 1.3, highest * 1.1))  # no line leaves the plot
    ax.set_xlabel("num_tokens (log scale)")
    ax.set_ylabel("achieved GFLOP/s\n(matmul FLOPs / median time)")
    # The ceiling's value in the title, not beside its line: the lines cross it on some runs.
    ax.set_title(
        "Achieved throughput vs the matmul ceiling\n"
        f"(dashed: large torch.mm, {ceiling:.0f} GFLOP/s)"
    )
    ax.grid(True, alpha=0.3)


def _one_benchmark_plot(draw, rows, *args):
    """A figure holding one benchmark plot, ``draw(ax, rows, *args)``, with its legend below."""
    fig = plots._new_figure(*PLOT_SIZE_IN)
    ax = fig.subplots()
    draw(ax, rows, *args)
    _legend_below(fig, ax)
    return fig


@plots._phone_legible
def plot_time_vs_heads(rows):
    """Median time of each implementation against the head count (``rows`` from mha.bench)."""
    return _one_benchmark_plot(_draw_time_vs_heads, rows)


@plots._phone_legible
def plot_split_speedup(rows, crossover):
    """Wrapper time / split time against sequence length, the overhead-bound span marked."""
    return _one_benchmark_plot(_draw_split_speedup, rows, crossover)


@plots._phone_legible
def plot_throughput(rows):
    """Achieved GFLOP/s of each implementation against sequence length, under the ceiling."""
    return _one_benchmark_plot(_draw_throughput, rows)


@plots._phone_legible
def plot_benchmark(rows, crossover):
    """The three plots, one above the other: what ``python -m mha.bench`` saves as a PNG."""
    width, height = PLOT_SIZE_IN
    fig = plots._new_figure(width, 3 * height - 0.6)
    time_ax, speedup_ax, throughput_ax = fig.subplots(3, 1)
    _draw_time_vs_heads(time_ax, rows)
    _draw_split_speedup(speedup_ax, rows, crossover)
    _draw_throughput(throughput_ax, rows)
    speedup_ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
    _legend_below(fig, time_ax)
    return fig
