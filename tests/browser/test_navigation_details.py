"""Navigation details of issue 19, as a reader meets them at 390, 900 and 1280 px.

- a tap on an entry of "On this page" scrolls to that section and closes the drawer (on a phone
  and a tablet it is a dialog over the page; on a desktop a column that stays);
- the top of the page holds no lone duplicate search field and no empty band: the first thing
  under the window's top edge is the article's own header, with one search;
- every page has a favicon, and loading a page requests nothing that is not there;
- the phone's menu names the book once (issue 46: its title, then an entry of the same words).
"""

import pytest

from .book_site import CONFIG, DESKTOP, PHONE, TABLET, chapters, landing_page

CHAPTERS = chapters()
CONFIG_TITLE = CONFIG["title"]
VIEWPORTS = [PHONE, TABLET, DESKTOP]
WIDTHS = [f"{v['width']}px" for v in VIEWPORTS]
#: Between the theme's breakpoints: 960-991 px showed an empty band, 992 px up a second search.
TOP_BAR_WIDTHS = [390, 900, 960, 975, 991, 992, 1280]


def open_drawer(page):
    """Open "On this page" as a reader would, at any width; returns its visible panel."""
    toggle = page.locator(".secondary-toggle:visible")
    if toggle.count():
        toggle.click()
        panel = page.locator("#pst-secondary-sidebar-modal")
        panel.wait_for(state="visible", timeout=5_000)
        return panel
    return page.locator("#pst-secondary-sidebar")


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_a_tap_on_an_entry_of_on_this_page_goes_there_and_closes_the_drawer(
    visit, book_url, viewport
):
    """First, on the page as it loaded, ``favicon_problems``: chapter 1's part of the favicon
    test below, which had loads of its own at the same widths (about 1 s of CPU each)."""
    visited = visit(
        f"{book_url}/{CHAPTERS[0].url_path}", viewport=viewport, wait_until="networkidle"
    )
    page = visited.page
    problems = favicon_problems(visited)
    assert not problems, "\n".join(problems)
    panel = open_drawer(page)
    entries = panel.locator("nav a[href^='#']")
    entry = entries.nth(entries.count() // 2)  # a section in the middle of the page
    assert entry.is_visible()
    target = entry.get_attribute("href")
    entry.click()
    heading = page.locator(f"[id='{target[1:]}']")
    page.wait_for_function(
        "id => { const top = document.getElementById(id).getBoundingClientRect().top;"
        " return top >= 0 && top < 150; }",
        arg=target[1:],
        timeout=5_000,
    )
    assert heading.is_visible()
    dialogs_open = page.evaluate(
        "[...document.querySelectorAll('dialog')].filter(d => d.open).length"
    )
    assert dialogs_open == 0, (
        "the drawer stays open over the page after a tap on one of its entries"
    )
    covering = page.evaluate(
        "() => { const e = document.elementFromPoint(innerWidth / 2, innerHeight / 2);"
        " return !!e.closest('dialog, .bd-sidebar-secondary'); }"
    )
    assert not covering, "the middle of the screen shows the page's contents, not the page"
    if viewport is DESKTOP:
        assert page.locator("#pst-secondary-sidebar nav a").first.is_visible(), (
            "on a desktop the contents column stays"
        )


@pytest.mark.parametrize("width", TOP_BAR_WIDTHS, ids=lambda w: f"{w}px")
def test_the_top_of_the_page_is_the_articles_header_with_one_search(visit, book_url, width):
    page = visit(
        f"{book_url}/{CHAPTERS[0].url_path}", viewport={"width": width, "height": 800}
    ).page
    header = page.locator(".bd-header-article")
    box = header.bounding_box()
    assert box and box["y"] < 1, (
        f"the article's header starts {box and box['y']:.0f} px down: a band above it"
    )
    searches = page.locator(".search-button-field:visible, .search-button:visible")
    in_header = page.locator(
        ".bd-header .search-button-field:visible, .bd-header .search-button:visible"
    )
    assert in_header.count() == 0, "the theme's top bar shows a search of its own"
    assert searches.count() == 1, f"{searches.count()} search buttons in view; one is enough"
    searches.first.click()
    page.locator("#pst-search-dialog").wait_for(state="visible", timeout=5_000)


def favicon_problems(visited):
    """The page declares a favicon that is an icon file, and requested nothing that is not there.

    ``visit`` records every response from the first request on: no reload is needed to see
    them (it was a second load of each page)."""
    if visited.missing:
        return [f"the page requests what is not there: {visited.missing}"]
    icon = visited.page.locator("link[rel~='icon']")
    if icon.count() != 1:
        return ["the page declares no favicon"]
    href = icon.evaluate("link => link.href")
    response = visited.page.request.get(href)
    if response.status != 200 or response.body()[:4] != b"\x00\x00\x01\x00":
        return [f"the favicon {href} is not an icon file"]
    return []


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_every_page_has_a_favicon_and_requests_nothing_missing(visit, book_url, viewport):
    """The landing page; chapter 1 at the same widths: the tap test above, on its page."""
    visited = visit(f"{book_url}/{landing_page()}", viewport=viewport, wait_until="networkidle")
    problems = favicon_problems(visited)
    assert not problems, "\n".join(problems)


def test_the_phones_menu_names_the_book_once(visit, book_url):
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}", viewport=PHONE).page
    page.locator(".primary-toggle:visible").first.click()
    page.locator(".bd-sidenav:visible").first.wait_for(state="visible", timeout=5_000)
    shown = page.evaluate(
        """title => [...document.querySelectorAll('dialog *, .bd-sidebar-primary *')]
            .filter(e => e.checkVisibility() && e.children.length === 0
                         && e.textContent.trim() === title).length""",
        CONFIG_TITLE,
    )
    assert shown == 1, f"the phone's menu shows the book's title {shown} times"
