"""Every figure stays legible on a phone: its smallest text shows at 9 CSS px or more, at 390 px (a
common phone) and at 360 px (narrower phones, where ``_static/figures.css`` lets a figure scroll
sideways inside its output box rather than shrink), and the page never scrolls sideways.

At 390 px this is measured by test_screenshots.phone_open_problems, on the page
test_phone_reading.py already opens at that width with every toggle open (a second load here cost
about 2 s of Chromium's CPU a chapter)."""

import re

import pytest

from .book_site import (
    BUILD,
    NARROW_PHONE,
    chapters,
    figure_text_size_problems,
    horizontal_overflow_problems,
    open_every_toggle,
)

CHAPTERS = [c for c in chapters() if c.figures_in_notebook()]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.name for c in CHAPTERS])
def test_the_smallest_text_of_every_figure_shows_at_9_css_px_or_more_on_a_narrow_phone(
    visit, book_url, chapter
):
    page = visit(
        f"{book_url}/{chapter.url_path}", viewport=NARROW_PHONE, wait_until="networkidle"
    ).page
    open_every_toggle(page)
    problems = figure_text_size_problems(page) + horizontal_overflow_problems(page)
    assert not problems, "\n".join(problems)


def test_the_figure_stylesheet_is_in_every_chapter_page():
    """Read from the built files: the browser is not needed to find a link in the HTML."""
    for chapter in CHAPTERS:
        html = (BUILD / chapter.url_path).read_text()
        links = re.findall(r'<link rel="stylesheet"[^>]*href="[^"]*_static/figures\.css', html)
        assert len(links) == 1, f"{chapter.name}: {len(links)} links to figures.css"
