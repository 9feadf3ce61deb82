"""The built book as a reader's browser meets it.

Its pages, a local server, and what to check on a page.

Every check is a function that takes a Playwright page and returns a list of problems in plain
words (empty when the page is right), so the same check runs on the real build and on a
deliberately broken copy of it (``test_the_checks_catch_broken_pages.py``).

Chapter pages are discovered from ``_toc.yml``; a chapter follows the conventions in
AUTHORING.md: reveal cells are tagged ``reveal`` + ``hide-cell``, solutions ``solution`` +
``hide-cell``. myst-nb renders a cell's tags as classes ``tag_<name>`` on the cell's container and
``hide-cell`` as a ``<details>`` toggle around the cell's input and output.
"""

import contextlib
import functools
import http.server
import io
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())

#: The book's rule for alt text (tests/test_notebooks.py applies it to the notebooks).
MIN_ALT_WORDS = 12
HIDDEN_KINDS = {"reveal": "Reveal the answer", "solution": "Show the solution"}
IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
DESKTOP = {"width": 1280, "height": 800}
TABLET = {"width": 900, "height": 1000}
PHONE = {"width": 390, "height": 844}
NARROW_PHONE = {"width": 360, "height": 780}
#: A figure's smallest text must show at least this tall on a phone (CSS px).
MIN_FIGURE_TEXT_PX = 9
#: A figure is sharp when its PNG has at least this many pixels per CSS pixel it is shown at.
MIN_SHARPNESS = 1.5


@dataclass(frozen=True)
class Chapter:
    """One chapter: its source notebook and its built page."""

    file: str  # as in _toc.yml, e.g. "chapters/01_sequential_wrapper"

    @property
    def name(self):
        return PurePosixPath(self.file).name

    @property
    def notebook(self):
        return ROOT / f"{self.file}.ipynb"

    @property
    def url_path(self):
        return f"{self.file}.html"

    def hidden_cells_in_notebook(self):
        """``[kind, ...]`` of the notebook's reveal and solution cells, in order."""
        kinds = []
        for cell in _notebook_cells(self.notebook):
            tags = cell.get("metadata", {}).get("tags", [])
            kinds += [kind for kind in HIDDEN_KINDS if kind in tags]
        return kinds

    def figures_in_notebook(self):
        """How many images the notebook's code cells output, counting a figure drawn inside an
        answer box (an ``<img>`` in its HTML, ``mha.reveal.reveal(figure=...)``)."""
        return sum(
            1
            if any(mime in out.get("data", {}) for mime in IMAGE_TYPES)
            else "".join(out.get("data", {}).get("text/html", "")).count("<img ")
            for cell in _notebook_cells(self.notebook)
            for out in cell.get("outputs", [])
        )


def _notebook_cells(path):
    return json.loads(path.read_text())["cells"]


def _toc_files(entries):
    for entry in entries or []:
        if "file" in entry:
            yield entry["file"]
        yield from _toc_files(entry.get("sections"))
        yield from _toc_files(entry.get("chapters"))


def chapters():
    """Every notebook page in ``_toc.yml`` after the landing page, in reading order (the
    bibliography, a markdown page, is not a chapter)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = list(_toc_files(toc.get("chapters"))) + list(_toc_files(toc.get("parts")))
    return [Chapter(file) for file in files if (ROOT / f"{file}.ipynb").exists()]


def landing_page():
    return f"{yaml.safe_load((ROOT / '_toc.yml').read_text())['root']}.html"


def expected_binder_url(chapter):
    """Where the Binder button must go: this repository, branch main, this chapter's notebook."""
    org, repo = urlparse(CONFIG["repository"]["url"]).path.strip("/").split("/")[:2]
    hub = CONFIG["launch_buttons"]["binderhub_url"].rstrip("/")
    return f"{hub}/v2/gh/{org}/{repo}/main?urlpath=lab/tree/{chapter.file}.ipynb"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the directory's files, except the HTML pages in ``replaced`` ({URL path: text}),
    each to be revalidated before the browser uses its cached copy."""

    def __init__(self, *args, replaced, **kwargs):
        self.replaced = replaced
        super().__init__(*args, **kwargs)

    def do_GET(self):
        page = self.replaced.get(urlparse(self.path).path)
        if page is None:
            return super().do_GET()
        body = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_response(self, code, message=None):
        self.status = code
        super().send_response(code, message)

    def end_headers(self):
        # A page is revalidated every time (a 304 when unchanged): the browser context lives for
        # the whole run, and a later server on the same port may serve a changed copy of it
        # (``replaced``, or a copy of the book with broken pages). Anything else is the same file
        # of the same build on every server of the run, so it is kept without asking again:
        # a page load asked this server about 50 times, and the revalidations cost about 0.1 s
        # of CPU a load.
        path = urlparse(self.path).path
        kept = self.status == 200 and not (path.endswith((".html", "/")) or path in self.replaced)
        self.send_header("Cache-Control", "max-age=86400" if kept else "no-cache")
        super().end_headers()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory, replaced=None):
    """Serve ``directory`` on a free port of 127.0.0.1, in a thread; yields the base URL.
    ``replaced`` ({URL path: text}) serves those pages with that text instead of their file."""
    handler = functools.partial(_QuietHandler, directory=str(directory), replaced=replaced or {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


#: Everything a page can leave behind for the next test at its origin (the HTTP cache stays).
SITE_DATA = "cookies,local_storage,indexeddb,cache_storage,service_workers"


def clear_site_data(page, url):
    """Forget what earlier pages stored at ``url``'s origin (the theme choice, guesses), so that
    ``page`` opens there as a first visit does."""
    origin = "{0.scheme}://{0.netloc}".format(urlparse(url))
    session = page.context.new_cdp_session(page)
    session.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": SITE_DATA})
    session.detach()


def is_local(url):
    return (
        urlparse(url).scheme in ("data", "blob", "about") or urlparse(url).hostname in LOCAL_HOSTS
    )


# ---------------------------------------------------------------------------------------------
# Checks: each returns a list of problems, empty when the page is right
# ---------------------------------------------------------------------------------------------

HIDDEN_CELLS = ".cell.tag_reveal, .cell.tag_solution"
CONTENT_IMAGES = "article.bd-article img"
OUTPUT_IMAGES = "article.bd-article .cell_output img"
LAUNCH_MENU = ".dropdown-launch-buttons"
HREFS = "links => links.map(a => a.href)"


def hidden_cell_problems(page, chapter):
    """Every reveal and solution is hidden on load and shows its computed output after one click."""
    problems = []
    expected = chapter.hidden_cells_in_notebook()
    cells = page.locator(HIDDEN_CELLS)
    if cells.count() != len(expected):
        problems.append(
            f"the notebook has {len(expected)} reveal/solution cells, the page {cells.count()}"
        )
    for i in range(cells.count()):
        cell = cells.nth(i)
        kind = "reveal" if "tag_reveal" in cell.get_attribute("class").split() else "solution"
        where = f"{kind} cell {i + 1}"
        toggle = cell.locator(":scope > details > summary")
        if toggle.count() != 1:
            problems.append(
                f"{where} has no toggle: it is shown to every reader "
                "(is its hide-cell tag missing?)"
            )
            continue
        label = toggle.inner_text()
        if HIDDEN_KINDS[kind] not in label:
            problems.append(f"{where}'s toggle says {label!r}, not {HIDDEN_KINDS[kind]!r}")
        parts = cell.locator(".cell_input, .cell_output")
        if any(parts.nth(j).is_visible() for j in range(parts.count())):
            problems.append(f"{where} is visible before its toggle is clicked")
        toggle.click()
        output = cell.locator(".cell_output")
        if not (output.count() and output.first.is_visible() and output.first.inner_text().strip()):
            problems.append(f"{where} shows no computed output after one click on its toggle")
        elif kind == "reveal":
            problems += answer_first_problems(cell, where)
    return problems


def answer_first_problems(cell, where):
    """An opened reveal leads with the answer box.

    The code that computed the answer waits behind a second toggle.
    """
    problems = []
    first = cell.locator(".cell_output > *").first
    if not first.count() or not first.locator(".mha-reveal").count():
        problems.append(f"{where} does not lead with its answer box once opened")
    code_toggle = cell.locator("details.mha-code-toggle > summary")
    if code_toggle.count() != 1:
        return problems + [f"{where} has no second toggle for the code that computed the answer"]
    code = cell.locator(".cell_input")
    if code.count() and code.first.is_visible():
        problems.append(f"{where} shows its code before the second toggle is clicked")
    code_toggle.click()
    if not (code.count() and code.first.is_visible()):
        problems.append(f"{where} shows no code after a click on {code_toggle.inner_text()!r}")
    return problems


def figure_problems(page, chapter=None):
    """Every content figure has loaded and has alt text that describes it (not its file name)."""
    problems = []
    images = page.locator(CONTENT_IMAGES)
    if chapter is not None:
        shown = page.locator(OUTPUT_IMAGES).count()
        if shown != chapter.figures_in_notebook():
            problems.append(
                f"the notebook outputs {chapter.figures_in_notebook()} figures, "
                f"the page shows {shown}"
            )
    for i in range(images.count()):
        image = images.nth(i)
        src = image.get_attribute("src") or ""
        file_name = PurePosixPath(urlparse(src).path).name
        where = f"figure {i + 1} ({file_name})"
        if not image.evaluate("img => img.complete && img.naturalWidth > 0"):
            problems.append(f"{where} did not load")
        alt = " ".join((image.get_attribute("alt") or "").split())
        if not alt:
            problems.append(f"{where} has no alt text")
        elif file_name and (file_name in alt or PurePosixPath(file_name).stem in alt or alt in src):
            problems.append(f"{where}'s alt text is its file name: {alt!r}")
        elif len(alt.split()) < MIN_ALT_WORDS:
            problems.append(
                f"{where}'s alt text has {len(alt.split())} words; "
                f"say what the figure shows: {alt!r}"
            )
    return problems


@functools.cache
def figure_limits():
    """What mha/plots.py promises (see its docstring): ``(widest, smallest text)``, figures at
    most this wide and text at least this tall, both in the PNG's own pixels (FIGURE_DENSITY of
    them per pixel of the figure's size).

    Imported when first needed: xdist's controller, which only hands the tests to its workers,
    loads this module through conftest.py, and importing ``mha`` imports torch (about 3 s of
    CPU)."""
    from mha.plots import FIGURE_DENSITY, FIGURE_DPI, MAX_WIDTH_IN, MIN_TEXT_PT

    pixels = FIGURE_DPI * FIGURE_DENSITY
    return MAX_WIDTH_IN * pixels, MIN_TEXT_PT / 72 * pixels


def figure_text_size_problems(page, min_px=MIN_FIGURE_TEXT_PX):
    """Every figure's smallest text shows at ``min_px`` CSS px or more at the page's current width.

    The PNG holds no text under ``figure_limits()``'s smallest of its own pixels
    (``tests/test_figures.py`` checks every figure function), so the smallest text shows at that
    times the figure's displayed width over its natural width. Open every toggle first: a hidden
    figure has no width.
    """
    problems = []
    widest, smallest_text = figure_limits()
    for src, natural, shown in page.eval_on_selector_all(OUTPUT_IMAGES, IMAGE_SIZES):
        where = (
            "an inline figure" if src.startswith("data:") else f"figure {PurePosixPath(src).name}"
        )
        if natural > widest:
            problems.append(
                f"{where} is {natural}px wide; mha.plots draws at most {widest:.0f}px "
                "(re-execute its chapter?)"
            )
        if not shown:
            problems.append(f"{where} is not displayed")
            continue
        smallest = smallest_text * shown / natural
        if smallest < min_px:
            problems.append(
                f"{where} is shown at {shown:.0f}px of its {natural}px, so its smallest text is "
                f"{smallest:.1f} CSS px, under {min_px}"
            )
    return problems


IMAGE_SIZES = """images => images.map(img => [img.getAttribute('src'), img.naturalWidth,
                                                img.getBoundingClientRect().width])"""


def figure_sharpness_problems(page):
    """Every figure is an SVG, or a PNG with at least MIN_SHARPNESS pixels per CSS pixel shown.

    A figure shown at its natural size is soft on every high-density phone and laptop screen.
    Open every toggle first: a hidden figure has no width.
    """
    problems = []
    for src, natural, shown in page.eval_on_selector_all(OUTPUT_IMAGES, IMAGE_SIZES):
        if src.endswith(".svg") or src.startswith("data:image/svg"):
            continue
        name = (
            "an inline figure" if src.startswith("data:") else f"figure {PurePosixPath(src).name}"
        )
        if shown and natural < MIN_SHARPNESS * shown:
            problems.append(
                f"{name} has {natural}px for {shown:.0f} CSS px ({natural / shown:.2f}×): "
                f"blurry on a high-density screen (want ≥ {MIN_SHARPNESS}×)"
            )
    return problems


#: Every line of code and of printed output, as the page lays it out: wider than its box means cut
#: off or scrolled out of view.
OVERFLOWING_TEXT = """blocks => blocks.filter(b => b.scrollWidth > b.clientWidth + 1)
    .map(b => [b.closest('.cell_output') ? 'output' : 'code', b.innerText.split('\\n')
        .reduce((a, line) => line.length > a.length ? line : a, '')])"""


def cut_off_text_problems(page):
    """No code or printed line runs past the right edge of its box (at the page's current width)."""
    blocks = page.eval_on_selector_all("article.bd-article .cell pre", OVERFLOWING_TEXT)
    return [f"a line of {kind} is cut off: {line[:70]!r}" for kind, line in blocks]


def code_in_padding_problems(page):
    """No code line (a cell's, a listing's, a solution's) runs into its box's right padding,
    where the scroll cue is drawn: its last character would sit under the cue (issue 46: the
    listings of the book's classes, 12 px, at 1280 px)."""
    return [
        f"a code line runs {width - room:.0f} px into its box's padding: {text[:60]!r}"
        for text, width, room, _ in page.eval_on_selector_all(CODE, LINE_WIDTHS)
        if width > room + 0.5
    ]


def box_overflow_problems(page):
    """Every answer, check, hint and solution box wraps its text inside the column."""
    boxes = page.eval_on_selector_all(
        "article.bd-article .mha-box",
        "boxes => boxes.filter(b => b.scrollWidth > b.clientWidth + 1)"
        ".map(b => b.innerText.slice(0, 70))",
    )
    return [f"a box's text runs past its edge: {text!r}" for text in boxes]


def launch_link_problems(page, chapter):
    """The Binder button opens this chapter from this repository's main branch.

    So does Colab, if the launch menu offers it.
    """
    problems = []
    binder = sorted(set(page.eval_on_selector_all(f"{LAUNCH_MENU} a[href*='/v2/gh/']", HREFS)))
    expected = expected_binder_url(chapter)
    if binder != [expected]:
        problems.append(f"the launch menu's Binder links {binder} should be exactly [{expected!r}]")
    colab = page.eval_on_selector_all(f"{LAUNCH_MENU} a[href*='colab.research.google.com']", HREFS)
    repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    for href in colab:
        if not href.endswith(f"/github/{repo}/blob/main/{chapter.file}.ipynb"):
            problems.append(f"Colab link {href!r} does not open {chapter.file}.ipynb on main")
    return problems


def offline_rendering_problems(page, blocked, chapter=None):
    """With every non-local request blocked, the page's text, code and figures still render.

    ``blocked`` lists the requests the page tried to make off this machine; with ``chapter``, the
    page must show as many figures as its notebook outputs (``figure_problems``).
    """
    problems = [
        f"the page needs {kind} from {url}"
        for kind, url in blocked
        if kind in ("stylesheet", "script", "image", "font", "media")
    ]
    if not page.locator("article.bd-article h1").first.inner_text().strip():
        problems.append("the chapter title does not render")
    paragraphs = page.locator("article.bd-article p:visible")
    if paragraphs.count() < 3:
        problems.append(f"only {paragraphs.count()} paragraphs of text render")
    code = page.locator("article.bd-article .cell_input pre:visible")
    if not code.count() or not code.first.inner_text().strip():
        problems.append("no code renders")
    if page.locator("article.bd-article .math").count():
        problems.append(
            "the page has LaTeX math, which needs MathJax from a CDN; write it with ×, √ …"
        )
    return problems + figure_problems(page, chapter)


# ---------------------------------------------------------------------------------------------
# Helpers for looking at a whole page
# ---------------------------------------------------------------------------------------------


def open_every_toggle(page):
    """Open every reveal and solution at once (to look at, or to check, the hidden content)."""
    page.evaluate("document.querySelectorAll('article details').forEach(d => d.open = true)")


def wait_for_transitions(page):
    """Wait until the theme's colour transitions have finished.

    Colours caught mid-fade fail the contrast checks.
    """
    page.wait_for_function(
        "document.getAnimations().every(a => a.playState !== 'running')", timeout=10_000
    )


#: The right edge of what a reader sees of an image: a figure wider than its output box scrolls
#: inside it.
VISIBLE_RIGHT = """images => images.map(img => {
    const box = img.closest('.cell_output');
    const scrolls = box && ['auto', 'scroll'].includes(getComputedStyle(box).overflowX);
    const right = img.getBoundingClientRect().right;
    const shown = scrolls ? Math.min(right, box.getBoundingClientRect().right) : right;
    return [img.getAttribute('src'), shown];
})"""


def horizontal_overflow_problems(page):
    """The page, and every figure in it, fits the window's width: no sideways scrolling of the page.

    A figure may be wider than the column on a narrow phone (``_static/figures.css``) if its output
    box scrolls sideways and the box itself fits.
    """
    problems = []
    width = page.evaluate("window.innerWidth")
    page_width = page.evaluate("document.documentElement.scrollWidth")
    if page_width > width:
        problems.append(f"the page is {page_width}px wide in a {width}px window")
    for src, right in page.eval_on_selector_all(CONTENT_IMAGES, VISIBLE_RIGHT):
        if right > width + 0.5:
            problems.append(
                f"figure {PurePosixPath(src).name} runs {right - width:.0f}px "
                "past the window's edge"
            )
    return problems


# ---------------------------------------------------------------------------------------------
# Printed output on a phone: lines against their box, scroll cues, whole tokens
# ---------------------------------------------------------------------------------------------

#: At most this many printed output lines in the book may be wider than their box at 390 px
#: (issue 46: there were 36); none at 900 px and up. A wider line that is a table's row scrolls
#: sideways inside its box, with a visible cue; any other line wraps (_static/code-lines.css).
PHONE_WIDE_LINES = 8

#: A printed line that is a table's row: a gap of two spaces or more after its text has started
#: (_static/code-lines.js tells them apart the same way). Wrapped, its columns would fall apart.
TABLE_ROW = re.compile(r"\S {2,}\S")

#: Printed output: the text a cell prints or returns (stream and text/plain outputs). The code of
#: a solution, drawn inside its box, is code (at most 79 characters a line, like every cell's).
PRINTED_OUTPUT = "article.bd-article .cell_output pre:not(.mha-box pre)"

#: The end of a script that measures a block's lines (LINE_WIDTHS, CODE_LINES): walk the block's
#: text, outside its buttons, calling the script's ``finish`` at the end of every line.
WALK_THE_LINES = """    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (node.parentElement.closest('button')) continue;
        last = node;
        for (let i = 0; i < node.data.length; i++) {
            if (node.data[i] === '\\n') { finish(node, i); continue; }
            if (!start) start = [node, i];
            text += node.data[i];
        }
    }
    if (last) finish(last, last.data.length);
    return lines;
})"""


#: Every non-blank line of each block: its rendered width (a Range over the line's text, so what
#: the font draws, not a count of characters), the width of its box's content area, and on how
#: many rows of the screen it is drawn (more than one: it wraps, and a printed table falls apart).
LINE_WIDTHS = (
    """blocks => blocks.filter(pre => pre.clientWidth > 0).flatMap(pre => {
    const style = getComputedStyle(pre);
    const room = pre.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const lines = [];
    // A wrapped line's width: from its first row's start to the right of its rightmost character
    // that is not a space (a space where the line wraps hangs past the edge, drawing nothing).
    const inkWidth = line => {
        const left = Math.min(...[...line.getClientRects()].map(r => r.left));
        let right = left;
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        const one = document.createRange();
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (let i = 0; i < node.data.length; i++) {
                if (/\\s/.test(node.data[i]) || !line.isPointInRange(node, i)) continue;
                one.setStart(node, i);
                one.setEnd(node, i + 1);
                right = Math.max(right, ...[...one.getClientRects()].map(r => r.right));
            }
        }
        return right - left;
    };
    let start = null, text = '';
    const finish = (node, offset) => {
        if (start && text.trim()) {
            const range = document.createRange();
            range.setStart(start[0], start[1]);
            range.setEnd(node, offset);
            const rows = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
            lines.push([text, rows.size > 1 ? inkWidth(range) : range.getBoundingClientRect().width,
                        room, rows.size]);
        }
        start = null; text = '';
    };
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let last = null;
"""
    + WALK_THE_LINES
)


@dataclass
class LineCount:
    """How many printed lines a page has, and which of them are wider than their box."""

    lines: int
    wide: list  # (text, rendered width, box width) of each line wider than its box
    wrapped: list  # the text of each line drawn on more than one row

    def __str__(self):
        return f"{len(self.wide)} of {self.lines}"


def printed_line_count(page):
    """Every printed output line on the page, as laid out now: open the toggles first."""
    lines = page.eval_on_selector_all(PRINTED_OUTPUT, LINE_WIDTHS)
    return LineCount(
        len(lines),
        [line[:3] for line in lines if line[1] > line[2] + 0.5],
        [line[0] for line in lines if line[3] > 1],
    )


def line_budget_problems(counts, width, budget):
    """Problems with the book's printed lines at ``width`` px: ``counts`` maps chapter to its
    :class:`LineCount`; at most ``budget`` lines in all may be wider than their box, and no
    table's row may wrap."""
    wide = sum(len(c.wide) for c in counts.values())
    problems = [
        f"at {width} px, {name} wraps a row of a table (its columns fall apart): {text[:60]!r}"
        for name, count in counts.items()
        for text in count.wrapped
        if TABLE_ROW.search(text)
    ]
    if wide <= budget:
        return problems
    per_chapter = "\n".join(
        f"  {name}: {count}"
        + "".join(
            f"\n      {text[:60]!r} {shown:.0f} px in {room:.0f}"
            for text, shown, room in count.wide
        )
        for name, count in counts.items()
        if count.wide
    )
    return problems + [
        f"at {width} px, {wide} printed output lines are wider than their box; at most {budget} "
        f"may be. Per chapter (wide of all, each wide line):\n{per_chapter}"
    ]


#: Every box in the article that scrolls sideways, with whether it has more to show on the right.
SCROLLING_BOXES = """(boxes) => boxes
    .filter(b => ['auto', 'scroll'].includes(getComputedStyle(b).overflowX) && b.clientWidth > 0)
    .map(b => ({
        kind: b.matches('.pst-scrollable-table-container') ? 'table'
            : b.closest('.cell_input') ? 'code' : 'output',
        wider: b.scrollWidth > b.clientWidth + 1,
        text: b.innerText.trim().split('\\n')[0].slice(0, 60),
        index: boxes.indexOf(b),
    }))"""
SCROLLABLE = (
    "article.bd-article pre, article.bd-article .pst-scrollable-table-container, "
    "article.bd-article .cell_output, article.bd-article .cell_output .output"
)


def scrolling_boxes(page):
    """``(locator, facts)`` of every box on the page that scrolls sideways (visible ones only)."""
    boxes = page.locator(SCROLLABLE)
    return [
        (boxes.nth(facts["index"]), facts)
        for facts in page.eval_on_selector_all(SCROLLABLE, SCROLLING_BOXES)
    ]


def mean_colour(page, clip):
    """The average RGB colour of the screen inside ``clip`` (a dict of x, y, width, height)."""
    image = Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("RGB")
    pixels = list(image.get_flattened_data())
    return tuple(sum(p[i] for p in pixels) / len(pixels) for i in range(3))


def colour_distance(a, b):
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


#: How far (0-255, in any channel) an edge must differ from the box's own background to count as
#: a cue a reader sees; a plain edge differs by a few units at most (a glyph's edge, a border).
CUE_MIN_DIFFERENCE = 40


#: The colour a box shows where nothing is drawn on it: its own background, else its ancestors'.
BACKGROUND = """box => {
    for (let e = box; e; e = e.parentElement) {
        const colour = getComputedStyle(e).backgroundColor;
        const alpha = colour.match(/rgba\\(.*,\\s*([\\d.]+)\\)/);
        if (!alpha || parseFloat(alpha[1]) > 0.5) {
            return colour.match(/[\\d.]+/g).slice(0, 3).map(Number);
        }
    }
    return [255, 255, 255];
}"""


def edge_colours(page, box):
    """``(left edge, background, right edge)``: the mean colours of the 2 px strips just inside the
    box's left and right borders (rounded corners left out), as the reader's screen shows them,
    and the box's own background colour."""
    box.scroll_into_view_if_needed()
    r = box.bounding_box()
    strip = {"y": r["y"] + 6, "width": 2, "height": max(r["height"] - 12, 1)}
    return (
        mean_colour(page, {**strip, "x": r["x"] + 1}),
        tuple(box.evaluate(BACKGROUND)),
        mean_colour(page, {**strip, "x": r["x"] + r["width"] - 3}),
    )


def scroll_cue_problems(page, box, where):
    """A box wider than its content shows a cue on the right; scrolled to its end, on the left
    only. What the reader's screen shows, compared with the box's own background."""
    problems = []
    left, background, right = edge_colours(page, box)
    if colour_distance(right, background) < CUE_MIN_DIFFERENCE:
        problems.append(f"{where} scrolls sideways but its right edge shows no cue")
    if colour_distance(left, background) >= CUE_MIN_DIFFERENCE:
        problems.append(f"{where} shows a cue on its left before it is scrolled")
    box.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
    page.wait_for_timeout(100)
    left, background, right = edge_colours(page, box)
    if colour_distance(right, background) >= CUE_MIN_DIFFERENCE:
        problems.append(f"{where} still shows a cue on its right once scrolled to its end")
    if colour_distance(left, background) < CUE_MIN_DIFFERENCE:
        problems.append(f"{where}, scrolled to its end, shows no cue that more lies to the left")
    box.evaluate("b => { b.scrollLeft = 0; }")
    return problems


def no_cue_problems(page, box, where):
    """A box that fits shows no cue (a cue on every box would tell the reader nothing)."""
    left, background, right = edge_colours(page, box)
    if (
        max(colour_distance(left, background), colour_distance(right, background))
        >= CUE_MIN_DIFFERENCE
    ):
        return [f"{where} fits its box yet shows a scroll cue"]
    return []


#: Where each inline code element's text runs onto a new line, as the reader sees it: the code's
#: text with "|" at each break, and the two characters either side of the break.
CODE_BREAKS = """codes => codes.filter(c => c.getClientRects().length > 1).flatMap(code => {
    const chars = [];
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (let i = 0; i < node.data.length; i++) {
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            const rect = range.getClientRects()[0];
            chars.push([node.data[i], rect && rect.width > 0 ? rect.top : null]);
        }
    }
    const breaks = [];
    let previous = null;
    chars.forEach(([char, top], i) => {
        if (top === null) return;
        if (previous !== null && top > chars[previous][1] + 2) {
            const text = chars.map(c => c[0]).join('');
            breaks.push([text.slice(0, i) + '|' + text.slice(i), chars[previous][0], char,
                         text.slice(previous + 1, i)]);
        }
        previous = i;
    });
    return breaks;
})"""


def broken_token_problems(page):
    """Inline code breaks across lines only between words, or before a dot of a long name."""
    problems = []
    for text, before, after, between in page.eval_on_selector_all(
        "article.bd-article code", CODE_BREAKS
    ):
        if between.strip() == "" and between or after == ".":
            continue
        problems.append(f"{text!r} breaks inside a word ({before!r}|{after!r})")
    return problems


# ---------------------------------------------------------------------------------------------
# Code on a phone: every line shown whole, a wrapped line's continuation hung right of its text
# behind a mark (_static/code-lines.css)
# ---------------------------------------------------------------------------------------------

#: The code a reader reads: code cells, listings, and a solution's code (inside its answer box),
#: not what a cell prints.
CODE = (
    "article.bd-article div.highlight pre:not(.cell_output pre), "
    "article.bd-article .cell_output .mha-box div.highlight pre"
)
#: How far, at least, a wrapped line's continuation starts right of the line's own first
#: character (its text, after its indentation): at or left of it, it reads as a new statement
#: or a dedent.
MIN_CONTINUATION_INDENT_CH = 2
#: How many characters a wrapped code line's rows hold, at least, on average.
MIN_ROW_CH = 10

#: Every non-blank line of each code block: its text, whether any of it lies right of the box's
#: content area or left of its padding (cut off, to be scrolled to), on how many rows it is
#: drawn, and how far right of the line's first row its further rows start, in characters (the
#: line's indentation included: ``code_lines`` subtracts it).
CODE_LINES = (
    """blocks => blocks.filter(pre => pre.clientWidth > 0).flatMap(pre => {
    const style = getComputedStyle(pre);
    const box = pre.getBoundingClientRect();
    const right = box.left + pre.clientLeft + pre.clientWidth - parseFloat(style.paddingRight);
    const left = box.left + pre.clientLeft;
    const ch = parseFloat(style.fontSize) * 0.6;
    const lines = [];
    // Whether a character that is not a space lies right of the box: a space where a line
    // wraps hangs past the edge, drawing nothing.
    const cutCharacter = line => {
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        const one = document.createRange();
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (let i = 0; i < node.data.length; i++) {
                if (/\\s/.test(node.data[i]) || !line.isPointInRange(node, i)) continue;
                one.setStart(node, i);
                one.setEnd(node, i + 1);
                if ([...one.getClientRects()].some(r => r.right > right + 0.5
                                                       || r.left < left - 0.5)) return true;
            }
        }
        return false;
    };
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let start = null, text = '', last = null;
    const finish = (node, offset) => {
        if (start && text.trim()) {
            const range = document.createRange();
            range.setStart(start[0], start[1]);
            range.setEnd(node, offset);
            const rects = [...range.getClientRects()].filter(r => r.width > 0);
            const top = Math.min(...rects.map(r => r.top));
            const first = Math.min(...rects.filter(r => r.top < top + 2).map(r => r.left));
            const further = rects.filter(r => r.top >= top + 2).map(r => r.left);
            const rows = new Set(rects.map(r => Math.round(r.top))).size;
            const outside = Math.max(...rects.map(r => r.right)) > right + 0.5
                || Math.min(...rects.map(r => r.left)) < left - 0.5;
            lines.push([text, outside && cutCharacter(range), rows,
                        further.length ? (Math.min(...further) - first) / ch : null]);
        }
        start = null; text = '';
    };
"""
    + WALK_THE_LINES
)


@dataclass
class CodeLines:
    """A page's code lines as laid out: how many, which are cut off, and which wrap."""

    lines: int
    cut: list  # the text of each line partly right of its box
    #: (text, how far right of the line's first character its continuation starts, in
    #: characters) of each line drawn on several rows
    wrapped: list
    #: the text of each line drawn in rows of fewer than :data:`MIN_ROW_CH` characters on average
    #: (a line aligned under a bracket, hung too far right, reads as a column of letters)
    narrow: list = ()


def code_lines(page, selector=CODE):
    """Every code line on the page (or line of the blocks ``selector``), as laid out now (in its
    box, scrolled to its start)."""
    lines = page.eval_on_selector_all(selector, CODE_LINES)
    return CodeLines(
        len(lines),
        [text for text, cut, _, _ in lines if cut],
        [
            (text, None if indent is None else indent - (len(text) - len(text.lstrip())))
            for text, _, rows, indent in lines
            if rows > 1
        ],
        [text for text, _, rows, _ in lines if rows > 1 and len(text.strip()) / rows < MIN_ROW_CH],
    )


def code_line_problems(name, lines, kind="code"):
    """On a phone no code line is cut off, and each wrapped one continues right of its text.
    ``kind="printed"``: printed lines, whose tables may be wider than their box (counted by
    ``line_budget_problems``), so only how their wrapped lines continue is checked."""
    problems = [
        f"{name}: the code line {text[:60]!r} is cut off" for text in lines.cut if kind == "code"
    ]
    problems += [
        f"{name}: the {kind} line {text[:60]!r} wraps with its continuation "
        f"{indent:.1f} characters right of "
        "its first character"
        for text, indent in lines.wrapped
        if indent is None or indent < MIN_CONTINUATION_INDENT_CH
    ]
    problems += [
        f"{name}: the {kind} line {text[:60]!r} wraps into a column" for text in lines.narrow
    ]
    return problems


#: The first line of the blocks that wraps, scrolled to the middle of the screen: the rectangle
#: between its first character and where its second row's text starts (on that row), where a
#: continuation mark must show, in the viewport's pixels; null when no line wraps.
CONTINUATION_GAP = """blocks => {
    for (const [index, pre] of blocks.entries()) {
        if (!pre.checkVisibility()) continue;
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        let start = null, ink = null;
        const lines = [];
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (node.parentElement.closest('button')) continue;
            for (let i = 0; i < node.data.length; i++) {
                if (node.data[i] === '\\n') {
                    if (ink) lines.push([start, ink, [node, i]]);
                    start = ink = null;
                    continue;
                }
                if (!start) start = [node, i];
                if (!ink && /\\S/.test(node.data[i])) ink = [node, i];
            }
        }
        const last = [...pre.childNodes].length;
        if (ink) lines.push([start, ink, [pre, last]]);
        for (const [from, first, to] of lines) {
            const range = document.createRange();
            range.setStart(...from);
            range.setEnd(...to);
            const rects = () => [...range.getClientRects()].filter(r => r.width > 0);
            const tops = [...new Set(rects().map(r => Math.round(r.top)))];
            if (tops.length < 2) continue;
            first[0].parentElement.scrollIntoView({block: 'center'});
            const char = document.createRange();
            char.setStart(first[0], first[1]);
            char.setEnd(first[0], first[1] + 1);
            const left = char.getBoundingClientRect().left;
            const top = Math.min(...rects().map(r => r.top));
            const second = rects().filter(r => r.top >= top + 2);
            const row = Math.min(...second.map(r => r.top));
            const onRow = second.filter(r => r.top < row + 2);
            return {
                index, text: range.toString(),
                x: left, y: row, width: Math.min(...onRow.map(r => r.left)) - left,
                height: Math.max(...onRow.map(r => r.bottom)) - row,
            };
        }
    }
    return null;
}"""

#: How far (0-255, in any channel) some pixel of the gap must differ from the box's background
#: for the gap to show a mark.
MARK_MIN_DIFFERENCE = 100


def continuation_mark_problems(page, selector, where):
    """The first line of the code blocks ``selector`` that wraps shows a mark before its
    continuation: on the screen, some pixel between the line's first character and where its
    second row starts stands out from the code's background. A block that does not wrap is
    no problem (``code_line_problems`` finds where they should)."""
    gap = page.eval_on_selector_all(selector, CONTINUATION_GAP)
    if gap is None:
        return []
    if gap["width"] < 1 or gap["height"] < 1:
        return [f"{where}: {gap['text'][:60]!r} continues at or left of its first character"]
    background = page.locator(selector).nth(gap["index"]).evaluate(BACKGROUND)
    clip = {k: gap[k] for k in ("x", "y", "width", "height")}
    image = Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("RGB")
    contrast = max(colour_distance(p, background) for p in image.get_flattened_data())
    if contrast < MARK_MIN_DIFFERENCE:
        return [f"{where}: {gap['text'][:60]!r} wraps with no mark before its continuation"]
    return []
