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

A chapter's desktop screenshot and its fit at 1280 px are taken on the page test_chapter_pages.py
opens at that width (``desktop_problems``), before it clicks anything: a load of every chapter
fewer.
"""

from pathlib import PurePosixPath

import pytest

from .book_site import (
    DESKTOP,
    PHONE,
    SCREENSHOTS,
    chapters,
    figure_sharpness_problems,
    figure_text_size_problems,
    horizontal_overflow_problems,
    wait_for_transitions,
)
from .test_accessibility import SCREENSHOT_PAGES, axe_problems

CHAPTER_PAGES = {chapter.url_path for chapter in chapters()}


def desktop_problems(page, path):
    """Saves ``path``'s first screen at 1280 px, as loaded (``networkidle``), as
    ``NAME-desktop.png``; returns where the page is wider than the screen."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    wait_for_transitions(page)
    page.screenshot(path=SCREENSHOTS / f"{PurePosixPath(path).stem}-desktop.png")
    return [f"desktop: {p}" for p in horizontal_overflow_problems(page)]


@pytest.mark.parametrize("path", SCREENSHOT_PAGES)
def test_the_page_fits_a_phone_screen_passes_axe_there_and_screenshots_are_saved(
    visit, book_url, path
):
    """On the phone's page, axe finds no violations with the toggles closed, then open."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = PurePosixPath(path).stem
    problems = []
    if path not in CHAPTER_PAGES:  # a chapter's: test_chapter_pages.py
        page = visit(f"{book_url}/{path}", viewport=DESKTOP, wait_until="networkidle").page
        problems += desktop_problems(page, path)
    page = visit(f"{book_url}/{path}", viewport=PHONE, wait_until="networkidle").page
    wait_for_transitions(page)
    page.screenshot(path=SCREENSHOTS / f"{name}-phone.png")
    problems += [f"phone: {p}" for p in horizontal_overflow_problems(page)]
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
