"""axe-core finds no accessibility violations on any page of the book.

axe-core runs inside every page, with its experimental rule label-content-name-mismatch (a
control's name must include the words it shows) switched on. Every page is checked twice: on a
phone (390 px) in the light colour scheme and on a desktop (1280 px) in the dark one (the book
follows the reader's system setting, ``default_mode: auto``), each with every toggle closed and
then open (hidden content is content too), and each with every rule. So every rule runs on every
page at both widths (the layout rules see the phone's and the desktop's layout) and the colour
rules in both schemes. Running each scheme at the other width too repeated verdicts the
scheme or the width alone decides, for about 50 s of CPU a run of this file (Chromium counted).
The phone's light runs are made by test_screenshots.py's phone checks (``axe_problems``), on the
page it opens for its phone screenshots or, for a chapter, on the one test_phone_reading.py reads
at 390 px, for every page but the bibliography; the dark desktop runs here
check the chapters' colours in the dark theme too (``dark_theme_problems``, test_solutions.py).

With the toggles open, axe's colour rules run apart from the others, on everything but the
highlighted code (the code cells' and the solutions'): on a long chapter they spent two thirds of
the CPU of a whole run there (about 2 s a page, 1.2 s of it the solutions' code alone).
``colour_problems`` (test_solutions.py) computes the same WCAG AA ratio for each of that code's
tokens, and fails where it cannot judge (a translucent colour or background, an opacity, a filter
or a background image on the way), in a tenth of the time. Every other rule still sees the code.
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
from .test_reader_controls import toggle_name_problems
from .test_solutions import SOLUTION_CODE, colour_problems, dark_theme_problems

CHAPTERS = {c.url_path: c for c in chapters()}
#: The pages test_screenshots.py opens at 390 px in the light scheme: it runs ``axe_problems``
#: there, on its page, rather than this file loading each again (about 1 s of CPU a page).
SCREENSHOT_PAGES = [landing_page(), *CHAPTERS]
PAGES = [*SCREENSHOT_PAGES, "bibliography.html"]
AXE_OPTIONS = {
    "resultTypes": ["violations"],
    "rules": {"label-content-name-mismatch": {"enabled": True}},
}
#: The code cells' highlighted code: its colours are checked by ``colour_problems``, not axe.
CODE_INPUT = "article .cell_input div.highlight pre"
#: The same for the solutions' highlighted code (test_solutions.SOLUTION_CODE).
HIGHLIGHTED_CODE = (CODE_INPUT, SOLUTION_CODE)
#: axe's rules that judge colours (its "cat.color" rules that run by default): the only ones the
#: colour scheme can change the verdict of.
COLOUR_RULES = ("color-contrast", "link-in-text-block")
EVERY_RULE_BUT_COLOUR = {
    **AXE_OPTIONS,
    "rules": {**AXE_OPTIONS["rules"], **{rule: {"enabled": False} for rule in COLOUR_RULES}},
}
COLOURS = {"resultTypes": ["violations"], "runOnly": list(COLOUR_RULES)}
COLOURS_BUT_CODE = ({"exclude": [[code] for code in HIGHLIGHTED_CODE]}, COLOURS)
#: With the toggles open: (axe's context, its options) of each run.
OPEN_RUNS = ((None, EVERY_RULE_BUT_COLOUR), COLOURS_BUT_CODE)

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


AXE = Axe()


def run_axe(page, context, options):
    """What ``Axe().run(page, context, options)`` answers, with axe-core put into the page once:
    ``Axe().run`` evaluates its 570 kB script again on every call (about 60 ms of CPU each, three
    runs a page)."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE.axe_script)
    return page.evaluate("args => axe.run(...args)", [a for a in (context, options) if a])


def axe_problems(page, state):
    """What axe finds on ``page`` with its toggles ``state``: "closed" (the page as it loaded; the
    rules the toggles change), then "open" (it opens every toggle first; every rule, the colour
    rules apart, and the highlighted code's colours by ``colour_problems``)."""
    problems = []
    if state == "open":
        open_every_toggle(page)
    wait_for_transitions(page)
    for context, options in [(None, CLOSED_OPTIONS)] if state == "closed" else OPEN_RUNS:
        for violation in run_axe(page, context, options)["violations"]:
            nodes = [
                n
                for n in violation["nodes"]
                if not (violation["id"] in THEME_RULES and outside_article(page, n))
            ]
            if nodes:
                problems.append(f"toggles {state}: {describe(violation, nodes)}")
    if state == "open":
        for code in HIGHLIGHTED_CODE:
            if page.locator(code).count():
                problems += [f"toggles open: {p}" for p in colour_problems(page, code)]
    return problems


#: (page, viewport, colour scheme) of each run here: every page at 1280 px in the dark scheme,
#: and at 390 px in the light one those test_screenshots.py does not check.
RUNS = [(path, PHONE, "light") for path in PAGES if path not in SCREENSHOT_PAGES]
RUNS += [(path, DESKTOP, "dark") for path in PAGES]


@pytest.mark.parametrize(
    "path, viewport, color_scheme",
    RUNS,
    ids=[f"{path}-{viewport['width']}px-{scheme}" for path, viewport, scheme in RUNS],
)
def test_axe_finds_no_violations(visit, book_url, path, color_scheme, viewport):
    """A chapter in the dark scheme is also checked for its toggles' names, every toggle closed
    (``toggle_name_problems``, test_reader_controls.py), and for its colours there, every toggle
    open (``dark_theme_problems``): the same page, rather than a load of each chapter for each."""
    page = visit(f"{book_url}/{path}", color_scheme=color_scheme, viewport=viewport).page
    dark_chapter = color_scheme == "dark" and path in CHAPTERS
    problems = [f"toggle names: {p}" for p in toggle_name_problems(page)] if dark_chapter else []
    problems += axe_problems(page, "closed") + axe_problems(page, "open")
    if dark_chapter:
        problems += [f"dark theme: {p}" for p in dark_theme_problems(page, CHAPTERS[path])]
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
