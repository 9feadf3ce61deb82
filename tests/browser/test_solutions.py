"""A solution shows its code as the book shows code: highlighted, with a copy button.

``mha.exercise.highlighted_python`` draws it; the theme colours it and sphinx-copybutton adds
the button. Checked as a reader meets it at 390, 900 and 1280 px in the light and the dark theme:
the colours on screen (several, each with AA contrast on what is behind it), a copy button that
appears on hover and puts the exact solution on the clipboard.
"""

import json

import pytest

from mha.fused_exercise import fused_attention

from .book_site import DESKTOP, PHONE, TABLET, chapters, wait_for_transitions
from .test_reading_on_every_screen import BOX_COLOURS, WCAG_AA, contrast, parse_rgb

CHAPTERS = chapters()
VIEWPORTS = [PHONE, TABLET, DESKTOP]
WIDTHS = [f"{v['width']}px" for v in VIEWPORTS]
SOLUTION = fused_attention.solution()
SOLUTION_CODE = "article.bd-article .mha-solution div.highlight pre"

#: Places the solution box, as myst-nb places an HTML output, at the top of the article before
#: the page's own scripts run (so sphinx-copybutton sees it, as it sees a solution in the book).
SHOW_SOLUTION = """document.addEventListener('DOMContentLoaded', () => {
    const output = document.createElement('div');
    output.className = 'cell_output docutils container';
    output.innerHTML = '<div class="output text_html">' + %s + '</div>';
    document.querySelector('article.bd-article').prepend(output);
});"""

#: Each highlighted token's colour, the colour it is drawn on (the first opaque background among
#: it and its ancestors), and whatever on the way would make those two colours not what shows: a
#: translucent colour or background, an opacity, a filter, a background image.
TOKEN_COLOURS = """spans => spans.filter(s => s.textContent.trim()).map(span => {
    // '1' for rgb(), the alpha of rgba(), null for any other notation (color(), color-mix())
    const alpha = c =>
        c.startsWith('rgb(') ? '1' : (c.match(/^rgba\\(.*,\\s*([\\d.]+)\\)$/) || [])[1] ?? null;
    const colour = getComputedStyle(span).color;
    const unsure = alpha(colour) === '1' ? [] : [`colour ${colour}`];
    let background = 'rgb(255, 255, 255)';
    for (let e = span; e; e = e.parentElement) {
        const style = getComputedStyle(e);
        if (style.opacity !== '1') unsure.push(`opacity ${style.opacity}`);
        if (style.filter !== 'none') unsure.push(`filter ${style.filter}`);
        if (style.backgroundImage !== 'none') unsure.push('a background image');
        const c = style.backgroundColor;
        if (alpha(c) === '1') { background = c; break; }
        if (alpha(c) !== '0') unsure.push(`background ${c}`);
    }
    return [span.className, span.textContent, colour, background, unsure];
})"""


def colour_problems(page, where):
    """Each highlighted token of the code blocks ``where`` (and any text of theirs outside a
    token) below WCAG AA contrast on what it is drawn on, or drawn in a way this check cannot
    judge; fewer than three colours in all (not highlighted)."""
    problems = []
    tokens = page.eval_on_selector_all(f"{where}, {where} span[class]", TOKEN_COLOURS)
    if not tokens:
        return [f"{where}: no highlighted tokens"]
    colours = {colour for _, _, colour, _, _ in tokens}
    if len(colours) < 3:
        problems.append(f"{where}: its code is drawn in {len(colours)} colour(s): not highlighted")
    for css, text, colour, background, unsure in tokens:
        ratio = contrast(parse_rgb(colour), parse_rgb(background))
        if unsure:
            problems.append(f"{where}: {text!r} ({css}) cannot be judged: {', '.join(unsure)}")
        elif ratio < WCAG_AA:
            problems.append(f"{where}: {text!r} ({css}) is {colour} on {background}: {ratio:.2f}")
    return problems


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", VIEWPORTS, ids=WIDTHS)
def test_a_solution_is_highlighted_code_with_a_copy_button(visit, book_url, viewport, color_scheme):
    page = visit(
        f"{book_url}/{CHAPTERS[0].url_path}",
        viewport=viewport,
        color_scheme=color_scheme,
        init_script=SHOW_SOLUTION % json.dumps(SOLUTION._repr_html_()),
        permissions=["clipboard-read", "clipboard-write"],
    ).page
    wait_for_transitions(page)
    code = page.locator(SOLUTION_CODE).first
    assert not code.is_visible(), "the solution shows before the reader asks for it"
    # Outside every toggle of the page the box is its own (tests/browser/test_hidden_boxes.py)
    page.locator("article.bd-article .mha-solution summary").first.click()
    assert code.is_visible(), "the solution's code is not shown"
    problems = colour_problems(page, SOLUTION_CODE)
    assert not problems, "\n".join(problems)
    button = page.locator("article.bd-article .mha-solution button.copybtn").first
    code.hover()
    page.wait_for_function(
        "b => getComputedStyle(b).opacity === '1'", arg=button.element_handle(), timeout=5_000
    )
    box, button_box = code.bounding_box(), button.bounding_box()
    assert (
        box["x"] <= button_box["x"]
        and button_box["x"] + button_box["width"] <= box["x"] + box["width"] + 1
    ), "the copy button is not on the code it copies"
    button.click()
    copied = page.evaluate("navigator.clipboard.readText()")
    # sphinx-copybutton drops the last newline, so that pasting does not run the code at once
    assert copied == SOLUTION.text.rstrip("\n"), "the copy button copies something else"


def solution_problems(page, chapter):
    """A chapter's own solutions, on its page with every toggle open: each is highlighted code
    with a copy button, in colours that read (their committed outputs come from the current
    package)."""
    problems = []
    solutions = page.locator("article.bd-article .mha-solution")
    for i in range(solutions.count()):
        where = f"{chapter.name}: solution {i + 1}"
        if not solutions.nth(i).locator("div.highlight pre + button.copybtn").count():
            problems.append(
                f"{where} has no highlighted code with a copy button (re-execute the chapter)"
            )
    if page.locator(SOLUTION_CODE).count():
        problems += [f"{chapter.name}: {p}" for p in colour_problems(page, SOLUTION_CODE)]
    return problems


# Every solution of the book in the light theme: test_phone_reading.py, on the page it reads
# at 1280 px with every toggle open (``solution_problems``); in the dark theme:
# ``dark_theme_problems`` below, which test_accessibility.py runs on the dark page it opens for
# axe.


FIGURE_STYLES = (
    "images => images.map(i => [getComputedStyle(i).filter, getComputedStyle(i).backgroundColor])"
)


def dark_theme_problems(page, chapter):
    """A chapter in the dark theme, every toggle open: the boxes take the theme's colours with AA
    contrast, the solutions are highlighted code with a copy button in colours that read
    (``solution_problems``, which test_phone_reading.py runs in the light theme), and the theme
    neither dims nor recolours a figure. Each check once loaded every chapter for itself (about
    2 s of Chromium's CPU a chapter), then the three shared a load; now they run on the page
    test_accessibility.py opens for axe at 1280 px in the dark scheme."""
    problems = []
    for text, background, _ in page.eval_on_selector_all(
        "article.bd-article .mha-box", BOX_COLOURS
    ):
        ratio = contrast(parse_rgb(text), parse_rgb(background))
        if ratio < WCAG_AA:
            problems.append(f"{chapter.name}: a box's text has contrast {ratio:.2f}")
        if sum(parse_rgb(background)) > 3 * 128:
            problems.append(f"{chapter.name}: a light box {background} on the dark page")
    problems += solution_problems(page, chapter)
    styles = page.eval_on_selector_all("article.bd-article .cell_output img", FIGURE_STYLES)
    if chapter.figures_in_notebook() and not styles:
        problems.append(f"{chapter.name}: no figure found: the figures' colours went unchecked")
    for image_filter, background in styles:
        if image_filter != "none":
            problems.append(f"{chapter.name}: the theme dims a figure: filter {image_filter}")
        if parse_rgb(background) != (255, 255, 255):
            problems.append(f"{chapter.name}: a figure sits on {background}, not its white")
    return problems


def test_the_book_has_figures_for_the_dark_theme_check():
    """``dark_theme_problems`` checks the figures of the chapters that have some: there are some."""
    assert any(chapter.figures_in_notebook() for chapter in CHAPTERS)
