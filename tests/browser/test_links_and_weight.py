"""The book links, and every page is light enough for a slow phone connection.

Links: the landing page's list of chapters links each chapter; a chapter's mentions of another
chapter are links to it (mentions of the reference book's chapters, "chapter 3 of …", stay text;
checked on the load the weight test makes); the papers chapter 7 cites and the bibliography page
link to their sources.

Weight: each page's bytes, as the local server sends them, against its budget. The page's own
HTML, which carries the answer boxes' figures inline, has a budget of its own. No page loads Font
Awesome's script (1.49 MB) or web fonts (268 KB): _static/icons.css draws the icons the pages
show (_ext/icons.py), and every icon a page shows is drawn.
"""

import re

import pytest

from .book_site import chapters, landing_page

CHAPTERS = chapters()
#: Kilobytes of 1000 bytes (chapter 3's HTML was 303 KB, one answer's figure inline in it).
HTML_BUDGET_KB = 300
#: Uncompressed, everything the page loads: 853 KB (the landing page) to 1774 KB (chapter 3, whose
#: figures are most of it) measured without Font Awesome; 2.4-3.4 MB with it.
PAGE_BUDGET_KB = 1800
FONT_AWESOME = ("fontawesome.js", "fa-solid-900", "fa-brands-400", "fa-regular-400")
PAPERS = ("https://arxiv.org/abs/1805.02867", "https://arxiv.org/abs/2205.14135")

#: Text in the article's prose that names a chapter and is not a link (headings, code and links
#: left out).
UNLINKED_MENTIONS = r"""() => {
    const found = [];
    const walker = document.createTreeWalker(document.querySelector('article'),
                                             NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const node = walker.currentNode;
        if (node.parentElement.closest('a, code, pre, h1, h2, h3, h4, .cell_output, summary'))
            continue;
        for (const m of node.textContent.matchAll(/\b[Cc]hapter ([1-9])\b(?! of )/g))
            found.push([Number(m[1]), node.textContent.slice(Math.max(0, m.index - 20),
                                                             m.index + 15)]);
    }
    return found;
}"""


@pytest.fixture(scope="module")
def page(browser):
    context = browser.new_context()
    yield context.new_page()
    context.close()


def test_the_landing_page_links_every_chapter(page, book_url):
    page.goto(f"{book_url}/{landing_page()}")
    hrefs = page.eval_on_selector_all("article ol a", "links => links.map(a => a.href)")
    assert hrefs == [f"{book_url}/{c.url_path}" for c in CHAPTERS]


def test_the_cited_papers_and_the_bibliography_link_their_sources(page, book_url):
    (seventh,) = [c for c in CHAPTERS if c.name.startswith("07_")]  # cites the two papers
    page.goto(f"{book_url}/{seventh.url_path}")
    links = page.eval_on_selector_all("article a", "links => links.map(a => a.href)")
    assert all(paper in links for paper in PAPERS), "chapter 7's citations are not links"
    page.goto(f"{book_url}/bibliography.html")
    text = page.locator("article").inner_text()
    links = page.eval_on_selector_all("article a", "links => links.map(a => a.href)")
    for source in (*PAPERS, "https://github.com/rasbt/LLMs-from-scratch"):
        assert source in links, f"the bibliography does not link {source}"
    assert re.search(r"Online normalizer calculation for softmax", text)
    assert "PyTorch documentation" in text


#: Every file a page loaded, from the browser's own record: the page's HTML first, then each
#: resource, with the bytes that came over the wire for it (this server sends them uncompressed).
LOADED_BYTES = """() => [performance.getEntriesByType('navigation')[0],
                      ...performance.getEntriesByType('resource')]
    .map(e => [e.name, e.encodedBodySize])"""


CHAPTER_PAGES = {c.url_path: c for c in CHAPTERS}


@pytest.mark.parametrize("path", [landing_page()] + [c.url_path for c in CHAPTERS])
def test_each_page_is_within_its_weight_budget(page, book_url, path):
    """On a chapter's page, first: its mentions of other chapters are links (that test had a
    load of every chapter of its own, about 1 s of CPU each)."""
    page.goto(f"{book_url}/{path}", wait_until="networkidle")
    if path in CHAPTER_PAGES:
        own = int(CHAPTER_PAGES[path].name[:2])
        unlinked = [text for number, text in page.evaluate(UNLINKED_MENTIONS) if number != own]
        assert not unlinked, f"{path}: unlinked chapter mentions: {unlinked}"
    loaded = page.evaluate(LOADED_BYTES)
    html_kb = loaded[0][1] / 1000
    total_kb = sum(size for _, size in loaded) / 1024
    print(f"{path}: HTML {html_kb:.0f} KB, page {total_kb:.0f} KB in {len(loaded)} files")
    assert html_kb <= HTML_BUDGET_KB, f"{path}'s HTML is {html_kb:.0f} KB"
    assert total_kb <= PAGE_BUDGET_KB, f"{path} loads {total_kb:.0f} KB"
    font_awesome = [name for name, _ in loaded if any(part in name for part in FONT_AWESOME)]
    assert not font_awesome, f"{path} loads Font Awesome: {font_awesome}"
    assert not page.evaluate(BLANK_ICONS), f"{path} shows icons drawn blank"


#: The icons a page shows (the theme's <i class="fa-solid fa-NAME">) that _static/icons.css does
#: not draw: no outline, or no width.
BLANK_ICONS = """() => Array.from(document.querySelectorAll('[class*="fa-"]'))
    .filter(icon => icon.getClientRects().length)
    .map(icon => [icon.className, getComputedStyle(icon, '::before')])
    .filter(([, before]) => !before.maskImage.startsWith('url(') || parseFloat(before.width) < 1)
    .map(([name]) => name)"""


def test_an_icon_without_a_rule_is_found_blank(page, book_url):
    """An icon the pages start to use before icons.css draws it: the weight test names it."""
    page.goto(f"{book_url}/{CHAPTERS[0].url_path}")
    page.evaluate(
        "document.querySelector('.article-header-buttons')"
        ".insertAdjacentHTML('beforeend', '<i class=\"fa-solid fa-not-drawn\"></i>')"
    )
    assert page.evaluate(BLANK_ICONS) == ["fa-solid fa-not-drawn"]
