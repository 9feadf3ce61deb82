"""The landing page: the book's address opens it.

It names the book, and it leads to every chapter. Opened twice, the second visit keeps nothing
the first stored (what every browser test relies on: conftest.py's visits share a context).
"""

from urllib.parse import urljoin

from .book_site import CONFIG, chapters, landing_page


def test_the_books_address_opens_the_landing_page_which_names_the_book_and_links_every_chapter(
    visit, book_url
):
    """One load for three tests that each loaded the landing page (about 1 s of CPU each): the
    book's address opens it, it names the book and logs no error, and its navigation links every
    chapter in reading order, every link working."""
    visited = visit(f"{book_url}/", wait_until="networkidle")
    page = visited.page
    assert page.url == f"{book_url}/{landing_page()}", f"the book's address opens {page.url}"
    heading = page.locator("article h1").first.inner_text()
    assert CONFIG["title"] in heading, f"the heading is {heading!r}"
    assert CONFIG["title"] in page.title(), f"the title is {page.title()!r}"
    assert not visited.errors, "\n".join(visited.errors)
    # Browsers ask the book's address for /favicon.ico, some time before the redirect: a 404
    # there is a console error on some loads and not others, so it is asked for here.
    assert page.request.get(f"{book_url}/favicon.ico").status == 200, "no /favicon.ico"
    hrefs = page.eval_on_selector_all("nav.bd-docs-nav a", "links => links.map(a => a.href)")
    expected = [urljoin(f"{book_url}/", c.url_path) for c in chapters()]
    assert [h for h in hrefs if h in expected] == expected, "the chapters' links, in order"
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
