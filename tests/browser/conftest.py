"""Browser fixtures: a Chromium (found, never installed: that is `make chromium`), the built book
served on 127.0.0.1, and fresh pages that record what went wrong in them.

Every test under tests/browser carries the ``browser`` marker, so ``pytest -m "not browser"``
leaves them out.
"""

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Page, sync_playwright

from chromium import CHROMIUM_ARGS, MISSING, find_chromium  # .ci/chromium.py (pytest pythonpath)

from .book_site import BUILD, DESKTOP, clear_site_data, is_local, serve

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium():
    """The Chromium ``make chromium`` found or installed; fails in one line if there is none."""
    path = find_chromium()
    if path is None:
        pytest.fail(MISSING, pytrace=False)
    return path


@pytest.fixture(scope="session")
def book_url():
    """The built book, served from _build/html."""
    if not (BUILD / "index.html").exists():
        pytest.fail(f"No built book in {BUILD}: run `make html` first.")
    with serve(BUILD) as url:
        yield url


@pytest.fixture(scope="session")
def browser(chromium):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@dataclass
class Visit:
    """A page a reader opened, with what went wrong while it was open."""

    page: Page
    errors: list = field(default_factory=list)  # console errors and uncaught exceptions
    blocked: list = field(
        default_factory=list
    )  # (resource type, url) of requests that left this machine
    missing: list = field(default_factory=list)  # "status url" of responses 400 and up


@pytest.fixture(scope="session")
def reading_page(browser):
    """``reading_page(viewport, color_scheme)``: a new page at that size and colour scheme, in the
    one browser context kept for the whole run, whatever the size and scheme. A page in a fresh
    context cost about 2 s of the machine's CPU here (a new renderer and an empty HTTP cache:
    every stylesheet and script fetched and compiled again); a new page in a warm context under
    1 s, and the browser suite opens hundreds, at a dozen sizes in two schemes (a context for
    each cost a cold start for each). The page's size and scheme are set before it loads
    anything, as a context's own would be (``set_viewport_size``, ``emulate_media``).

    The context keeps one blank page open all along: a chapter page opened in a context with
    another page open cost about 0.85 s of CPU, in a context with none 1.6 s (measured on
    Chromium 156, three chapters, all of its processes counted: both the browser process and the
    page's new renderer cost less; why, we did not establish)."""
    context = browser.new_context(viewport=DESKTOP, color_scheme="light")
    context.new_page()  # kept open (about:blank), see above

    def new_page(viewport, color_scheme):
        page = context.new_page()
        page.set_viewport_size(viewport)
        page.emulate_media(color_scheme=color_scheme)
        return page

    yield new_page
    context.close()


@pytest.fixture
def visit(reading_page):
    """``visit(url, viewport=DESKTOP, color_scheme="light", offline=False)``: open ``url`` in a new
    page, as a reader would meet it: the origin's stored data (the theme choice, guesses) is
    cleared first, so no test inherits another's. ``offline=True`` blocks, and records, every
    request that is not to 127.0.0.1. ``init_script`` runs in the page before any of its own
    scripts; ``permissions`` (such as ``["clipboard-read"]``) are granted to the page's origin
    for this test only. The pages close when the test ends. The ``Visit`` records console errors,
    uncaught exceptions and every response of status 400 and up from the first request on."""
    opened = []

    def open_page(
        url,
        *,
        viewport=DESKTOP,
        color_scheme="light",
        offline=False,
        wait_until="load",
        init_script=None,
        permissions=(),
    ):
        page = reading_page(viewport, color_scheme)
        opened.append(page)
        origin = "{0.scheme}://{0.netloc}".format(urlparse(url))
        if origin.startswith("http"):
            clear_site_data(page, url)
        if permissions:
            page.context.grant_permissions(list(permissions), origin=origin)
        if init_script:
            page.add_init_script(init_script)
        visit = Visit(page)
        page.on(
            "console",
            lambda message: (
                message.type == "error" and visit.errors.append(f"console: {message.text}")
            ),
        )
        page.on("pageerror", lambda error: visit.errors.append(f"uncaught: {error}"))
        page.on(
            "response",
            lambda response: (
                response.status >= 400 and visit.missing.append(f"{response.status} {response.url}")
            ),
        )
        if offline:

            def stay_local(route, request):
                if is_local(request.url):
                    route.continue_()
                else:
                    visit.blocked.append((request.resource_type, request.url))
                    route.abort()

            page.route("**/*", stay_local)
        page.goto(url, wait_until=wait_until)
        return visit

    yield open_page
    for page in opened:
        if not page.is_closed():
            page.close()
        page.context.clear_permissions()
