"""An answer, a hint, a solution and a gallery's feedback wait for a click wherever they show.

Colab ignores a notebook's tags and ``outputs_hidden``, so these boxes hide their own content in
a closed ``<details>`` (``mha.reveal.collapsed``). Checked at 390, 900 and 1280 px:

- on a bare page, as Colab or VS Code draws an output (no book stylesheet, no book script, a
  light or a dark host page): only the summary shows, readable (AA contrast), and one click on
  it shows the content;
- in the book, where the page's own toggle already hides the output: the content is hidden until
  that toggle is clicked, and shows after that one click (no second summary to open): every
  chapter at 390 px (``hidden_output_problems``, in test_phone_reading.py), and at 900 and
  1280 px the chapters that have every kind of hidden cell between them.
"""

import json

import pytest

from mha.checks import CheckResult
from mha.reveal import Revealed, collapsed
from mha.two_dim_exercise import two_dim_output

from .book_site import DESKTOP, PHONE, TABLET, chapters, wait_for_transitions
from .test_reading_on_every_screen import WCAG_AA, contrast, parse_rgb
from .test_solutions import SHOW_SOLUTION

VIEWPORTS = [PHONE, TABLET, DESKTOP]
WIDTHS = [f"{v['width']}px" for v in VIEWPORTS]
CHAPTERS = chapters()
GALLERY = "Show the check's feedback"

#: kind -> (the box's HTML as the kernel or `make execute` stores it, a piece of its content,
#: its summary)
BOXES = {
    "answer": (
        Revealed((2, 6, 4), "", "Batch and tokens pass through.")._repr_html_(),
        "Batch and tokens pass through.",
        "Show the answer",
    ),
    "hint": (
        two_dim_output.hint(2)._repr_html_(),
        f"Hint 2 of {len(two_dim_output.hints)}.",
        f"Show hint 2 of {len(two_dim_output.hints)}",
    ),
    "solution": (two_dim_output.solution()._repr_html_(), "manual_seed", "Show the solution"),
    "gallery feedback": (
        collapsed(CheckResult(False, "The output is 4 values wide.")._repr_html_(), GALLERY),
        "4 values wide",
        GALLERY,
    ),
}
#: A host page as a notebook front end draws it, in its light and its dark theme.
HOSTS = {
    "light": "background:#ffffff;color:#1f1f1f",
    "dark": "background:#1e1e1e;color:#d5d5d5",
}
#: The colour of the summary's text, and the first opaque background behind it.
SUMMARY_COLOURS = """summary => {
    let background = null;
    for (let e = summary; e && !background; e = e.parentElement) {
        const c = getComputedStyle(e).backgroundColor;
        if (c !== 'transparent' && !/rgba\\(.*, 0\\)$/.test(c)) background = c;
    }
    return [getComputedStyle(summary).color, background];
}"""
#: The cells whose output the book hides behind a toggle of the page.
HIDDEN_OUTPUTS = ".cell.tag_reveal, .cell.tag_solution, .cell.tag_hint, .cell.tag_feedback"
PAGE_TOGGLE = ":scope details:not(.mha-hidden):not(.mha-code-toggle) > summary"
#: Whether the text ``content`` is drawn on screen, found by hit-testing the middle of its first
#: line: a click there lands on the element that holds it. (Chromium lays out a closed
#: <details>'s content without drawing it, and the <details> around a piece of text is visible,
#: summary and all, so neither the text's boxes nor its element's visibility would do.)
TEXT_DRAWN = """([root, content]) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const at = node.data.indexOf(content);
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + content.length);
        const first = () => range.getClientRects()[0];
        if (!first()) return false;
        window.scrollBy(0, first().top - window.innerHeight / 2);
        const line = first();
        const hit = document.elementFromPoint(
            Math.min(line.left + 4, window.innerWidth - 1), line.top + line.height / 2);
        return Boolean(hit) && node.parentElement.contains(hit);
    }
    throw new Error('not on the page: ' + content);
}"""


def drawn(where, content):
    """Whether ``content`` is drawn on screen inside ``where`` (a page or a locator)."""
    root = where.locator("body") if hasattr(where, "set_content") else where
    return root.evaluate("(root, content) => (" + TEXT_DRAWN + ")([root, content])", content)


@pytest.fixture(scope="module")
def bare_page(reading_page):
    """``bare_page(viewport)``: one blank page per width for the tests of this file that write
    their whole document into it (``set_content`` replaces what the last one left): a new page
    for each cost about 0.2 s of CPU more, 24 times."""
    pages = {}

    def at(viewport):
        if viewport["width"] not in pages:
            pages[viewport["width"]] = reading_page(viewport, "light")
        return pages[viewport["width"]]

    yield at
    for page in pages.values():
        page.close()


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
@pytest.mark.parametrize("kind", BOXES)
def test_on_a_bare_page_only_the_summary_shows_until_it_is_clicked(bare_page, kind, viewport, host):
    fragment, content, summary = BOXES[kind]
    page = bare_page(viewport)
    page.set_content(f'<body style="{HOSTS[host]}"><div class="output">{fragment}</div></body>')
    button = page.locator("summary", has_text=summary)
    assert button.is_visible(), f"no {summary!r} to click"
    assert not drawn(page, content), f"the {kind} shows before the reader asks"
    box = button.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], "summary cut off"
    colour, background = button.evaluate(SUMMARY_COLOURS)
    ratio = contrast(parse_rgb(colour), parse_rgb(background))
    assert ratio >= WCAG_AA, f"{summary!r} is {colour} on {background}: {ratio:.2f}"
    button.click()
    assert drawn(page, content), f"the {kind} does not show after a click on {summary!r}"


#: Is ``e`` visible, as Playwright's ``is_visible`` decides: a box of some size, not
#: ``visibility: hidden``.
VISIBLE = """e => { const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; }"""
#: Each cell that hides its output, before any toggle of the page is clicked: its kind, its box's
#: title ("The answer", ...; null when it shows no box), whether it has a visible toggle of the
#: page, and whether the title is drawn. One call for the page: each cell hit-tested in turn,
#: scrolled to inside the script (no frame is drawn in between), rather than two round trips
#: and a screen drawn for each.
CELLS_BEFORE = (
    """([selector, toggleSelector]) => {
    const drawn = """
    + TEXT_DRAWN
    + """, visible = """
    + VISIBLE
    + """;
    return [...document.querySelectorAll(selector)].map(cell => {
        const kind = [...cell.classList].find(c => c.startsWith('tag_'));
        const title = cell.querySelector('.mha-box strong');
        if (!title) return [kind, null, false, false];
        const toggle = cell.querySelector(toggleSelector);
        const shown = Boolean(toggle) && visible(toggle);
        return [kind, title.textContent, shown, shown && drawn([cell, title.textContent])];
    });
}"""
)
#: The same cells once their toggles were clicked (those of ``indices``): whether the title is
#: drawn, and the label of the box's own summary when one of them still shows (a second click).
CELLS_AFTER = (
    """([selector, indices]) => {
    const drawn = """
    + TEXT_DRAWN
    + """, visible = """
    + VISIBLE
    + """;
    const cells = [...document.querySelectorAll(selector)];
    return indices.map(i => {
        const own = [...cells[i].querySelectorAll('.mha-box summary')];
        const content = cells[i].querySelector('.mha-box strong').textContent;
        return [drawn([cells[i], content]), own.some(visible) ? own[0].innerText : null];
    });
}"""
)


def hidden_output_problems(page, chapter):
    """Each box the page hides behind its own toggle is hidden before one click on that toggle,
    and fully shown after it (each toggle clicked as a reader clicks it)."""
    problems, clicked = [], []
    cells = page.locator(HIDDEN_OUTPUTS)
    for i, (kind, content, has_toggle, shown) in enumerate(
        page.evaluate(CELLS_BEFORE, [HIDDEN_OUTPUTS, PAGE_TOGGLE])
    ):
        where = f"{chapter.name}: {kind[4:]} cell {i + 1}"
        if content is None:
            problems.append(f"{where} shows no box")
        elif not has_toggle:
            problems.append(f"{where} has no toggle of the page")
        else:
            if shown:
                problems.append(f"{where}: {content!r} shows before a click")
            cells.nth(i).locator(PAGE_TOGGLE).first.click()
            clicked.append((i, where, content))
    after = page.evaluate(CELLS_AFTER, [HIDDEN_OUTPUTS, [i for i, _, _ in clicked]])
    for (_, where, content), (shown, second) in zip(clicked, after, strict=True):
        if not shown:
            problems.append(f"{where}: {content!r} is still hidden after one click")
        if second is not None:
            problems.append(f"{where} asks for a second click ({second!r})")
    if not cells.count():
        problems.append(f"{chapter.name}: no reveal, hint, solution or feedback cell")
    return problems


def kinds_of_hidden_cells(chapter):
    """The kinds of cell (``tag_reveal``, ...) whose output ``chapter``'s page hides."""
    found = set()
    for cell in json.loads(chapter.notebook.read_text())["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        found |= {f"tag_{tag}" for tag in tags} & set(
            HIDDEN_OUTPUTS.replace(".cell.", "").split(", ")
        )
    return found


def chapters_with_every_kind():
    """The fewest chapters (chosen greedily) that together have every kind of hidden cell."""
    chosen, left = [], set().union(*(kinds_of_hidden_cells(c) for c in CHAPTERS))
    while left:
        best = max(CHAPTERS, key=lambda c: len(kinds_of_hidden_cells(c) & left))
        chosen.append(best)
        left -= kinds_of_hidden_cells(best)
    return chosen


#: Every chapter on a phone (test_phone_reading.py, on the page it loads at 390 px anyway: a load
#: of its own here cost about 1 s of Chromium's CPU a chapter); at the wider widths, here, the
#: chapters that have every kind of hidden cell between them. The toggle, the box and how one
#: click opens it are the page's shared code (reveal.js, boxes.css), the same on every chapter;
#: what the width changes is the layout of each kind of box (phone-boxes.css), which those
#: chapters show at every width. Every chapter at every width cost about 45 s of CPU more, for
#: the same verdict.
PAGES_AND_WIDTHS = [(c, v) for v in (TABLET, DESKTOP) for c in chapters_with_every_kind()]


def test_the_wider_widths_see_every_kind_of_hidden_cell():
    kinds = set().union(*(kinds_of_hidden_cells(c) for c in CHAPTERS))
    assert {"tag_reveal", "tag_solution", "tag_hint"} <= kinds
    for width in (TABLET, DESKTOP):
        seen = [kinds_of_hidden_cells(c) for c, v in PAGES_AND_WIDTHS if v == width]
        assert set().union(*seen) == kinds


@pytest.mark.parametrize(
    ("chapter", "viewport"),
    PAGES_AND_WIDTHS,
    ids=[f"{c.name}-{v['width']}px" for c, v in PAGES_AND_WIDTHS],
)
def test_in_the_book_one_click_on_the_pages_toggle_shows_the_box(
    visit, book_url, chapter, viewport
):
    page = visit(f"{book_url}/{chapter.url_path}", viewport=viewport).page
    wait_for_transitions(page)
    problems = hidden_output_problems(page, chapter)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_a_box_outside_every_toggle_of_the_page_keeps_its_own(visit, book_url, color_scheme):
    """The book's script opens a box only inside a toggle of the page: elsewhere nothing else
    would hide it, and its summary reads in the book's light and dark theme."""
    fragment, content, summary = BOXES["answer"]
    script = SHOW_SOLUTION % json.dumps(fragment)  # the box atop the article, outside toggles
    page = visit(
        f"{book_url}/{CHAPTERS[0].url_path}", init_script=script, color_scheme=color_scheme
    ).page
    wait_for_transitions(page)
    article = page.locator("article.bd-article")
    assert not drawn(article, content), "an answer outside every toggle shows before a click"
    button = article.locator("summary", has_text=summary).first
    colour, background = button.evaluate(SUMMARY_COLOURS)
    ratio = contrast(parse_rgb(colour), parse_rgb(background))
    assert ratio >= WCAG_AA, f"{summary!r} is {colour} on {background}: {ratio:.2f}"
    button.click()
    assert drawn(article, content)
