"""Results readable on a phone (issue 19), measured as a reader sees them at 390, 900, 1280 px."""

import pytest

from .book_site import (
    DESKTOP,
    PHONE,
    PHONE_OVERFLOW_BUDGET,
    TABLET,
    broken_token_problems,
    chapters,
    line_budget_problems,
    no_cue_problems,
    open_every_toggle,
    printed_line_count,
    scroll_cue_problems,
    scrolling_boxes,
    wait_for_transitions,
)

CHAPTERS = chapters()
BUDGETS = [(PHONE, PHONE_OVERFLOW_BUDGET), (TABLET, 0), (DESKTOP, 0)]
VIEWPORTS = [PHONE, TABLET, DESKTOP]
WIDTHS = [f"{v['width']}px" for v in VIEWPORTS]


@pytest.mark.parametrize(
    ("viewport", "budget"), BUDGETS, ids=[f"{v['width']}px" for v, _ in BUDGETS]
)
def test_printed_output_lines_fit_their_box(visit, book_url, viewport, budget):
    """At most 10 % of printed lines are wider than their box on a phone; none from 900 px up."""
    counts = {}
    for chapter in CHAPTERS:
        page = visit(f"{book_url}/{chapter.url_path}", viewport=viewport).page
        open_every_toggle(page)
        counts[chapter.name] = printed_line_count(page)
        page.context.close()
    problems = line_budget_problems(counts, viewport["width"], budget)
    assert not problems, "\n".join(problems)


WIDE_OUTPUT = (
    '<div class="cell_output docutils container"><div class="output stream highlight-myst-ansi">'
    '<div class="highlight"><pre>{}</pre></div></div></div>'
)


def add_printed_output(page, text):
    """A printed output, as myst-nb renders one, at the end of the article; returns its box."""
    page.evaluate(
        "html => document.querySelector('article.bd-article')"
        ".insertAdjacentHTML('beforeend', html)",
        WIDE_OUTPUT.format(text),
    )
    added = page.locator("article.bd-article > .cell_output pre")
    return added.nth(added.count() - 1)


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_a_printed_line_wider_than_its_box_shows_a_cue_until_scrolled_to_its_end(
    visit, book_url, viewport, color_scheme
):
    page = visit(
        f"{book_url}/{CHAPTERS[0].url_path}", viewport=viewport, color_scheme=color_scheme
    ).page
    wide = add_printed_output(page, "a printed table, one row: " + "  column" * 20)
    narrow = add_printed_output(page, "a short line")
    wait_for_transitions(page)
    problems = scroll_cue_problems(page, wide, "a 186-character line") + no_cue_problems(
        page, narrow, "a short line"
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_every_output_code_block_and_table_fits_or_shows_that_it_scrolls(visit, book_url, viewport):
    """In every chapter: each output, code block and markdown table either fits its box or shows
    a cue (checked on the screen for the first of each kind, by computed style for the rest)."""
    problems = []
    for chapter in CHAPTERS:
        page = visit(f"{book_url}/{chapter.url_path}", viewport=viewport).page
        open_every_toggle(page)
        wait_for_transitions(page)
        looked_at = set()
        for box, facts in scrolling_boxes(page):
            where = f"{chapter.name}: {facts['kind']} {facts['text']!r}"
            if not facts["wider"]:
                continue
            if facts["kind"] not in looked_at:
                looked_at.add(facts["kind"])
                problems += scroll_cue_problems(page, box, where)
            elif box.evaluate("b => getComputedStyle(b).boxShadow") == "none":
                problems.append(f"{where} scrolls sideways without a cue")
        page.context.close()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_commands_and_names_in_inline_code_never_break_inside_a_word(visit, book_url, viewport):
    problems = []
    for chapter in CHAPTERS:
        page = visit(f"{book_url}/{chapter.url_path}", viewport=viewport).page
        open_every_toggle(page)
        problems += [f"{chapter.name}: {p}" for p in broken_token_problems(page)]
        page.context.close()
    assert not problems, "\n".join(problems)


def test_every_markdown_table_fits_the_desktop_column(visit, book_url):
    """At 1280 px no table needs its scroll cue: the reader sees every column at once."""
    problems = []
    for chapter in CHAPTERS:
        page = visit(f"{book_url}/{chapter.url_path}", viewport=DESKTOP).page
        problems += [
            f"{chapter.name}: the table {facts['text']!r} is wider than the column"
            f" ({box.evaluate('b => b.scrollWidth')} px in {box.evaluate('b => b.clientWidth')})"
            for box, facts in scrolling_boxes(page)
            if facts["kind"] == "table" and facts["wider"]
        ]
        page.context.close()
    assert not problems, "\n".join(problems)


#: What the chapters are told a phone's output box shows uncut (COMMON.md, issue 19).
PHONE_LINE_CHARACTERS = 44


def test_a_44_character_printed_line_fits_its_box_on_a_390_px_phone(visit, book_url):
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}", viewport=PHONE).page
    add_printed_output(page, "x" * PHONE_LINE_CHARACTERS)
    add_printed_output(page, "x" * (PHONE_LINE_CHARACTERS + 4))
    too_long = [text for text, _, _ in printed_line_count(page).wide]
    assert "x" * PHONE_LINE_CHARACTERS not in too_long, "a 44-character line is cut off"
    assert "x" * (PHONE_LINE_CHARACTERS + 4) in too_long, "the measurement misses a wide line"


def test_the_measurement_sees_a_printed_line_that_wraps(visit, book_url):
    """Wrapping would hide overflow and break a table's columns: the count must notice it."""
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}", viewport=PHONE).page
    wrapping = add_printed_output(page, "a row of a table " * 6)
    wrapping.evaluate("pre => { pre.style.whiteSpace = 'pre-wrap'; }")
    assert printed_line_count(page).wrapped == ["a row of a table " * 6]
