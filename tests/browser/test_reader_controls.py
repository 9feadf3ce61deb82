"""Every reader can use the page's controls: named toggles (``toggle_name_problems``, run on the
pages test_accessibility.py opens), visible focus, targets a finger can tap, nothing over the
text, answer boxes whose evidence a phone shows whole, and an answer key when printed.

One page per width is reused across chapters, so the whole file opens each chapter a few times.
"""

import re
from io import BytesIO

import pytest
from PIL import Image, ImageChops
from pypdf import PdfReader

from .book_site import (
    DESKTOP,
    PHONE,
    chapters,
    clear_site_data,
    open_every_toggle,
    wait_for_transitions,
)

CHAPTERS = chapters()
MIN_TAP_PX = 44
GENERIC_NAME = "Toggle hidden content"

#: Every control a reader tabs to in the article's header and the article's toggles.
HEADER_CONTROLS = (
    ".bd-header-article button:visible, .bd-header-article a.btn:visible, "
    "article.bd-article details > summary:visible"
)


@pytest.fixture(scope="module")
def phone_page(browser):
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def desktop_page(reading_page, book_url):
    """A page at 1280 px in the dark scheme, in the run's one context (conftest.py; a context of
    its own started cold), with nothing an earlier page stored at the book's origin."""
    page = reading_page(DESKTOP, "dark")
    clear_site_data(page, book_url)
    yield page
    page.close()


def toggle_names(page):
    """``[(name, visible label), ...]`` of every disclosure toggle, as Chromium's accessibility
    tree names it."""
    session = page.context.new_cdp_session(page)
    try:
        nodes = session.send("Accessibility.getFullAXTree")["nodes"]
    finally:
        session.detach()
    return [
        node.get("name", {}).get("value", "")
        for node in nodes
        if node.get("role", {}).get("value") == "DisclosureTriangle" and not node.get("ignored")
    ]


def toggle_name_problems(page):
    """Every toggle is named for what it opens: its name starts with the label it shows, a
    reveal's says which question it answers, none keeps the generic name. Run by
    test_accessibility.py on each chapter's page at 1280 px in the dark scheme, with every toggle
    closed, before axe (it had a load of every chapter of its own, about 1 s of CPU each)."""
    names = toggle_names(page)
    labels = page.locator("article.bd-article details > summary").evaluate_all(
        "ss => ss.filter(s => s.offsetParent).map(s => s.innerText.trim().split('\\n')[0])"
    )
    if not names:
        return ["no toggles found in the accessibility tree"]
    problems = [f"a toggle is still named {GENERIC_NAME!r}"] if GENERIC_NAME in names else []
    problems += [
        f"no toggle named {label!r}…"
        for label in labels
        if not any(name.startswith(label) for name in names)
    ]
    reveals = [n for n in names if n.startswith("Reveal the answer")]
    problems += [
        f"a reveal is not named for its question: {n!r}"
        for n in reveals
        if not n.startswith("Reveal the answer to: ")
    ]
    return problems


def tap_target_problems(page):
    sizes = page.locator(HEADER_CONTROLS).evaluate_all(
        """els => els.map(e => {
            const r = e.getBoundingClientRect();
            return [e.getAttribute('aria-label') || e.innerText.trim().split('\\n')[0],
                    Math.round(r.width), Math.round(r.height)];
        })"""
    )
    return [
        f"{name!r} is {w}×{h} px" for name, w, h in sizes if min(w, h) < MIN_TAP_PX and w * h > 0
    ]


def focus_ring_problems(page, locator, name):
    """The control shows a ring when it takes keyboard focus: most of its edge changes colour
    (a ring clipped to two side bars changes only a small part of it)."""
    locator.scroll_into_view_if_needed()
    page.mouse.move(0, 0)
    box = locator.bounding_box()
    clip = {"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"]}
    before = page.screenshot(clip=clip)
    locator.focus()
    page.wait_for_timeout(150)
    after = page.screenshot(clip=clip)
    page.evaluate("document.activeElement.blur()")
    a, b = (Image.open(BytesIO(png)).convert("RGB") for png in (before, after))
    diff = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v > 40 else 0)
    changed = diff.histogram()[255]
    scale = a.width / box["width"]
    edge = 2 * (box["width"] + box["height"]) * 2 * scale * scale  # a 2 px ring's area
    if changed < 0.5 * edge:
        return [f"{name}: focus changes {changed} pixels, a visible ring needs {edge * 0.5:.0f}"]
    return []


def test_phone_controls_are_big_enough_and_show_focus(phone_page, book_url):
    page = phone_page
    page.goto(f"{book_url}/{CHAPTERS[1].url_path}")
    page.keyboard.press("Tab")  # keyboard modality: programmatic focus then shows :focus-visible
    problems = tap_target_problems(page)
    for selector, name in [
        (".bd-header-article .primary-toggle", "☰"),
        (".bd-header-article .dropdown-launch-buttons > button", "launch"),
        (".bd-header-article .btn-source-repository-button", "repository"),
        (".bd-header-article .dropdown-download-buttons > button", "download"),
        (".bd-header-article .theme-switch-button", "colour mode"),
        ("article .cell.tag_reveal > details > summary", "Reveal the answer"),
    ]:
        problems += focus_ring_problems(page, page.locator(selector).first, name)
    assert not problems, "\n".join(problems)


def test_nothing_floats_over_the_text_after_a_tap_or_a_scroll(phone_page, book_url):
    page = phone_page
    page.goto(f"{book_url}/{CHAPTERS[1].url_path}")
    page.locator(".bd-header-article .theme-switch-button").tap()
    page.wait_for_timeout(400)
    assert not page.locator(".tooltip:visible").count(), "a tooltip stays after a tap"
    page.mouse.wheel(0, 3000)
    page.evaluate("window.scrollBy(0, 3000)")
    page.wait_for_timeout(400)
    assert not page.locator("#pst-back-to-top").is_visible(), "'Back to top' covers the text"


#: What an answer box shows at 390 px: how far each table, figure or code block in it reaches
#: past what the reader sees, and whether a box that must scroll takes keyboard focus.
CUT_IN_BOXES = """() => Array.from(document.querySelectorAll(
        'article .mha-box pre, article .mha-box img, article .mha-box table'))
    .filter(el => el.offsetParent)
    .map(el => {
        const box = el.closest('.mha-box').getBoundingClientRect();
        const right = el.getBoundingClientRect().right;
        const cut = Math.max(el.scrollWidth - el.clientWidth, right - box.right);
        const scroller = el.closest('[tabindex="0"][aria-label]');
        return [el.tagName, el.innerText ? el.innerText.split('\\n')[0].slice(0, 40) : '',
                Math.round(cut), Boolean(scroller)];
    })
    .filter(([, , cut]) => cut > 1)"""


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.name)
def test_answer_boxes_show_their_evidence_on_a_phone(phone_page, book_url, chapter):
    page = phone_page
    page.goto(f"{book_url}/{chapter.url_path}")
    open_every_toggle(page)
    page.wait_for_timeout(200)
    problems = [
        f"{tag} {text!r} is cut by {cut} px"
        + ("" if focusable else " in a box the keyboard cannot scroll")
        for tag, text, cut, focusable in page.evaluate(CUT_IN_BOXES)
        if not (tag == "IMG" and focusable)  # a figure may scroll, by keyboard too
    ]
    assert not problems, "\n".join(problems)


#: What each hidden part of a chapter shows once opened: every answer, hint and solution cell's
#: text without its toggle's label, and the labels themselves.
HIDDEN_PARTS = """() => {
    const labels = Array.from(document.querySelectorAll('article details > summary'))
        .map(s => s.innerText.trim().split('\\n')[0]).filter(Boolean);
    // The longest run of a cell's printed text outside the code font. Text in the code font
    // comes back from Chromium's PDF to pypdf on some runs and not on others, so code is
    // checked in the print view instead (CODE_SHOWN_IN_PRINT).
    const proseRun = cell => {
        let runs = [''];
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
            const el = n.parentElement;
            const text = (el.textContent || '').trim();
            if (!el.closest('.cell_output') || labels.includes(text)) continue;
            if (/mono/i.test(getComputedStyle(el).fontFamily)) runs.push('');
            else runs[runs.length - 1] += ' ' + n.data;
        }
        return runs.reduce((a, b) => (b.length > a.length ? b : a), '');
    };
    const parts = Array.from(document.querySelectorAll(
            'article .cell.tag_reveal, article .cell.tag_hint, article .cell.tag_solution'))
        .map(cell => [cell.className.match(/tag_(reveal|hint|solution)/)[1], proseRun(cell)]);
    return [parts, [...new Set(labels)]];
}"""

#: How many code blocks of answers, hints and solutions the print view lays out, of how many.
CODE_SHOWN_IN_PRINT = """() => {
    const blocks = Array.from(document.querySelectorAll(
        'article .cell.tag_reveal .cell_output pre, article .cell.tag_hint .cell_output pre, '
        + 'article .cell.tag_solution .cell_output pre'));
    return [blocks.filter(b => b.offsetHeight > 0 && b.innerText.trim()).length, blocks.length];
}"""
#: The words a toggle's label and the prose around it share: the prose may name a toggle.
PROSE = "() => Array.from(document.querySelectorAll('article p'), p => p.innerText).join(' ')"


def letters_and_digits(text):
    """Text as a PDF's extracted text and the page's can agree on: line breaks, hyphens and
    symbols a font draws differently dropped."""
    return re.sub(r"[^0-9A-Za-z]", "", text)


def test_a_printed_chapter_is_an_answer_key(desktop_page, book_url):
    """Chapter 2, printed to PDF in the dark colour mode with every toggle closed: the PDF's text
    holds every answer, hint and solution (the start and the end of each), no toggle's label, and
    the page prints light."""
    page = desktop_page
    chapter = CHAPTERS[1]
    page.goto(f"{book_url}/{chapter.url_path}")
    open_every_toggle(page)
    parts, labels = page.evaluate(HIDDEN_PARTS)
    page.goto(f"{book_url}/{chapter.url_path}")  # every toggle closed again, as a reader prints
    prose = " ".join(page.evaluate(PROSE).split())
    page.emulate_media(media="print")
    try:
        # print.js opens every toggle when the print medium starts; on a busy machine that can
        # take longer than any fixed pause, so wait for the page itself to say it is done.
        page.wait_for_function(  # asked every 100 ms, not every frame (see test_live_code.py)
            "!document.querySelector('article details:not([open])')", polling=100, timeout=10_000
        )
        wait_for_transitions(page)
        code_shown, code_blocks = page.evaluate(CODE_SHOWN_IN_PRINT)
        colours = page.evaluate(
            "[getComputedStyle(document.body).backgroundColor,"
            " getComputedStyle(document.querySelector('article p')).color]"
        )
        pdf = PdfReader(BytesIO(page.pdf()))
    finally:
        page.emulate_media(media="screen")
    text = " ".join(" ".join(p.extract_text() for p in pdf.pages).split())
    printed = letters_and_digits(text)
    kinds = [kind for kind, _ in parts]
    assert kinds.count("reveal") == chapter.hidden_cells_in_notebook().count("reveal")
    assert {"reveal", "hint", "solution"} <= set(kinds), kinds
    assert code_shown == code_blocks > 0, f"{code_shown} of {code_blocks} code blocks printed"
    missing = []
    for kind, part in parts:
        words = letters_and_digits(part)
        if kind == "solution" and len(words) < 40:  # a solution that is all code: see above
            continue
        assert len(words) > 40, f"a {kind} shows almost nothing on screen: {part!r}"
        missing += [
            f"{kind}: {part[:60]!r}" for end in (words[:40], words[-40:]) if end not in printed
        ]
    assert not missing, "not in the printed PDF:\n" + "\n".join(missing)
    dead = [label for label in labels if text.count(label) > prose.count(label)]
    assert not dead, f"toggle labels printed as dead buttons: {dead}"
    assert colours == ["rgb(255, 255, 255)", "rgb(34, 40, 50)"], f"printed colours {colours}"
    assert len(pdf.pages) > 5, f"{len(pdf.pages)} pages"
