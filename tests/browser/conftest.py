"""Browser fixtures: a Chromium (found, never installed: that is `make chromium`), the built book
served on 127.0.0.1, and fresh pages that record what went wrong in them.

Every test under tests/browser carries the ``browser`` marker, so ``pytest -m "not browser"``
leaves them out.
"""

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from chromium import CHROMIUM_ARGS, MISSING, find_chromium  # .ci/chromium.py (pytest pythonpath)

from .book_site import BUILD, DESKTOP, is_local, serve

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


@pytest.fixture
def visit(browser):
    """``visit(url, viewport=DESKTOP, color_scheme="light", offline=False)``: open ``url`` in a
    fresh browser context (its own storage, so one page's theme choice cannot leak into the next).
    ``offline=True`` blocks, and records, every request that is not to 127.0.0.1.
    ``init_script`` runs in the page before any of its own scripts; ``permissions`` (such as
    ``["clipboard-read"]``) are granted to the page."""
    contexts = []

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
        context = browser.new_context(
            viewport=viewport, color_scheme=color_scheme, permissions=list(permissions)
        )
        if init_script:
            context.add_init_script(init_script)
        contexts.append(context)
        page = context.new_page()
        visit = Visit(page)
        page.on(
            "console",
            lambda message: (
                message.type == "error" and visit.errors.append(f"console: {message.text}")
            ),
        )
        page.on("pageerror", lambda error: visit.errors.append(f"uncaught: {error}"))
        if offline:

            def stay_local(route, request):
                if is_local(request.url):
                    route.continue_()
                else:
                    visit.blocked.append((request.resource_type, request.url))
                    route.abort()

            context.route("**/*", stay_local)
        page.goto(url, wait_until=wait_until)
        return visit

    yield open_page
    for context in contexts:
        context.close()
