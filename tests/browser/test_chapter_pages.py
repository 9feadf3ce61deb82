"""Every chapter page as a reader meets it in a browser.

Checked: toggles, figures, the launch button, errors, and reading offline.
"""

import pytest

from .book_site import (
    BUILD,
    chapters,
    expected_binder_url,
    hidden_cell_problems,
    launch_link_problems,
    offline_rendering_problems,
    open_every_toggle,
)

CHAPTERS = chapters()


@pytest.fixture(params=CHAPTERS, ids=[c.name for c in CHAPTERS])
def chapter(request):
    return request.param


def test_every_chapter_in_the_table_of_contents_was_built():
    assert CHAPTERS, "_toc.yml lists no chapters"
    missing = [c.url_path for c in CHAPTERS if not (BUILD / c.url_path).exists()]
    assert not missing, f"not built (run `make html`): {missing}"


def test_every_reveal_and_solution_is_hidden_until_one_click_on_its_toggle(
    visit, book_url, chapter
):
    problems = hidden_cell_problems(visit(f"{book_url}/{chapter.url_path}").page, chapter)
    assert not problems, "\n".join(problems)


def test_the_binder_button_opens_this_chapter_from_the_main_branch(visit, book_url, chapter):
    page = visit(f"{book_url}/{chapter.url_path}").page
    problems = launch_link_problems(page, chapter)
    assert not problems, "\n".join(problems)
    page.get_by_role("button", name="Launch interactive content").click()
    binder = page.locator(f"a[href='{expected_binder_url(chapter)}']")
    assert binder.is_visible(), "the launch menu opens but shows no Binder link"


def test_reading_the_page_and_opening_every_toggle_logs_no_javascript_errors(
    visit, book_url, chapter
):
    visited = visit(f"{book_url}/{chapter.url_path}", wait_until="networkidle")
    # A box's own summary is gone where the page's toggle opens it (_static/reveal.js).
    toggles = visited.page.locator("article details:not(.mha-opened-by-page) > summary")
    for i in range(toggles.count()):
        toggles.nth(i).click()
    visited.page.mouse.wheel(0, 100_000)
    visited.page.wait_for_load_state("networkidle")
    assert not visited.errors, "\n".join(visited.errors)


def test_text_code_and_figures_render_with_every_outside_request_blocked(visit, book_url, chapter):
    """And every figure the notebook outputs has loaded, with alt text that says what it shows
    (``figure_problems``: it had a test and a page load of its own, for the same verdict; every
    figure is on this machine, so blocking the others changes nothing for it)."""
    visited = visit(f"{book_url}/{chapter.url_path}", offline=True, wait_until="networkidle")
    open_every_toggle(visited.page)
    problems = offline_rendering_problems(visited.page, visited.blocked, chapter)
    assert not problems, "\n".join(problems)
