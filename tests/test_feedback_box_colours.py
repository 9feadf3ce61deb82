"""The coloured boxes of answers, checks, hints and solutions are readable in any theme.

A box that paints its own background must paint its own text too: otherwise a dark theme draws
light text on the light box. Every kind of box has a light and a dark variant in
``_static/boxes.css`` and an inline light style (``mha.reveal.BOX_COLOURS``) for JupyterLab, where
that stylesheet is not loaded. Text and background must meet WCAG AA (4.5:1) in every variant.
tests/browser measures the built pages.
"""

import re

import pytest

from conftest import ROOT
from mha.checks import CheckResult
from mha.exercise import Note
from mha.reveal import BOX_COLOURS, Finding, Revealed

BOXES = {
    "passed": CheckResult(True, "Right."),
    "failed": CheckResult(False, "Not this."),
    "hint": Note("Hint 1 of 2", "Look at d_out."),
    "solution": Note("Solution", "answer = 1", code=True),
    "reveal": Revealed((2, 6, 4), "", "Batch and tokens pass through."),
    "finding": Finding("The split was faster: 3.05x."),
}
WCAG_AA = 4.5
STYLESHEET = ROOT / "_static" / "boxes.css"


def relative_luminance(hex_colour):
    channels = [int(hex_colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b):
    light, dark = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def box_style(box):
    style = re.search(r'style="([^"]*)"', box._repr_html_()).group(1)
    return dict(declaration.split(":", 1) for declaration in style.split(";") if declaration)


def stylesheet_colours(theme, kind):
    """``(text, background, border)`` that boxes.css gives a box of ``kind`` in ``theme``."""
    css = STYLESHEET.read_text()
    rule = re.search(rf'html\[data-theme="{theme}"\] \.mha-{kind}\b[^{{]*\{{([^}}]*)\}}', css)
    assert rule, f"boxes.css has no {theme} rule for .mha-{kind}"
    values = dict(re.findall(r"--mha-box-(\w+):\s*(#[0-9a-fA-F]{6})", rule.group(1)))
    return values["text"], values["background"], values["border"]


def test_every_kind_of_box_is_checked_here():
    assert set(BOXES) == set(BOX_COLOURS)


@pytest.mark.parametrize("kind", BOXES)
def test_every_box_carries_its_class_and_an_inline_style_with_aa_contrast(kind):
    html = BOXES[kind]._repr_html_()
    assert f'class="mha-box mha-{kind}"' in html
    style = box_style(BOXES[kind])
    assert "background" in style and "color" in style, f"the box paints {sorted(style)}: set both"
    assert contrast(style["color"], style["background"]) >= WCAG_AA


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("kind", BOXES)
def test_the_stylesheet_gives_every_box_aa_contrast_in_both_themes(kind, theme):
    text, background, border = stylesheet_colours(theme, kind)
    assert contrast(text, background) >= WCAG_AA, (
        f"{kind} in {theme}: {contrast(text, background):.1f}"
    )
    assert contrast(border, background) >= 3, f"the {kind} box's border is hard to see in {theme}"


@pytest.mark.parametrize("kind", BOXES)
def test_the_inline_fallback_is_the_stylesheets_light_variant(kind):
    assert tuple(c.lower() for c in BOX_COLOURS[kind]) == stylesheet_colours("light", kind)


def test_the_contrast_formula_matches_wcags_extremes():
    assert contrast("#000000", "#FFFFFF") == pytest.approx(21)
    assert contrast("#777777", "#777777") == pytest.approx(1)
