"""Figures across the book: one palette, one look, legible on a phone.

One colour-blind-safe palette, the same colour for the same head in every chapter, ``cividis`` for
heatmaps, every figure drawn by ``mha.plots``, and every figure legible on a phone (the criterion
at the top of ``mha/plots.py``).
"""

import ast
import inspect
import io
import itertools
import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.colors import to_rgb
from PIL import Image

from conftest import CHAPTERS
from mha import (
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    example_batch,
    plots,
    plots_bench,
    plots_rotary,
)
from mha.bench import overhead_crossover
from mha.plots import (
    FIGURE_DENSITY,
    FIGURE_DPI,
    HEAD_COLOURS,
    HEATMAP_CMAP,
    MAX_WIDTH_IN,
    MIN_TEXT_PT,
    OKABE_ITO,
    PHONE_MIN_WIDTH_PX,
    head_colour,
)
from mha.rotary import angles, rotate
from test_bench import both_sweeps

#: Okabe & Ito, "Color Universal Design" (2008): black, orange, sky blue, bluish green, yellow,
#: blue, vermillion, reddish purple.
PUBLISHED_OKABE_ITO = {
    "#000000",
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#F0E442",
    "#0072B2",
    "#D55E00",
    "#CC79A7",
}
#: Paul Tol, "Colour schemes" (SRON/EPS/TN/09-002, 2021), the "muted" scheme: where the
#: benchmark's implementations take their colours (``plots_bench.IMPLEMENTATION_PALETTE``).
PUBLISHED_TOL_MUTED = {
    "#CC6677",
    "#332288",
    "#DDCC77",
    "#117733",
    "#88CCEE",
    "#882255",
    "#44AA99",
    "#999933",
    "#AA4499",
}
#: Which published palette each drawing module may take hex colours from.
PALETTES = {"plots_bench.py": PUBLISHED_OKABE_ITO | PUBLISHED_TOL_MUTED}
COLOUR_ARGUMENTS = {
    "c",
    "color",
    "colors",
    "colour",
    "cmap",
    "edgecolor",
    "edgecolors",
    "facecolor",
    "facecolors",
    "ecolor",
    "markeredgecolor",
    "markerfacecolor",
}
#: Besides the palette: text drawn on dark or light heatmap cells, "no fill", and greys for
#: reference lines and annotations (no hue, so nothing for colour-blind readers to confuse).
NEUTRALS = {"white", "black", "none", "grey", "gray", "dimgrey", "dimgray"}
#: Every module that draws: the shared one and each chapter's own.
PLOTS = sorted((CHAPTERS / "mha").glob("plots*.py"))
NOTEBOOKS = sorted(CHAPTERS.glob("[0-9]*.ipynb"))


def colour_strings(tree):
    """``(line, text)`` of every string passed as a colour or colormap argument in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in COLOUR_ARGUMENTS:
            for leaf in ast.walk(node.value):
                if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
                    yield node.value.lineno, leaf.value


def allowed(colour, palette=PUBLISHED_OKABE_ITO):
    return colour.upper() in palette or colour.lower() in NEUTRALS or colour == HEATMAP_CMAP


def test_the_palette_is_okabe_ito():
    assert len(OKABE_ITO) == len(PUBLISHED_OKABE_ITO)
    assert {c.upper() for c in OKABE_ITO} == PUBLISHED_OKABE_ITO


def test_head_h_is_the_palettes_hth_hue_and_the_first_seven_heads_all_differ():
    assert [head_colour(h) for h in range(7)] == list(HEAD_COLOURS) == list(OKABE_ITO[:7])
    assert len({head_colour(h) for h in range(7)}) == 7
    assert all(head_colour(h) in HEAD_COLOURS for h in range(32))
    assert "#000000" not in HEAD_COLOURS, "black is for what is not a head (dots, implementations)"


def lab(colour):
    """CIELAB (D65) coordinates of ``colour``: distances there follow what the eye sees."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    x, y, z = (
        sum(w * c for w, c in zip(row, linear, strict=True)) / white
        for row, white in (
            ((0.4124, 0.3576, 0.1805), 0.9505),
            ((0.2126, 0.7152, 0.0722), 1.0),
            ((0.0193, 0.1192, 0.9505), 1.089),
        )
    )
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z))
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def contrast_on_white(colour):
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return 1.05 / (luminance + 0.05)


def test_implementations_never_share_a_colour_with_a_head_and_each_has_its_own_look():
    head_rgbs = {to_rgb(c) for c in HEAD_COLOURS}
    styles = plots_bench.IMPLEMENTATION_STYLES
    assert not {name for name, (colour, _) in styles.items() if to_rgb(colour) in head_rgbs}
    looks = [
        (to_rgb(colour), marker, str(plots_bench.IMPLEMENTATION_LINESTYLES[name]))
        for name, (colour, marker) in styles.items()
    ]
    assert len({look[1] for look in looks}) == len(looks), "each implementation needs its marker"
    assert len({look[2] for look in looks}) == len(looks), "and its line style"
    assert len({look[0] for look in looks}) == len(looks), "and its colour"
    assert all(
        plots_bench.implementation_colour(name) == style[0] for name, style in styles.items()
    )


def test_implementation_colours_are_far_from_every_head_colour_and_from_each_other():
    palette = plots_bench.IMPLEMENTATION_PALETTE
    assert {colour for colour, _ in plots_bench.IMPLEMENTATION_STYLES.values()} <= set(palette)
    for colour in palette:
        nearest = min(math.dist(lab(colour), lab(head)) for head in HEAD_COLOURS)
        assert nearest >= 20, f"{colour} is {nearest:.0f} CIELAB units from a head colour"
    for a, b in itertools.combinations(palette, 2):
        assert math.dist(lab(a), lab(b)) >= 25, f"{a} and {b} are too alike"


def test_implementation_colours_stand_out_on_the_white_figures_keep_in_the_dark_theme():
    low = {c: contrast_on_white(c) for c in plots_bench.IMPLEMENTATION_PALETTE}
    assert all(ratio >= 3 for ratio in low.values()), low


def test_heatmaps_use_cividis():
    assert HEATMAP_CMAP == "cividis"


@pytest.mark.parametrize("module", PLOTS, ids=lambda p: p.name)
def test_the_plots_use_no_colour_outside_the_palette(module):
    source = module.read_text()
    palette = PALETTES.get(module.name, PUBLISHED_OKABE_ITO)
    hex_codes = set(re.findall(r"#[0-9A-Fa-f]{6}\b", source))
    assert {c.upper() for c in hex_codes} <= palette, f"colours outside the palette: {hex_codes}"
    stray = [(line, c) for line, c in colour_strings(ast.parse(source)) if not allowed(c, palette)]
    assert not stray, f"{module.name} draws outside the palette (line, colour): {stray}"


def code_cells(path):
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            yield "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


def test_chapters_draw_every_figure_through_mha_plots():
    """A chapter that draws with pyplot or picks its own colours breaks 'same head, same colour'."""
    for path in NOTEBOOKS:
        for source in code_cells(path):
            assert not re.search(r"\bpyplot\b|\bplt\.", source), (
                f"{path.name} draws with pyplot:\n{source[:200]}"
            )
            colours = [c for _, c in colour_strings(ast.parse(source))]
            assert not colours, (
                f"{path.name} chooses colours {colours}: draw the figure in mha/plots.py"
            )


# ---------------------------------------------------------------------------------------------
# Every figure is legible on a phone
# ---------------------------------------------------------------------------------------------

#: The smallest text a phone reader is asked to read, in CSS px (tests/browser checks the built
#: pages).
MIN_PHONE_TEXT_PX = 9
#: The book's column at a 390 px phone width, in CSS px.
PHONE_COLUMN_PX = 342
#: WCAG's contrast ratio for normal-size text.
MIN_CONTRAST = 4.5


def chapter_figures():
    """``{name: figure}``: every figure of ``mha.plots``, ``mha.plots_bench`` and
    ``mha.plots_rotary``.

    Each figure is drawn as the chapters call it.
    """
    batch = example_batch()  # (2, num_tokens, d_in)
    torch.manual_seed(123)
    wrapper = MultiHeadAttentionWrapper(d_in=3, d_out=2, context_length=6, dropout=0.0, num_heads=3)
    torch.manual_seed(123)
    two_dim = MultiHeadAttentionWrapper(d_in=3, d_out=1, context_length=6, dropout=0.0, num_heads=2)
    split = MultiHeadAttention.from_wrapper(wrapper)
    rows = both_sweeps()  # synthetic timings: a figure test measures nothing
    with torch.no_grad():
        queries = split.split_heads(split.W_query(batch))  # (b, num_heads, num_tokens, head_dim)
        keys = split.split_heads(split.W_key(batch))  # (b, num_heads, num_tokens, head_dim)
        scores = (queries @ keys.transpose(2, 3)).masked_fill(split.mask, -torch.inf)
        attn_weights = torch.softmax(
            scores / split.head_dim**0.5, dim=-1
        )  # (b, num_heads, num_tokens, num_tokens)
        first_sequence_queries = split.W_query(batch)[0]  # (num_tokens, d_out)
        return {
            "plot_concatenated_output": plots.plot_concatenated_output(
                wrapper(batch)[0], num_heads=3
            ),
            "plot_two_dim_context": plots.plot_two_dim_context(two_dim(batch)[0]),
            "plot_combined_weight": plots.plot_combined_weight(split.W_query.weight.T, 3),
            "plot_heads_in_combined_weight": plots.plot_heads_in_combined_weight(
                [head.W_query.weight.T for head in wrapper.heads], split.W_query.weight.T
            ),
            "plot_split_heads": plots.plot_split_heads(first_sequence_queries, 3),
            "plot_split_heads_without_transpose": plots.plot_split_heads_without_transpose(
                first_sequence_queries, 3
            ),
            "plot_attention_per_head": plots.plot_attention_per_head(attn_weights[0]),
            "plot_time_vs_heads": plots_bench.plot_time_vs_heads(rows),
            "plot_split_speedup": plots_bench.plot_split_speedup(
                rows, overhead_crossover(rows) or 4.0
            ),
            "plot_split_speedup (no crossover)": plots_bench.plot_split_speedup(rows, None),
            "plot_throughput": plots_bench.plot_throughput(rows),
            "plot_benchmark": plots_bench.plot_benchmark(rows, overhead_crossover(rows)),
            "plot_turning_pairs": plots_rotary.plot_turning_pairs(
                rotate(torch.randn(2, 6, 8), rotary_dim=8), angles(2, 0, 8)[1]
            ),
            "plot_reordered_weight": plots_rotary.plot_reordered_weight(
                split.W_query.weight.T, 3, torch.tensor([1, 0])
            ),
        }


@dataclass
class SavedFigure:
    width_px: int
    texts: list  # every DrawnText, in drawing order


@dataclass
class DrawnText:
    text: str
    points: float
    colour: tuple  # RGB
    background: tuple | None  # RGB of the box drawn behind the text, if it has one


def save_as_jupyter_does(fig, monkeypatch):
    """Save ``fig`` as the inline backend does, recording every text drawn.

    The inline backend saves a PNG at the figure's dpi with a tight bounding box.
    """
    texts = []
    draw_text = RendererAgg.draw_text

    def recording(renderer, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            box = mtext.get_bbox_patch() if mtext is not None else None
            texts.append(
                DrawnText(
                    s,
                    prop.get_size_in_points(),
                    gc.get_rgb()[:3],
                    box.get_facecolor()[:3] if box is not None else None,
                )
            )
        return draw_text(renderer, gc, x, y, s, prop, angle, ismath, mtext)

    with monkeypatch.context() as patch:
        patch.setattr(RendererAgg, "draw_text", recording)
        png = io.BytesIO()
        fig.savefig(png, format="png", bbox_inches="tight")
    return SavedFigure(Image.open(png).width, texts)


@pytest.fixture(scope="module")
def saved_figures():
    with pytest.MonkeyPatch.context() as monkeypatch:
        return {
            name: save_as_jupyter_does(fig, monkeypatch) for name, fig in chapter_figures().items()
        }


def contrast(a, b):
    """WCAG contrast ratio of two RGB colours."""

    def luminance(rgb):
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_every_figure_function_in_plots_is_checked_here(saved_figures):
    functions = {
        name
        for module in (plots, plots_bench, plots_rotary)
        for name, f in inspect.getmembers(module, inspect.isfunction)
        if name.startswith("plot_") and f.__module__ == module.__name__
    }
    checked = {name.split(" ")[0] for name in saved_figures}
    assert functions == checked, (
        f"add these figure functions to chapter_figures(): {functions - checked}"
    )


def test_every_figure_is_at_most_550_px_wide_as_jupyter_saves_it(saved_figures):
    too_wide = {
        name: f.width_px
        for name, f in saved_figures.items()
        if f.width_px > MAX_WIDTH_IN * FIGURE_DPI
    }
    assert not too_wide, f"wider than {MAX_WIDTH_IN} in at {FIGURE_DPI} dpi (px): {too_wide}"


def test_no_text_in_any_figure_is_smaller_than_11_pt_tick_labels_and_cell_values_included(
    saved_figures,
):
    small = {
        name: sorted({(t.points, t.text) for t in f.texts if t.points < MIN_TEXT_PT})
        for name, f in saved_figures.items()
    }
    small = {name: texts for name, texts in small.items() if texts}
    assert not small, f"text under {MIN_TEXT_PT} pt (size, text): {small}"
    assert all(f.texts for f in saved_figures.values()), (
        "the recorder saw no text: is it still hooked in?"
    )


def test_every_text_is_legible_on_its_background_and_none_is_written_in_a_light_head_colour(
    saved_figures,
):
    """Every text is black, white or grey, and readable on what lies behind it.

    Text on white (no box) is black, white-on-a-dark-cell or grey; head labels are black on a light
    tint.
    """
    head_colours = {to_rgb(c) for c in OKABE_ITO} - {to_rgb("black")}
    problems = []
    for name, f in saved_figures.items():
        for t in f.texts:
            if tuple(t.colour) in head_colours:
                problems.append(f"{name}: {t.text!r} is written in a head's colour")
            elif t.background is not None and contrast(t.colour, t.background) < MIN_CONTRAST:
                problems.append(
                    f"{name}: {t.text!r} has contrast "
                    f"{contrast(t.colour, t.background):.1f} on its box"
                )
    assert not problems, "\n".join(problems)


def test_head_labels_are_framed_in_the_heads_colour_on_a_tint_of_it():
    for h in range(len(OKABE_ITO)):
        label = plots.head_label(h)
        assert label["color"] == "black"
        assert label["bbox"]["edgecolor"] == head_colour(h)
        assert contrast(to_rgb("black"), label["bbox"]["facecolor"]) >= MIN_CONTRAST


def smallest_text_px(shown_width_px):
    """CSS px of MIN_TEXT_PT in a figure of the largest allowed width.

    The figure is shown ``shown_width_px`` wide.
    """
    return MIN_TEXT_PT / 72 * FIGURE_DPI * shown_width_px / (MAX_WIDTH_IN * FIGURE_DPI)


def test_the_criterion_keeps_text_at_9_css_px_on_a_phone():
    """Text stays at 9 CSS px or more in a 390 px phone's column.

    It does too at the width where figures.css stops shrinking figures.
    """
    assert smallest_text_px(PHONE_COLUMN_PX) >= MIN_PHONE_TEXT_PX
    assert smallest_text_px(PHONE_MIN_WIDTH_PX) >= MIN_PHONE_TEXT_PX
    css = (CHAPTERS.parent / "_static" / "figures.css").read_text()
    assert f"max(100%, {PHONE_MIN_WIDTH_PX}px)" in css, (
        "figures.css and PHONE_MIN_WIDTH_PX disagree"
    )


# ---------------------------------------------------------------------------------------------
# Sharp figures, no stray ticks, masked cells marked
# ---------------------------------------------------------------------------------------------

SHOW_IN_IPYTHON = """
import base64, io, json, sys
sys.path.insert(0, sys.argv[1])
from IPython.terminal.interactiveshell import TerminalInteractiveShell
shell = TerminalInteractiveShell.instance()
shell.run_line_magic("matplotlib", "inline")
from mha import plots  # importing it is all a chapter does
from matplotlib.figure import Figure
fig = Figure(figsize=(3, 2), dpi=plots.FIGURE_DPI)
fig.subplots().plot([0, 1])
shell.run_line_magic("matplotlib", "inline")  # a chapter may run it again after the import
formatters = shell.display_formatter.formatters  # what Jupyter asks for: PNG and text
formatters["image/png"].enabled = True  # a terminal shell shows only text
png, metadata = formatters["image/png"](fig)
from PIL import Image
png = Image.open(io.BytesIO(base64.b64decode(png)))
print(json.dumps([png.width, metadata["width"], formatters["text/plain"](fig)]))
"""


def test_in_jupyter_a_figure_is_a_png_of_twice_its_pixels_shown_at_its_size_text_repr_unchanged():
    """Sharp on high-density screens; strict nbval compares the text repr, which must not change."""

    result = subprocess.run(
        [sys.executable, "-c", SHOW_IN_IPYTHON, str(CHAPTERS)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    natural, shown, text = json.loads(result.stdout.strip().splitlines()[-1])
    assert FIGURE_DENSITY >= 2
    assert natural >= FIGURE_DENSITY * shown - 2, f"a {shown} px figure has only {natural} px"
    assert shown <= 3 * FIGURE_DPI
    assert text == "<Figure size 300x200 with 1 Axes>"


def stray_ticks(fig):
    """``(axes title, axis)`` of every axis that draws tick marks with no label beside them."""
    fig.draw_without_rendering()  # tick labels get their text when the figure is drawn
    found = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            ticks = [t for t in axis.get_major_ticks() if t.get_visible()]
            marks = [t for t in ticks if t.tick1line.get_visible() or t.tick2line.get_visible()]
            labelled = [
                t
                for t in ticks
                if (t.label1.get_visible() and t.label1.get_text())
                or (t.label2.get_visible() and t.label2.get_text())
            ]
            if marks and not labelled:
                found.append((ax.get_title(), name))
    return found


def test_no_figure_draws_tick_marks_without_labels():
    figures = chapter_figures()
    stray = {name: found for name, fig in figures.items() for found in [stray_ticks(fig)] if found}
    assert not stray, f"tick marks with no labels (a panel sharing its neighbour's?): {stray}"


def test_the_stray_tick_check_sees_ticks_left_without_labels():
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().set_yticks(range(3), [])
    assert stray_ticks(fig)


def test_masked_attention_cells_are_hatched_so_they_never_look_like_small_weights():
    torch.manual_seed(0)
    later = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)  # (num_tokens, num_tokens)
    scores = torch.randn(2, 4, 4).masked_fill(later, -torch.inf)
    weights = torch.softmax(scores, dim=-1)  # (num_heads, num_tokens, num_tokens)
    weights[0, 3, 0] = 1e-6  # a tiny weight that is not masked
    fig = plots.plot_attention_per_head(weights)
    for h, ax in enumerate(fig.axes[:2]):
        hatches = [p.get_path() for p in ax.patches if p.get_hatch()]  # in data coordinates
        cells = itertools.product(range(4), range(4))  # (col, row): x, y of the cell's centre
        hatched = {cell for cell in cells if any(h.contains_point(cell) for h in hatches)}
        masked = {(col, row) for row in range(4) for col in range(4) if col > row}
        assert hatched == masked, f"head {h + 1}: hatched {sorted(hatched)}, not {sorted(masked)}"
