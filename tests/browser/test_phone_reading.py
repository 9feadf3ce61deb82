"""Results readable on a phone (issue 19), measured as a reader sees them at 390, 900, 1280 px."""

import pytest

from .book_site import (
    DESKTOP,
    PHONE,
    PHONE_OVERFLOW_BUDGET,
    TABLET,
    chapters,
    line_budget_problems,
    open_every_toggle,
    printed_line_count,
)

CHAPTERS = chapters()
BUDGETS = [(PHONE, PHONE_OVERFLOW_BUDGET), (TABLET, 0), (DESKTOP, 0)]


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
