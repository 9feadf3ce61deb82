"""The landing page: the book's address opens it.

It names the book, and it leads to every chapter. Opened twice, the second visit keeps nothing
the first stored (what every browser test relies on: conftest.py's visits share a context).
"""

from urllib.parse import urljoin

from .book_site import CONFIG, chapters, landing_page


def test_the_books_address_opens_the_landing_page(visit, book_url):
    page = visit(f"{book_url}/", wait_until="networkidle").page
    assert page.url == f"{book_url}/{landing_page()}"


def test_the_landing_page_names_the_book_and_logs_no_errors(visit, book_url):
    visited = visit(f"{book_url}/{landing_page()}", wait_until="networkidle")
    heading = visited.page.locator("article h1").first.inner_text()
    assert CONFIG["title"] in heading
    assert CONFIG["title"] in visited.page.title()
    assert not visited.errors, "\n".join(visited.errors)


def test_the_navigation_links_every_chapter_in_reading_order_and_every_link_works(visit, book_url):
    page = visit(f"{book_url}/{landing_page()}").page
    hrefs = page.eval_on_selector_all("nav.bd-docs-nav a", "links => links.map(a => a.href)")
    expected = [urljoin(f"{book_url}/", c.url_path) for c in chapters()]
    assert [h for h in hrefs if h in expected] == expected
    for href in hrefs:
        assert page.request.get(href).status == 200, f"{href} is broken"
    assert page.locator("a.right-next").get_attribute("href") == chapters()[0].url_path


def test_a_visit_starts_with_nothing_an_earlier_visit_stored(visit, book_url):
    """Visits share a browser context (conftest.py), so each must clear what the last one kept:
    here a stored dark mode, which the theme would otherwise apply to the next page."""
    first = visit(f"{book_url}/{landing_page()}").page
    first.evaluate("localStorage.setItem('mode', 'dark'); localStorage.setItem('mha-left', '1')")
    first.reload()
    assert first.evaluate("document.documentElement.dataset.theme") == "dark"
    second = visit(f"{book_url}/{landing_page()}").page
    assert second.context is first.context
    assert second.evaluate("Object.keys(localStorage)").count("mha-left") == 0
    assert second.evaluate("document.documentElement.dataset.theme") == "light"
