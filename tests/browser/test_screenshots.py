"""Every page fits a phone's width, and screenshots at desktop and phone width are saved for review.

Screenshots go to ``_build/screenshots/``: ``NAME-desktop.png`` and ``NAME-phone.png``, the first
screen a reader sees, and ``NAME-phone-open.png``, the whole page with every reveal and solution
open. A whole-page screenshot of a long chapter cost Chromium about 1.6 s of CPU, one screen
0.25 s; the whole closed page at both widths added 25 s a run and showed less than the open one.
The fit to the width is measured on the whole page at both widths, open and closed, either way.

The open page at 390 px is also where every figure's smallest text is measured (at 9 CSS px or
more: test_figure_legibility.py, which measures 360 px on a load of its own) and every figure's
sharpness at that width (test_phone_reading.py measures 1280 px): each had a load of
the same page at the same width, with every toggle open, of its own. So had axe's runs at that
width in the light scheme (test_accessibility.py), closed and then open: they run here too.

A chapter's desktop screenshot and its fit at 1280 px are taken on the page test_chapter_pages.py
opens at that width (``desktop_problems``), before it clicks anything; its phone screenshots, fit,
axe runs and figures on the page test_phone_reading.py reads at 390 px (``phone_closed_problems``,
then its one-click check of every hidden box, then ``phone_open_problems``): a load of every
chapter fewer at each width.
"""

import base64
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


def phone_closed_problems(page, name):
    """On a page at 390 px as it loaded (``networkidle``), every toggle closed: saves its first
    screen as ``NAME-phone.png``; where it is wider than the screen, and what axe finds."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    wait_for_transitions(page)
    page.screenshot(path=SCREENSHOTS / f"{name}-phone.png")
    return [f"phone: {p}" for p in horizontal_overflow_problems(page)] + [
        f"phone, axe: {p}" for p in axe_problems(page, "closed")
    ]


def save_whole_page(page, path):
    """Saves the whole page as a PNG, as ``page.screenshot(path=path, full_page=True)`` does,
    with Chromium's faster PNG encoding (a larger file of the same pixels): a chapter open at
    390 px is about 38,000 px tall, and Playwright's encoding of it took about 1.1 s of CPU,
    this 0.7 s."""
    session = page.context.new_cdp_session(page)
    try:
        size = session.send("Page.getLayoutMetrics")["cssContentSize"]
        shot = session.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "optimizeForSpeed": True,
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": size["width"],
                    "height": size["height"],
                    "scale": 1,
                },
            },
        )
    finally:
        session.detach()
    path.write_bytes(base64.b64decode(shot["data"]))


def phone_open_problems(page, name):
    """Then with every toggle open (``axe_problems`` opens them): what axe finds, the whole page
    saved as ``NAME-phone-open.png``, its fit to the screen, and every figure's smallest text and
    sharpness."""
    problems = [f"phone, axe: {p}" for p in axe_problems(page, "open")]
    save_whole_page(page, SCREENSHOTS / f"{name}-phone-open.png")
    return problems + [
        f"phone, answers open: {p}"
        for p in horizontal_overflow_problems(page)
        + figure_text_size_problems(page)
        + figure_sharpness_problems(page)
    ]


#: A chapter's phone page is checked in test_phone_reading.py, on the page it reads at 390 px
#: (``phone_closed_problems`` and ``phone_open_problems``): a load of every chapter fewer.
OTHER_PAGES = [path for path in SCREENSHOT_PAGES if path not in CHAPTER_PAGES]


@pytest.mark.parametrize("path", OTHER_PAGES)
def test_the_page_fits_a_phone_screen_passes_axe_there_and_screenshots_are_saved(
    visit, book_url, path
):
    """On the phone's page, axe finds no violations with the toggles closed, then open."""
    name = PurePosixPath(path).stem
    page = visit(f"{book_url}/{path}", viewport=DESKTOP, wait_until="networkidle").page
    problems = desktop_problems(page, path)
    page = visit(f"{book_url}/{path}", viewport=PHONE, wait_until="networkidle").page
    problems += phone_closed_problems(page, name) + phone_open_problems(page, name)
    assert not problems, "\n".join(problems)
