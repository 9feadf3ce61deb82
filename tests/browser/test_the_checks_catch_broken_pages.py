"""The page checks bite.

Each check runs on a copy of a built chapter page broken in the way it guards against. The
breakages are what a slip in a notebook or in ``_config.yml`` produces in the HTML: a reveal cell
without its ``hide-cell`` tag (no ``<details>`` toggle) or shown open, a figure without alt text
(Sphinx then writes the image's path as its alt) or drawn too wide for a phone, a launch link to
the wrong branch, a stylesheet from a CDN.
"""

import base64
import io
import re
import shutil

import pytest
from PIL import Image

from .book_site import (
    BUILD,
    PHONE,
    chapters,
    figure_problems,
    figure_sharpness_problems,
    figure_text_size_problems,
    hidden_cell_problems,
    launch_link_problems,
    offline_rendering_problems,
    scroll_cue_problems,
    scrolling_boxes,
    serve,
)
from .test_hidden_boxes import hidden_output_problems
from .test_phone_reading import add_printed_output

CHAPTER = next(
    (c for c in chapters() if c.hidden_cells_in_notebook() and c.figures_in_notebook()), None
)
pytestmark = pytest.mark.skipif(
    CHAPTER is None, reason="no chapter has both a reveal and a figure yet"
)

HIDDEN_CELL = re.compile(r'<div class="cell ([^"]*\btag_(?:reveal|solution)\b[^"]*)">')
OUTPUT_IMAGE_ALT = re.compile(r'(<div class="cell_output.*?<img )alt="[^"]*" src="([^"]*)"', re.S)


def without_toggle(html):
    """The first reveal/solution cell as myst-nb renders it without ``hide-cell``.

    That is, with no ``<details>`` toggle.
    """
    cell = HIDDEN_CELL.search(html)
    classes = " ".join(c for c in cell.group(1).split() if c != "tag_hide-cell")
    details = html.index("<details", cell.end())
    summary_end = html.index("</summary>", details) + len("</summary>")
    details_end = closing_details(html, summary_end)
    return (
        html[: cell.start()]
        + f'<div class="cell {classes}">'
        + html[cell.end() : details]
        + html[summary_end:details_end]
        + html[details_end + len("</details>") :]
    )


def closing_details(html, start):
    """Where the ``</details>`` that closes the toggle open at ``start`` begins (the answer box
    inside it has a ``<details>`` of its own)."""
    depth = 1
    for tag in re.finditer(r"<details\b|</details>", html[start:]):
        depth += 1 if tag.group(0) == "<details" else -1
        if depth == 0:
            return start + tag.start()
    raise ValueError("the toggle is never closed")


def toggle_open_on_load(html):
    """The first reveal/solution's toggle already open when the page loads."""
    details = html.index("<details", HIDDEN_CELL.search(html).end())
    return html[:details] + "<details open" + html[details + len("<details") :]


def alt_is_image_path(html):
    """The first figure as Sphinx renders it when the cell has no alt text.

    Sphinx then uses the image's path as the alt.
    """
    return OUTPUT_IMAGE_ALT.sub(r'\1alt="\2" src="\2"', html, count=1)


def without_alt(html):
    return OUTPUT_IMAGE_ALT.sub(r'\1src="\2"', html, count=1)


def png_uri(width, height):
    png = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(png, format="PNG")
    return "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()


def with_first_figure(html, uri):
    return OUTPUT_IMAGE_ALT.sub(
        lambda m: m.group(0).replace(f'src="{m.group(2)}"', f'src="{uri}"'), html, count=1
    )


def figure_drawn_too_wide(html):
    """The first figure as an 11-inch-wide drawing, which a phone shrinks to a third.

    That is 2200 px at 100 dpi, 2x.
    """
    return with_first_figure(html, png_uri(2200, 800))


def blurry_figure(html):
    """The first figure as a PNG of only as many pixels as it is shown at (one per CSS pixel)."""
    return with_first_figure(html, png_uri(300, 200))


def answer_before_its_code_toggle_removed(html):
    """The page without the script that reorders an opened reveal.

    That script puts a revealed answer first and its code behind a second toggle.
    """
    return html.replace('src="../_static/reveal.js', 'data-removed="../_static/reveal.js')


def without_the_scroll_cue(html):
    """The page without the stylesheet that draws a box's scroll cue."""
    return html.replace(
        'href="../_static/scroll-cue.css', 'data-removed="../_static/scroll-cue.css'
    )


def with_a_real_address(html):
    """The page as the deploy workflow builds it: repository.url is the repository it runs in."""
    return html.replace("example-org/mha-book", "real-org/mha-book")


def binder_on_master(html):
    return html.replace("/main?urlpath=", "/master?urlpath=")


def stylesheet_from_a_cdn(html):
    return html.replace(
        "</head>", '<link rel="stylesheet" href="https://cdn.example.org/book.css" /></head>', 1
    )


BREAKAGES = [
    without_toggle,
    toggle_open_on_load,
    alt_is_image_path,
    without_alt,
    figure_drawn_too_wide,
    blurry_figure,
    answer_before_its_code_toggle_removed,
    binder_on_master,
    stylesheet_from_a_cdn,
    with_a_real_address,
    without_the_scroll_cue,
]


@pytest.fixture(scope="module")
def broken_book(tmp_path_factory):
    """A copy of the built book, served locally.

    It holds one broken copy of the chapter page per breakage.
    """
    if not (BUILD / CHAPTER.url_path).exists():
        pytest.fail(f"No built book in {BUILD}: run `make html` first.")
    root = tmp_path_factory.mktemp("broken") / "html"
    shutil.copytree(BUILD, root)
    page = root / CHAPTER.url_path
    html = page.read_text()
    for breakage in BREAKAGES:
        broken = breakage(html)
        assert broken != html, (
            f"{breakage.__name__} did not change the page: update it to the current HTML"
        )
        page.with_name(f"{page.stem}-{breakage.__name__}.html").write_text(broken)
    with serve(root) as url:
        yield url


def broken_page(visit, broken_book, breakage, **options):
    stem = CHAPTER.url_path.removesuffix(".html")
    return visit(f"{broken_book}/{stem}-{breakage.__name__}.html", **options)


def test_a_reveal_without_its_hide_cell_toggle_fails_the_toggle_check(visit, broken_book):
    problems = hidden_cell_problems(broken_page(visit, broken_book, without_toggle).page, CHAPTER)
    assert any("has no toggle" in p for p in problems), problems


def test_an_answer_shown_on_load_fails_the_toggle_check(visit, broken_book):
    problems = hidden_cell_problems(
        broken_page(visit, broken_book, toggle_open_on_load).page, CHAPTER
    )
    assert any("visible before its toggle is clicked" in p for p in problems), problems


def test_a_figure_whose_alt_text_is_its_path_fails_the_figure_check(visit, broken_book):
    problems = figure_problems(broken_page(visit, broken_book, alt_is_image_path).page, CHAPTER)
    assert any("alt text is its file name" in p for p in problems), problems


def test_a_figure_without_alt_text_fails_the_figure_check(visit, broken_book):
    problems = figure_problems(broken_page(visit, broken_book, without_alt).page, CHAPTER)
    assert any("has no alt text" in p for p in problems), problems


def test_a_figure_drawn_too_wide_for_a_phone_fails_the_text_size_check(visit, broken_book):
    page = broken_page(visit, broken_book, figure_drawn_too_wide, viewport=PHONE).page
    problems = figure_text_size_problems(page)
    assert any("2200px wide" in p for p in problems), problems
    assert any("smallest text is" in p for p in problems), problems


def test_a_binder_link_to_another_branch_fails_the_launch_check(visit, broken_book):
    problems = launch_link_problems(broken_page(visit, broken_book, binder_on_master).page, CHAPTER)
    assert any("/master?" in p for p in problems), problems


def test_a_stylesheet_from_a_cdn_fails_the_offline_check(visit, broken_book):
    visited = broken_page(
        visit, broken_book, stylesheet_from_a_cdn, offline=True, wait_until="networkidle"
    )
    problems = offline_rendering_problems(visited.page, visited.blocked)
    assert any("cdn.example.org" in p for p in problems), problems


def test_a_figure_with_one_pixel_per_css_pixel_fails_the_sharpness_check(visit, broken_book):
    page = broken_page(visit, broken_book, blurry_figure).page
    page.evaluate(
        "document.querySelector('article .cell_output img').style.width = '300px'"
    )  # 1 px per px
    problems = figure_sharpness_problems(page)
    assert any("blurry" in p for p in problems), problems


def test_a_reveal_that_opens_on_its_code_fails_the_answer_first_check(visit, broken_book):
    page = broken_page(visit, broken_book, answer_before_its_code_toggle_removed).page
    problems = hidden_cell_problems(page, CHAPTER)
    assert any("second toggle" in p for p in problems), problems


def test_a_build_with_the_real_address_shows_no_launch_notice(visit, broken_book):
    page = broken_page(visit, broken_book, with_a_real_address).page
    assert page.locator("article.bd-article").count()
    assert not page.locator(".mha-launch-notice").count()


def test_output_that_scrolls_without_a_drawn_cue_fails_the_cue_check(visit, broken_book):
    page = broken_page(visit, broken_book, without_the_scroll_cue, viewport=PHONE).page
    # A printed table's row wider than a phone (the chapter's own may all fit, or wrap)
    add_printed_output(page, "a printed table, one row: " + "  column" * 20)
    box = next(box for box, facts in scrolling_boxes(page) if facts["wider"])
    problems = scroll_cue_problems(page, box, "the box")
    assert any("right edge shows no cue" in p for p in problems), problems


def test_a_box_left_closed_inside_an_opened_toggle_fails_the_one_click_check(visit, broken_book):
    """Without the script that opens a box inside the page's toggle, the reader would need a
    second click (on the box's own summary) to see the answer."""
    page = broken_page(visit, broken_book, answer_before_its_code_toggle_removed).page
    problems = hidden_output_problems(page, CHAPTER)
    assert any("still hidden after one click" in p for p in problems), problems


def test_an_answer_box_shown_on_load_fails_the_one_click_check(visit, broken_book):
    page = broken_page(visit, broken_book, toggle_open_on_load).page
    problems = hidden_output_problems(page, CHAPTER)
    assert any("shows before a click" in p for p in problems), problems
