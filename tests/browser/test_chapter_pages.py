"""Every chapter page as a reader meets it in a browser.

Checked: toggles, the launch button, errors, routes and "On this page". Reading offline, figures,
the solutions' highlighted code and copy buttons (``solution_problems``, test_solutions.py) and
every figure's sharpness (``figure_sharpness_problems``), on the page with every toggle open at
1280 px in the light theme: test_phone_reading.py, on the page it reads there.
"""

import pytest

from .book_site import (
    BUILD,
    chapters,
    expected_binder_url,
    hidden_cell_problems,
    launch_link_problems,
)
from .test_route_and_contents import route_and_contents_problems
from .test_screenshots import desktop_problems

CHAPTERS = chapters()


@pytest.fixture(params=CHAPTERS, ids=[c.name for c in CHAPTERS])
def chapter(request):
    return request.param


def test_every_chapter_in_the_table_of_contents_was_built():
    assert CHAPTERS, "_toc.yml lists no chapters"
    missing = [c.url_path for c in CHAPTERS if not (BUILD / c.url_path).exists()]
    assert not missing, f"not built (run `make html`): {missing}"


def test_reveals_and_solutions_wait_for_one_click_binder_opens_the_chapter_and_no_errors(
    visit, book_url, chapter
):
    """One page load for three checks of the same page, each of which had a load of its own
    (about 1 s of Chromium's CPU a chapter page): every reveal and solution is hidden until one
    click on its toggle (``hidden_cell_problems``, on the page as it loaded); the Binder button
    opens this chapter from the main branch; and reading the page, opening every toggle and
    scrolling to the end logs no JavaScript error. First, before any click, the page's desktop
    screenshot and its fit at 1280 px (``desktop_problems``, test_screenshots.py), and its route
    paragraphs and "On this page" entries (``route_and_contents_problems``,
    test_route_and_contents.py)."""
    visited = visit(f"{book_url}/{chapter.url_path}", wait_until="networkidle")
    page = visited.page
    problems = desktop_problems(page, chapter.url_path)  # test_screenshots.py's, as loaded
    problems += route_and_contents_problems(page, chapter.name)  # test_route_and_contents.py's
    problems += hidden_cell_problems(page, chapter) + launch_link_problems(page, chapter)
    page.get_by_role("button", name="Launch interactive content").click()
    if not page.locator(f"a[href='{expected_binder_url(chapter)}']").is_visible():
        problems.append("the launch menu opens but shows no Binder link")
    page.keyboard.press("Escape")
    # Every toggle the reveals and solutions left closed. A box's own summary is gone where the
    # page's toggle opens it (_static/reveal.js).
    toggles = page.locator("article details:not(.mha-opened-by-page) > summary")
    for i in range(toggles.count()):
        if not toggles.nth(i).evaluate("summary => summary.parentElement.open"):
            toggles.nth(i).click()
    page.mouse.wheel(0, 100_000)
    page.wait_for_load_state("networkidle")
    problems += visited.errors
    assert not problems, "\n".join(problems)


# Every chapter read offline, with every toggle open (``offline_rendering_problems``,
# ``solution_problems``, ``figure_sharpness_problems``): test_phone_reading.py, on the page it
# reads at 1280 px (a load of every chapter fewer).
