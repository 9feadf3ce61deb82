"""What issue 11 found broken, checked as readers meet it: at 390 px (phone), 900 px (tablet) and
1280 px (desktop), in the light and the dark theme.

- the ☰ button opens the chapter list, "On this page" the page's contents, and on a desktop ☰
  hides and shows the chapter list (each button is rendered twice; ``_static/navigation.js``);
- every kind of coloured box keeps WCAG AA contrast in both themes (``_static/boxes.css``), and
  figures keep their colours in the dark theme;
- no code or printed line is cut off, and every box wraps its text (test_phone_reading.py);
- every figure is sharp on a high-density screen (test_phone_reading.py, test_screenshots.py);
- revealed answers lead with the answer, and no page speaks to notebook users only;
- a locally built copy says its launch links need the published repository; no placeholder author.
"""

import re

import pytest

from mha.checks import CheckResult
from mha.exercise import Note
from mha.reveal import Revealed

from .book_site import (
    BUILD,
    DESKTOP,
    PHONE,
    TABLET,
    chapters,
    landing_page,
    wait_for_transitions,
)

CHAPTERS = chapters()
PAGES = [landing_page()] + [c.url_path for c in CHAPTERS]
WCAG_AA = 4.5
BOXES = {
    "check passed": CheckResult(True, "Right: each head returns d_out values per token."),
    "check failed": CheckResult(False, "Not yet: the output is 4 wide, not 2."),
    "hint": Note("Hint 1 of 2", "Which argument sets the width of each head?"),
    "solution": Note("Solution", "mha = MultiHeadAttentionWrapper(d_out=1)", code=True),
    "reveal": Revealed(
        (2, 6, 4),
        "Your prediction, (2, 6, 2), is not what the code computes.",
        "Batch and tokens pass through `untouched`.",
    ),
}
#: Words only a notebook user can act on (tests/test_notebooks.py keeps them out of the outputs).
NOTEBOOK_ONLY = ("none recorded", "click its •••")


def on_screen(box, viewport):
    return (
        box is not None
        and box["width"] > 0
        and box["x"] >= -1
        and box["x"] + box["width"] <= viewport["width"] + 1
    )


# ---------------------------------------------------------------------------------------------
# Navigation
# ---------------------------------------------------------------------------------------------


def test_the_menu_button_opens_the_chapter_list_on_a_phone(visit, book_url):
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}", viewport=PHONE).page
    page.locator(".primary-toggle:visible").click()
    panel = page.locator("#pst-primary-sidebar-modal")
    panel.wait_for(state="visible", timeout=5_000)
    assert on_screen(panel.bounding_box(), PHONE), f"the chapter list is at {panel.bounding_box()}"
    links = panel.locator("nav.bd-docs-nav a")
    assert links.count() >= len(CHAPTERS) and links.last.is_visible()
    links.filter(has_text=re.compile("Weight splits")).first.click()
    page.wait_for_url(re.compile("03_weight_splits"))


def test_on_this_page_opens_the_page_contents_on_a_tablet(visit, book_url):
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}", viewport=TABLET).page
    assert not on_screen(page.locator("#pst-secondary-sidebar").bounding_box(), TABLET)
    page.locator(".secondary-toggle:visible").click()
    panel = page.locator("#pst-secondary-sidebar-modal")
    panel.wait_for(state="visible", timeout=5_000)
    assert on_screen(panel.bounding_box(), TABLET), (
        f"the page contents are at {panel.bounding_box()}"
    )
    assert panel.locator("nav a").first.is_visible()
    page.keyboard.press("Escape")
    panel.wait_for(state="hidden", timeout=5_000)


def test_the_menu_button_hides_and_shows_the_chapter_list_on_a_desktop(visit, book_url):
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}", viewport=DESKTOP).page
    sidebar = page.locator("#pst-primary-sidebar")
    assert on_screen(sidebar.bounding_box(), DESKTOP) and sidebar.is_visible()
    toggle = page.locator(".primary-toggle:visible")
    toggle.click()
    page.wait_for_function(
        "() => { const r = document.querySelector('#pst-primary-sidebar')"
        ".getBoundingClientRect(); return r.right <= 0 || r.width === 0; }",
        timeout=5_000,
    )
    toggle.click()
    page.wait_for_function(
        "() => document.querySelector('#pst-primary-sidebar').getBoundingClientRect().left >= 0",
        timeout=5_000,
    )
    assert sidebar.locator("nav.bd-docs-nav a").first.is_visible()


# ---------------------------------------------------------------------------------------------
# Dark mode
# ---------------------------------------------------------------------------------------------


def parse_rgb(css):
    return tuple(int(float(v)) for v in re.findall(r"[\d.]+", css)[:3])


def contrast(a, b):
    def luminance(rgb):
        linear = [
            (c / 255) / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4
            for c in rgb
        ]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


SHOW_BOXES = """boxes => {
    const article = document.querySelector('article.bd-article');
    for (const html of boxes) {
        const output = document.createElement('div');
        output.className = 'cell_output docutils container';
        output.innerHTML = '<div class="output text_html">' + html + '</div>';
        article.append(output);
    }
}"""
BOX_COLOURS = """boxes => boxes.map(b => {
    const style = getComputedStyle(b);
    return [style.color, style.backgroundColor, getComputedStyle(b.querySelector('strong')).color];
})"""


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_every_kind_of_box_has_aa_contrast_in_the_books_theme(visit, book_url, color_scheme):
    """Each box as the reader's code draws it, placed in a chapter page as myst-nb places it."""
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}", color_scheme=color_scheme).page
    assert page.evaluate("document.documentElement.dataset.theme") == color_scheme
    page.evaluate(SHOW_BOXES, [box._repr_html_() for box in BOXES.values()])
    wait_for_transitions(page)
    colours = page.eval_on_selector_all("article.bd-article .mha-box", BOX_COLOURS)[-len(BOXES) :]
    page_background = parse_rgb(page.evaluate("getComputedStyle(document.body).backgroundColor"))
    problems = []
    for name, (text, background, title) in zip(BOXES, colours, strict=True):
        text, background, title = parse_rgb(text), parse_rgb(background), parse_rgb(title)
        for what, colour in (("text", text), ("title", title)):
            if contrast(colour, background) < WCAG_AA:
                problems.append(
                    f"{name}: {what} {colour} on {background}: {contrast(colour, background):.2f}"
                )
        if color_scheme == "dark" and sum(background) > 3 * 128:
            problems.append(
                f"{name}: a light box {background} glares on the dark page {page_background}"
            )
    assert not problems, "\n".join(problems)


# Every chapter in the dark theme (boxes, solutions, figures): test_solutions.dark_theme_problems,
# on the dark page test_accessibility.py opens for axe.


# ---------------------------------------------------------------------------------------------
# Nothing cut off, sharp figures
# ---------------------------------------------------------------------------------------------


# Nothing cut off, on a desktop and on a phone: test_phone_reading.py, on its pages.


# Every figure sharp on a high-density screen: at 1280 px, test_phone_reading.py, on the page it
# reads with every toggle open; at 390 px, test_screenshots.phone_open_problems, on the open page
# test_phone_reading.py reads there.


# ---------------------------------------------------------------------------------------------
# Written for web readers; the real address
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_no_page_tells_the_reader_to_run_a_cell_or_set_a_variable(path):
    text = (BUILD / path).read_text()
    found = [words for words in NOTEBOOK_ONLY if words in text]
    assert not found, f"{path} says {found}: words for notebook users only"


@pytest.mark.parametrize("path", PAGES)
def test_no_page_names_a_placeholder_author(path):
    assert "The book's authors" not in (BUILD / path).read_text()


def test_a_local_build_says_its_launch_links_need_the_published_repository(visit, book_url):
    page = visit(f"{book_url}/{CHAPTERS[0].url_path}").page
    binder = page.eval_on_selector_all(
        ".dropdown-launch-buttons a", "links => links.map(a => a.href)"
    )
    notice = page.locator(".mha-launch-notice")
    if any("/example-org/" in href for href in binder):
        assert notice.is_visible() and "published repository" in notice.inner_text()
        # This build's Run asks Binder: it needs the published repository too (the live build's
        # notice says its Run works: test_live_code.py)
        assert '"Run this page" buttons need' in notice.inner_text(), notice.inner_text()
    else:
        assert not notice.count(), (
            "the launch links point at a real repository, yet the notice shows"
        )
