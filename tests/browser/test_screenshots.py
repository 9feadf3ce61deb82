"""Every page fits a phone's width, and screenshots at desktop and phone width are saved for review.

Screenshots go to ``_build/screenshots/``: ``NAME-desktop.png`` and ``NAME-phone.png``, the first
screen a reader sees, and ``NAME-phone-open.png``, the whole page with every reveal and solution
open. A whole-page screenshot of a long chapter cost Chromium about 1.6 s of CPU, one screen
0.25 s; the whole closed page at both widths added 25 s a run and showed less than the open one.
The fit to the width is measured on the whole page at both widths, open and closed, either way.

The open page at 390 px is also where every figure's smallest text is measured (at 9 CSS px or
more: test_figure_legibility.py, which measures 360 px on a load of its own) and every figure's
sharpness at that width (test_chapter_pages.py measures 1280 px): each had a load of
the same page at the same width, with every toggle open, of its own. So had axe's runs at that
width in the light scheme (test_accessibility.py), closed and then open: they run here too.
"""

from pathlib import PurePosixPath

import pytest

from .book_site import (
    DESKTOP,
    PHONE,
    SCREENSHOTS,
    figure_sharpness_problems,
    figure_text_size_problems,
    horizontal_overflow_problems,
    wait_for_transitions,
)
from .test_accessibility import SCREENSHOT_PAGES, axe_problems


@pytest.mark.parametrize("path", SCREENSHOT_PAGES)
def test_the_page_fits_a_phone_screen_passes_axe_there_and_screenshots_are_saved(
    visit, book_url, path
):
    """On the phone's page, axe finds no violations with the toggles closed, then open."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = PurePosixPath(path).stem
    problems = []
    for width, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page = visit(f"{book_url}/{path}", viewport=viewport, wait_until="networkidle").page
        wait_for_transitions(page)
        page.screenshot(path=SCREENSHOTS / f"{name}-{width}.png")
        problems += [f"{width}: {p}" for p in horizontal_overflow_problems(page)]
    problems += [f"phone, axe: {p}" for p in axe_problems(page, "closed")]
    problems += [f"phone, axe: {p}" for p in axe_problems(page, "open")]  # opens every toggle
    page.screenshot(path=SCREENSHOTS / f"{name}-phone-open.png", full_page=True)
    problems += [
        f"phone, answers open: {p}"
        for p in horizontal_overflow_problems(page)
        + figure_text_size_problems(page)
        + figure_sharpness_problems(page)
    ]
    assert not problems, "\n".join(problems)
