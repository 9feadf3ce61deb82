"""Figures across the book: one colour-blind-safe palette, the same colour for the same head in every
chapter, ``cividis`` for heatmaps, and every figure drawn by ``mha.plots``."""

import ast
import json
import re

from conftest import CHAPTERS

from mha.plots import HEATMAP_CMAP, OKABE_ITO, head_colour

#: Okabe & Ito, "Color Universal Design" (2008): black, orange, sky blue, bluish green, yellow, blue,
#: vermillion, reddish purple.
PUBLISHED_OKABE_ITO = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
COLOUR_ARGUMENTS = {"c", "color", "colors", "colour", "cmap", "edgecolor", "edgecolors", "facecolor", "facecolors",
                    "ecolor", "markeredgecolor", "markerfacecolor"}
#: Besides the palette: text drawn on dark or light heatmap cells, "no fill", and greys for reference
#: lines and annotations (no hue, so nothing for colour-blind readers to confuse).
NEUTRALS = {"white", "black", "none", "grey", "gray", "dimgrey", "dimgray"}
PLOTS = CHAPTERS / "mha" / "plots.py"
NOTEBOOKS = sorted(CHAPTERS.glob("[0-9]*.ipynb"))


def colour_strings(tree):
    """``(line, text)`` of every string passed as a colour or colormap argument in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in COLOUR_ARGUMENTS:
            for leaf in ast.walk(node.value):
                if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
                    yield node.value.lineno, leaf.value


def allowed(colour):
    return colour.upper() in PUBLISHED_OKABE_ITO or colour.lower() in NEUTRALS or colour == HEATMAP_CMAP


def test_the_palette_is_okabe_ito():
    assert len(OKABE_ITO) == len(PUBLISHED_OKABE_ITO)
    assert {c.upper() for c in OKABE_ITO} == PUBLISHED_OKABE_ITO


def test_head_h_is_the_palettes_hth_colour_and_the_first_eight_heads_all_differ():
    assert [head_colour(h) for h in range(8)] == list(OKABE_ITO)
    assert len({head_colour(h) for h in range(8)}) == 8
    assert all(head_colour(h) in OKABE_ITO for h in range(32))


def test_heatmaps_use_cividis():
    assert HEATMAP_CMAP == "cividis"


def test_the_plots_use_no_colour_outside_the_palette():
    source = PLOTS.read_text()
    hex_codes = set(re.findall(r"#[0-9A-Fa-f]{6}\b", source))
    assert {c.upper() for c in hex_codes} <= PUBLISHED_OKABE_ITO, f"colours outside Okabe–Ito: {hex_codes}"
    stray = [(line, c) for line, c in colour_strings(ast.parse(source)) if not allowed(c)]
    assert not stray, f"plots.py draws with colours outside the palette (line, colour): {stray}"


def code_cells(path):
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            yield "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


def test_chapters_draw_every_figure_through_mha_plots():
    """A chapter that draws with pyplot or picks its own colours breaks 'same head, same colour'."""
    for path in NOTEBOOKS:
        for source in code_cells(path):
            assert not re.search(r"\bpyplot\b|\bplt\.", source), f"{path.name} draws with pyplot:\n{source[:200]}"
            colours = [c for _, c in colour_strings(ast.parse(source))]
            assert not colours, f"{path.name} chooses colours {colours}: draw the figure in mha/plots.py"
