"""Issue 46's points 5 and 6, on every chapter as a reader meets it:

- the route paragraph (how to answer a prediction or do a practice from the web) is read in full
  once a chapter, before its first prediction and its first practice, and in at most 25 words
  before each later one; the full one names the header's "Run this page", which runs the chapter
  in the page (the running copy a check needs);
- "On this page" shows an entry for every Predict and Practice heading, at whatever depth the
  chapter set it, on a desktop and in a phone's drawer.
"""

import pytest

from .book_site import PHONE, chapters
from .test_navigation_details import open_drawer

CHAPTERS = chapters()
#: The most words a route paragraph after the chapter's first of its kind may have.
SHORT_ROUTE_WORDS = 25
#: The header's live-code button (_static/live-code.js), by its name.
RUN_BUTTON = "Run this page"

#: The paragraph right before each prediction and practice cell: (kind, its words).
ROUTES = """cells => cells.map(cell => {
    const before = cell.previousElementSibling;
    return [cell.classList.contains('tag_prediction') ? 'prediction' : 'practice',
            before && before.matches('p') ? before.innerText : ''];
})"""

#: Every Predict and Practice heading of the article: its text and its section's id.
QUESTIONS = """headings => headings
    .filter(h => /^(Predict|Practice)\\b/.test(h.innerText.trim()))
    .map(h => [h.innerText.trim(), (h.closest('section[id]') || h).id])"""


def route_problems(page, name):
    problems, seen = [], set()
    cells = "article.bd-article .cell.tag_prediction, article.bd-article .cell.tag_practice"
    for kind, text in page.eval_on_selector_all(cells, ROUTES):
        words = len(text.split())
        if not words:
            problems.append(f"{name}: a {kind} has no route paragraph right before it")
        elif kind not in seen and RUN_BUTTON not in text:
            problems.append(f"{name}: the first {kind}'s route does not name {RUN_BUTTON!r}")
        elif kind in seen and words > SHORT_ROUTE_WORDS:
            problems.append(
                f"{name}: a later {kind}'s route paragraph has {words} words "
                f"(at most {SHORT_ROUTE_WORDS}): {text[:60]!r}"
            )
        seen.add(kind)
    if seen and not page.get_by_role("button", name=RUN_BUTTON).count():
        problems.append(f"{name}: the routes name {RUN_BUTTON!r}, the header has no such button")
    return problems


def contents_problems(page, panel, name):
    """Every Predict and Practice heading has a visible entry in ``panel``, "On this page"."""
    problems = []
    questions = page.eval_on_selector_all("article.bd-article :is(h2, h3, h4)", QUESTIONS)
    if not questions:
        problems.append(f"{name}: no Predict or Practice heading found")
    for text, anchor in questions:
        entry = panel.locator(f"nav a[href='#{anchor}']")
        if not (entry.count() and entry.first.is_visible()):
            problems.append(f"{name}: {text!r} has no visible entry in 'On this page'")
    return problems


def route_and_contents_problems(page, name):
    """Both checks above on a chapter's page at 1280 px, as it loaded: run by
    test_chapter_pages.py on the page it opens at that width, before it clicks anything (a load
    of every chapter of their own here cost about 1.5 s of CPU each)."""
    return route_problems(page, name) + contents_problems(page, open_drawer(page), name)


@pytest.mark.parametrize("chapter", [CHAPTERS[2], CHAPTERS[5]], ids=["chapter 3", "chapter 6"])
def test_a_phones_drawer_lists_every_question(visit, book_url, chapter):
    """The chapters whose questions sit under a deeper heading (### or ####)."""
    page = visit(f"{book_url}/{chapter.url_path}", viewport=PHONE).page
    problems = contents_problems(page, open_drawer(page), chapter.name)
    assert not problems, "\n".join(problems)
