"""Results readable on a phone (issue 19), measured as a reader sees them at 390, 900, 1280 px."""

import json
from dataclasses import dataclass

import pytest

from .book_site import (
    CODE,
    CONTINUATION_GAP,
    DESKTOP,
    MIN_CONTINUATION_INDENT_CH,
    PHONE,
    PHONE_WIDE_LINES,
    PRINTED_OUTPUT,
    TABLET,
    box_overflow_problems,
    broken_token_problems,
    chapters,
    clear_site_data,
    code_in_padding_problems,
    code_line_problems,
    code_lines,
    continuation_mark_problems,
    cut_off_text_problems,
    figure_sharpness_problems,
    is_local,
    line_budget_problems,
    no_cue_problems,
    offline_rendering_problems,
    open_every_toggle,
    printed_line_count,
    scroll_cue_problems,
    scrolling_boxes,
    wait_for_transitions,
)
from .test_hidden_boxes import hidden_output_problems
from .test_screenshots import phone_closed_problems, phone_open_problems
from .test_solutions import solution_problems

CHAPTERS = chapters()
BUDGETS = [(PHONE, PHONE_WIDE_LINES), (TABLET, 0), (DESKTOP, 0)]
VIEWPORTS = [PHONE, TABLET, DESKTOP]
WIDTHS = [f"{v['width']}px" for v in VIEWPORTS]


@dataclass
class Reading:
    """What one chapter shows at one width, every toggle open, as the tests below measure it."""

    printed: object  # book_site.LineCount of its printed output
    code: object  # book_site.CodeLines of its code
    scroll_problems: list  # boxes that scroll sideways without their cue
    tables_wider: list  # (first line, scroll width, client width) of each too-wide table
    broken_tokens: list  # inline code broken inside a word
    unwrapped_cut: int | None  # chapter 2 at 390 px: code lines cut once wrapping is undone
    cut_off: list  # book_site.cut_off_text_problems: code or printed lines past their box's edge
    box_overflow: list  # book_site.box_overflow_problems: boxes whose text runs past their edge
    hidden: list  # test_hidden_boxes.hidden_output_problems at 390 px, toggles still closed
    marks: list  # continuation_mark_problems of its code, solutions and printed output, at 390 px
    nesting: list  # nesting_problems of its code, at 390 px
    printed_wrapped: object  # book_site.CodeLines of its printed output, at 390 px
    #: test_screenshots' phone_closed_problems and phone_open_problems (axe, fit, figures), at
    #: 390 px
    phone: list
    #: test_chapter_pages' offline, solution and sharpness checks, at 1280 px
    offline: list


#: Where code wraps on a phone, each checked for its continuation marks: a code cell's input and
#: a solution's code (inside its answer box, inside the page's toggle).
WRAPPING_CODE = [
    ("article.bd-article .cell_input div.highlight pre", "code cell"),
    ("article.bd-article .mha-solution div.highlight pre", "solution"),
    (PRINTED_OUTPUT, "printed output"),
]


def read_chapter(page, chapter, viewport, blocked):
    """What ``chapter``'s ``page`` shows at ``viewport``: ``blocked`` lists the requests off this
    machine it made, each blocked (``offline_rendering_problems``)."""
    wait_for_transitions(page)
    # On the page as it loaded, toggles closed; at 390 px only (test_hidden_boxes.py checks
    # the wider widths on fewer chapters: every chapter at every width cost 45 s more). Around
    # it, test_screenshots.py's checks of the phone's page, closed and then open.
    hidden, phone = [], []
    if viewport is PHONE:
        phone = phone_closed_problems(page, chapter.name)
        hidden = hidden_output_problems(page, chapter)
        phone += phone_open_problems(page, chapter.name)
    open_every_toggle(page)
    offline = []
    if viewport is DESKTOP:  # test_chapter_pages.py's checks of the page offline, toggles open
        offline = offline_rendering_problems(page, blocked, chapter)
    wait_for_transitions(page)
    if viewport is DESKTOP:
        offline += [f"solutions: {p}" for p in solution_problems(page, chapter)]
        offline += [f"sharpness: {p}" for p in figure_sharpness_problems(page)]
    code = code_lines(page)
    marks = []
    if viewport is PHONE:
        for selector, where in WRAPPING_CODE:
            marks += continuation_mark_problems(page, selector, f"{chapter.name}, {where}")
    nesting = nesting_problems(page, chapter.name) if viewport is PHONE else []
    printed = printed_line_count(page)
    printed_wrapped = code_lines(page, PRINTED_OUTPUT) if viewport is PHONE else None
    broken = broken_token_problems(page)
    scroll_problems, tables, looked_at = [], [], set()
    for box, facts in scrolling_boxes(page):
        where = f"{chapter.name}: {facts['kind']} {facts['text']!r}"
        if not facts["wider"]:
            continue
        if facts["kind"] == "table":
            tables.append((facts["text"], *box.evaluate("b => [b.scrollWidth, b.clientWidth]")))
        if facts["kind"] not in looked_at:
            looked_at.add(facts["kind"])
            scroll_problems += scroll_cue_problems(page, box, where)
        elif box.evaluate("b => getComputedStyle(b).boxShadow") == "none":
            scroll_problems.append(f"{where} scrolls sideways without a cue")
    cut_off, box_overflow = cut_off_text_problems(page), box_overflow_problems(page)
    if viewport is DESKTOP:
        cut_off += code_in_padding_problems(page)
    unwrapped_cut = None
    if viewport == PHONE and chapter is CHAPTERS[1]:
        page.add_style_tag(content="pre { white-space: pre !important; }")
        unwrapped_cut = len(code_lines(page).cut)
    return Reading(
        printed,
        code,
        scroll_problems,
        tables,
        broken,
        unwrapped_cut,
        cut_off,
        box_overflow,
        hidden,
        marks,
        nesting,
        printed_wrapped,
        phone,
        offline,
    )


@pytest.fixture(scope="module")
def readings(reading_page, book_url):
    """``readings(viewport)``: {chapter name: Reading} at that width, each chapter loaded once
    per width for every test of this file that reads the whole book (and the checks of other
    files that read the same page); at 1280 px every request off this machine is blocked."""
    done = {}

    def at(viewport):
        width = viewport["width"]
        if width not in done:
            done[width] = {}
            for chapter in CHAPTERS:
                page = reading_page(viewport, "light")
                blocked = []  # (resource type, url) of each request off this machine

                def stay_local(route, request, blocked=blocked):
                    if is_local(request.url):
                        route.continue_()
                    else:
                        blocked.append((request.resource_type, request.url))
                        route.abort()

                try:
                    url = f"{book_url}/{chapter.url_path}"
                    clear_site_data(page, url)  # as the `visit` of the checks moved here did
                    if viewport is DESKTOP:  # for the offline checks
                        page.route("**/*", stay_local)
                    settled = "load" if viewport is TABLET else "networkidle"
                    page.goto(url, wait_until=settled)
                    done[width][chapter.name] = read_chapter(page, chapter, viewport, blocked)
                finally:
                    page.close()
        return done[width]

    return at


def test_every_chapter_fits_a_phone_passes_axe_there_and_screenshots_are_saved(readings):
    """test_screenshots.py's phone checks of a chapter, on the page read here at 390 px: axe
    finds no violations with the toggles closed, then open; the page and its figures fit."""
    problems = [f"{name}: {p}" for name, reading in readings(PHONE).items() for p in reading.phone]
    assert not problems, "\n".join(problems)


def test_text_code_and_figures_render_with_every_outside_request_blocked_and_read_well(
    readings,
):
    """test_chapter_pages.py's check of every chapter read offline, on the page read here at
    1280 px with every toggle open: its text, code and figures render with every request off
    this machine blocked, each figure has loaded with alt text that says what it shows
    (``offline_rendering_problems``); every solution is highlighted code with a copy button in
    colours that read (``solution_problems``); every figure is sharp on a high-density screen
    (``figure_sharpness_problems``). A load of its own cost about 2 s of CPU a chapter."""
    problems = [
        f"{name}: {p}" for name, reading in readings(DESKTOP).items() for p in reading.offline
    ]
    assert not problems, "\n".join(problems)


def test_on_a_phone_one_click_on_the_pages_toggle_shows_the_box(readings):
    """Every reveal, hint, solution and feedback box of every chapter is hidden until one click
    on the page's toggle, and shown after it (test_hidden_boxes.py says why, and checks the
    wider widths): on the loads this file makes anyway, not on loads of its own."""
    problems = [p for reading in readings(PHONE).values() for p in reading.hidden]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("viewport", "budget"), BUDGETS, ids=[f"{v['width']}px" for v, _ in BUDGETS]
)
def test_printed_output_lines_fit_their_box(readings, viewport, budget):
    """At most 8 printed lines in the book are wider than their box on a phone (36 were); none
    from 900 px up. A table's row never wraps; any other line that wraps continues right of its
    first character, as code does."""
    counts = {name: reading.printed for name, reading in readings(viewport).items()}
    problems = line_budget_problems(counts, viewport["width"], budget)
    for name, reading in readings(viewport).items():
        if reading.printed_wrapped is not None:
            problems += code_line_problems(name, reading.printed_wrapped, kind="printed")
    print(
        f"\n{viewport['width']} px: "
        + ", ".join(f"{n} {r.printed}" for n, r in readings(viewport).items())
    )
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


@pytest.fixture(scope="module")
def first_chapter(reading_page, book_url):
    """``first_chapter(viewport, color_scheme="light")``: chapter 1's page at that width and in
    that scheme, one for the tests of this file that add printed outputs to its end and measure
    them (each finds its own: what another added does not change its verdict); a load for each
    of them cost about 1 s of CPU."""
    pages = {}

    def at(viewport, color_scheme="light"):
        key = (viewport["width"], color_scheme)
        if key not in pages:
            pages[key] = reading_page(viewport, color_scheme)
            clear_site_data(pages[key], book_url)  # as a first visit: no theme or guess stored
            pages[key].goto(f"{book_url}/{CHAPTERS[0].url_path}")
        return pages[key]

    yield at
    for page in pages.values():
        page.close()


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_a_printed_line_wider_than_its_box_shows_a_cue_until_scrolled_to_its_end(
    first_chapter, viewport, color_scheme
):
    page = first_chapter(viewport, color_scheme)
    wide = add_printed_output(page, "a printed table, one row: " + "  column" * 20)
    narrow = add_printed_output(page, "a short line")
    wait_for_transitions(page)
    problems = scroll_cue_problems(page, wide, "a 186-character line") + no_cue_problems(
        page, narrow, "a short line"
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_every_output_code_block_and_table_fits_or_shows_that_it_scrolls(readings, viewport):
    """In every chapter: each output, code block and markdown table either fits its box or shows
    a cue (checked on the screen for the first of each kind, by computed style for the rest)."""
    problems = [p for reading in readings(viewport).values() for p in reading.scroll_problems]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_commands_and_names_in_inline_code_never_break_inside_a_word(readings, viewport):
    problems = [
        f"{name}: {problem}"
        for name, reading in readings(viewport).items()
        for problem in reading.broken_tokens
    ]
    assert not problems, "\n".join(problems)


def test_every_markdown_table_fits_the_desktop_column(readings):
    """At 1280 px no table needs its scroll cue: the reader sees every column at once."""
    problems = [
        f"{name}: the table {text!r} is wider than the column ({wide} px in {room})"
        for name, reading in readings(DESKTOP).items()
        for text, wide, room in reading.tables_wider
    ]
    assert not problems, "\n".join(problems)


#: What the chapters are told a phone's output box shows uncut (COMMON.md, issue 19).
PHONE_LINE_CHARACTERS = 44


def test_a_44_character_printed_line_fits_its_box_on_a_390_px_phone(first_chapter):
    """At full size; a table's row wider than that is set smaller to fit, down to 10 px, and a
    60-character one no longer fits (the measurement must see it)."""
    page = first_chapter(PHONE)
    # Rows of tables (a gap of two spaces), which never wrap
    fits, wide = f"{'x' * 20}  {'x' * (PHONE_LINE_CHARACTERS - 22)}", "y" * 29
    add_printed_output(page, fits)
    add_printed_output(page, f"{wide}  {wide}")
    too_long = [text for text, _, _ in printed_line_count(page).wide]
    assert fits not in too_long, "a 44-character line is cut off"
    assert f"{wide}  {wide}" in too_long, "the measurement misses a wide line"


SENTENCE = "a printed sentence that is longer than a phone's line is wide"
TABLE_ROW = "a   row   of   a   table   longer   than   a   phone's   line"


def test_on_a_phone_a_printed_sentence_wraps_hung_and_a_table_row_scrolls(first_chapter):
    page = first_chapter(PHONE)
    add_printed_output(page, SENTENCE)
    add_printed_output(page, TABLE_ROW)
    wait_for_transitions(page)
    count = printed_line_count(page)
    wide = [text for text, _, _ in count.wide]
    assert TABLE_ROW in wide and TABLE_ROW not in count.wrapped, "a table's row should scroll"
    assert SENTENCE not in wide and SENTENCE in count.wrapped, "a sentence should wrap"
    hung = [
        (text, indent)
        for text, indent in code_lines(page, PRINTED_OUTPUT).wrapped
        if text == SENTENCE
    ]
    assert hung and hung[0][1] >= MIN_CONTINUATION_INDENT_CH, f"not hung right of its text: {hung}"


def test_the_measurement_sees_a_printed_line_that_wraps(first_chapter):
    """Wrapping would hide overflow and break a table's columns: the count must notice it."""
    page = first_chapter(PHONE)
    wrapping = add_printed_output(page, "a row of a table " * 6)
    wrapping.evaluate("pre => { pre.style.whiteSpace = 'pre-wrap'; }")
    assert "a row of a table " * 6 in printed_line_count(page).wrapped


def test_code_on_a_phone_wraps_whole_with_its_continuations_right_of_the_lines_text(readings):
    """At 390 px no line of a code cell, listing or solution is cut off (it used to be a third to
    two thirds of them, scrolled to sideways); a line that wraps continues right of its own first
    character (at or left of it, 894 of them read as a new statement or a dedent), in rows of 10
    characters or more (a line aligned under a bracket, hung at its indentation, took 18 rows of
    one character: with that CSS back, this test names such lines in several chapters). Without
    the phone's wrapping the same measurement finds lines cut off."""
    problems, lines, wrapped = [], 0, 0
    for name, reading in readings(PHONE).items():
        problems += code_line_problems(name, reading.code)
        lines, wrapped = lines + reading.code.lines, wrapped + len(reading.code.wrapped)
    unwrapped_cut = readings(PHONE)[CHAPTERS[1].name].unwrapped_cut
    print(f"\n390 px: {lines} code lines, {wrapped} of them wrapped; {unwrapped_cut} cut unwrapped")
    assert unwrapped_cut, "the measurement misses code lines cut off"
    assert lines > 100, f"only {lines} code lines found"
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_a_wrapped_code_line_shows_a_mark_before_its_continuation(readings):
    """In every chapter, a code cell's and a solution's first wrapped line, as the screen shows it:
    a continuation mark between the line's first character and its second row's text."""
    problems = [p for reading in readings(PHONE).values() for p in reading.marks]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("selector, where", WRAPPING_CODE, ids=[w for _, w in WRAPPING_CODE])
def test_the_continuation_mark_shows_in_the_dark_theme_too(visit, book_url, selector, where):
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}", viewport=PHONE, color_scheme="dark").page
    open_every_toggle(page)
    wait_for_transitions(page)
    problems = continuation_mark_problems(page, selector, where)
    assert not problems, "\n".join(problems)


#: The text of a code block's lines as the reader's selection copies it.
SELECTED_TEXT = """pre => {
    const range = document.createRange();
    range.selectNodeContents(pre);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    return getSelection().toString();
}"""


def test_copying_wrapped_code_gives_its_lines_as_written(visit, book_url):
    """At 390 px, a code cell whose lines wrap behind marks copies as the notebook has it: by its
    copy button, and selected. The marks and the hanging rows are the page's, not the code's."""
    page = visit(
        f"{book_url}/{CHAPTERS[0].url_path}",
        viewport=PHONE,
        permissions=["clipboard-read", "clipboard-write"],
    ).page
    sources = {
        "".join(cell["source"]).rstrip("\n")
        for cell in json.loads(CHAPTERS[0].notebook.read_text())["cells"]
        if cell["cell_type"] == "code"
    }
    gap = page.eval_on_selector_all(WRAPPING_CODE[0][0], CONTINUATION_GAP)
    assert gap, "no code cell wraps at 390 px"
    code = page.locator(WRAPPING_CODE[0][0]).nth(gap["index"])
    assert code.evaluate(SELECTED_TEXT).rstrip("\n") in sources, "selecting it copies other text"
    code.hover()
    code.locator("xpath=following-sibling::button[contains(@class, 'copybtn')]").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied in sources, f"the copy button copies other text: {copied!r}"


# Moved here from test_reading_on_every_screen.py, where each loaded every chapter again (16 page
# loads, about 20 s of CPU): the same measurements, on the pages ``readings`` already laid out
# with every toggle open.


def test_no_line_of_code_or_output_is_cut_off_on_a_desktop(readings):
    problems = [
        f"{name}: {problem}"
        for name, reading in readings(DESKTOP).items()
        for problem in reading.cut_off + reading.box_overflow
    ]
    assert not problems, "\n".join(problems)


def test_answers_and_feedback_wrap_on_a_phone(readings):
    problems = [
        f"{name}: {problem}"
        for name, reading in readings(PHONE).items()
        for problem in reading.box_overflow
    ]
    assert not problems, "\n".join(problems)


#: Each code line's indentation and where its text starts on screen (x of its first character
#: that is not a space), for every code block on the page.
TEXT_STARTS = """blocks => blocks.map(pre => [...pre.querySelectorAll('.mha-line')].map(line => {
    const indent = Number(line.style.getPropertyValue('--mha-indent'));
    const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const i = node.data.search(/\\S/);
        if (i < 0) continue;
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const first = range.getClientRects()[0], row = line.getClientRects()[0];
        // null: not drawn (in a closed box), or its first word wrapped to the next row
        const x = first && row && first.top < row.top + 2 ? first.left : null;
        return [indent, x, line.textContent.trim().slice(0, 40)];
    }
    return [indent, null, ''];
}))"""


def nesting_problems(page, name):
    """Each code line on ``page`` indented deeper than the one above it but starting at or left of
    it on screen, or indented alike but starting elsewhere (a line whose first word wrapped, or
    that is not drawn, aside)."""
    problems = []
    for block in page.eval_on_selector_all(CODE, TEXT_STARTS):
        for (indent, x, _), (deeper, x2, text) in zip(block, block[1:]):
            if None in (x, x2) or deeper < indent:
                continue
            if deeper > indent and x2 <= x + 1 or deeper == indent and abs(x2 - x) > 1:
                problems.append(f"{name}: {text!r} ({deeper}) at {x2:.0f}, {x:.0f} above")
    return problems


def test_on_a_phone_code_keeps_its_nesting(readings):
    """At 390 px a line indented deeper than the one above it starts right of it, and one indented
    alike starts where it does: a block's body stays inside its statement, and an argument aligned
    under a bracket (drawn nearer, to leave it room) stays inside its call. Collapsing every line
    indented over 12 characters to 12 broke chapter 7's `if` and its body (both at 12)."""
    problems = [p for reading in readings(PHONE).values() for p in reading.nesting]
    assert not problems, "\n".join(problems)
