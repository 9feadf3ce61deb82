"""axe-core finds no accessibility violations on any page of the book.

axe-core runs inside every page, with its experimental rule label-content-name-mismatch (a
control's name must include the words it shows) switched on. Pages are checked on a phone and a
desktop, in the light and the dark colour scheme (the book follows the reader's system setting,
``default_mode: auto``), with every toggle closed and then open (hidden content is content too).

With the toggles open, axe's colour-contrast rule runs apart from the others, on everything but
the code cells' highlighted code: on a long chapter it spent two thirds of the CPU of a whole
run there (about 2 s a page). ``colour_problems`` (test_solutions.py) computes the same WCAG AA
ratio for each of that code's tokens, and fails where it cannot judge (a translucent colour or
background, an opacity, a filter or a background image on the way), in a tenth of the time.
Every other rule still sees the code.
"""

import pytest
from axe_playwright_python.sync_playwright import Axe

from .book_site import (
    DESKTOP,
    PHONE,
    chapters,
    landing_page,
    open_every_toggle,
    wait_for_transitions,
)
from .test_solutions import colour_problems

PAGES = [landing_page()] + [c.url_path for c in chapters()] + ["bibliography.html"]
AXE_OPTIONS = {
    "resultTypes": ["violations"],
    "rules": {"label-content-name-mismatch": {"enabled": True}},
}
#: The code cells' highlighted code: its colours are checked by ``colour_problems``, not axe.
CODE_INPUT = "article .cell_input div.highlight pre"
EVERY_RULE_BUT_CONTRAST = {
    **AXE_OPTIONS,
    "rules": {**AXE_OPTIONS["rules"], "color-contrast": {"enabled": False}},
}
CONTRAST = {"resultTypes": ["violations"], "runOnly": ["color-contrast"]}
#: With the toggles open: (axe's context, its options).
OPEN_RUNS = ((None, EVERY_RULE_BUT_CONTRAST), ({"exclude": [[CODE_INPUT]]}, CONTRAST))
#: With the toggles closed, what differs from the open page: the toggles' own names and what
#: takes focus (every rule on the whole page again would double the file's time).
CLOSED_OPTIONS = {
    "resultTypes": ["violations"],
    "runOnly": [
        "label-content-name-mismatch",
        "summary-name",
        "button-name",
        "aria-command-name",
        "nested-interactive",
        "scrollable-region-focusable",
        "region",
        "landmark-unique",
    ],
}

#: axe rule id -> why a violation of it belongs to sphinx-book-theme rather than to the book. Such
#: a violation is allowed only on the theme's own elements (outside the article); inside the
#: article it still fails. Empty: with the book's _config.yml, the theme passes too.
THEME_RULES = {}


def outside_article(page, node):
    selector = node["target"][0]
    return page.evaluate("s => !document.querySelector(s)?.closest('article')", selector)


def describe(violation, nodes):
    node = nodes[0]
    summary = node.get("failureSummary", "").replace("\n", " ")
    return (
        f"{violation['id']} ({violation['impact']}): {violation['help']} — "
        f"{len(nodes)} element(s), e.g. {node['target'][0]}: {summary}"
    )


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390px", "1280px"])
@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_axe_finds_no_violations(visit, book_url, path, color_scheme, viewport):
    page = visit(f"{book_url}/{path}", color_scheme=color_scheme, viewport=viewport).page
    problems = []
    for state, runs in (("closed", [(None, CLOSED_OPTIONS)]), ("open", OPEN_RUNS)):
        if state == "open":
            open_every_toggle(page)
        wait_for_transitions(page)
        for context, options in runs:
            for violation in Axe().run(page, context, options).response["violations"]:
                nodes = [
                    n
                    for n in violation["nodes"]
                    if not (violation["id"] in THEME_RULES and outside_article(page, n))
                ]
                if nodes:
                    problems.append(f"toggles {state}: {describe(violation, nodes)}")
    if page.locator(CODE_INPUT).count():
        problems += [f"toggles open: {p}" for p in colour_problems(page, CODE_INPUT)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "style, expected",
    [
        (".highlight .k { color: #bbbbbb !important; }", "is rgb(187, 187, 187) on"),
        (".cell_input .highlight pre { opacity: 0.9; }", "cannot be judged: opacity 0.9"),
    ],
    ids=["pale keyword", "translucent code"],
)
def test_the_code_colour_check_fails_on_pale_or_translucent_code(visit, book_url, style, expected):
    page = visit(f"{book_url}/{chapters()[0].url_path}").page
    open_every_toggle(page)
    assert not colour_problems(page, CODE_INPUT)
    page.add_style_tag(content=style)
    wait_for_transitions(page)
    problems = colour_problems(page, CODE_INPUT)
    assert problems and all(expected in p for p in problems), problems[:3]
