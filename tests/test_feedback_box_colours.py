"""The coloured boxes a reader's checks, hints and solutions show are readable in any theme.

A box that paints its own background must paint its own text too: otherwise a dark theme (JupyterLab's,
or the book's) draws light text on the light box. Both colours together must meet WCAG AA (4.5:1).
"""

import re

import pytest

from mha.checks import CheckResult, Note

BOXES = {
    "check passed": CheckResult(True, "Right."),
    "check failed": CheckResult(False, "Not this."),
    "hint": Note("Hint 1 of 2", "Look at d_out."),
    "solution": Note("Solution", "answer = 1", code=True),
}
WCAG_AA = 4.5


def relative_luminance(hex_colour):
    channels = [int(hex_colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b):
    light, dark = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def box_style(box):
    style = re.search(r'style="([^"]*)"', box._repr_html_()).group(1)
    return dict(declaration.split(":", 1) for declaration in style.split(";") if declaration)


@pytest.mark.parametrize("box", BOXES.values(), ids=BOXES.keys())
def test_every_feedback_box_sets_its_text_colour_against_its_background_with_aa_contrast(box):
    style = box_style(box)
    assert "background" in style and "color" in style, f"the box paints {sorted(style)}: set both color and background"
    assert contrast(style["color"], style["background"]) >= WCAG_AA


def test_the_contrast_formula_matches_wcags_extremes():
    assert contrast("#000000", "#FFFFFF") == pytest.approx(21)
    assert contrast("#777777", "#777777") == pytest.approx(1)
