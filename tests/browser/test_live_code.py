"""Run this page: chapter 1 live in the web book, against a local Jupyter server.

The test starts a Jupyter server on 127.0.0.1 with a random token (the Python running the tests,
so its kernel imports this worktree's ``mha``), serves chapter 1 of the built book as a build
pointed at that server would (``MHA_LIVE_SERVER_URL`` / ``MHA_LIVE_SERVER_TOKEN``: the page's
kernel settings, from _ext/live_code.py, swapped in as the page is served; the book is not
built a second time), and at 390 px
with touch and at 1280 px does what a reader does: presses "Run this page", runs chapter 1's
cells down to the practice, writes a wrong forward and then a right one into the practice cell,
runs the check after each and reads both verdicts in the page, and commits a prediction by
editing its ``prediction_shape = None`` cell and running its reveal cell. It also reads the
figure drawn live under its caption, commits a guess in "Your guess" and finds it in the
prediction cell and in the reveal's verdict, and presses Restart (which asks first). Chapter 2
(served the same way) at 390 px: its practice line wraps in the editor, hung behind a mark, and
its mistakes gallery's verdicts, run, wait behind "Show the check's feedback". Every request
stays on 127.0.0.1 (thebe comes from the book's own _static), and the page logs no error.

The last test is the fallback: the default build (Binder) with every request off this machine
blocked, as when Binder is down, says so and offers Colab and the download.
"""

import html
import importlib.util
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from .book_site import BUILD, DESKTOP, PHONE, ROOT, SCREENSHOTS, is_local, serve

CHAPTER = "chapters/01_sequential_wrapper"
#: Chapter 2: its practice line that wraps at 390 px, and its mistakes gallery.
CHAPTER_2 = "chapters/02_two_dim_output"
#: How long a local kernel may take to start, and a cell to run, on a busy 2-core machine.
KERNEL_TIMEOUT_MS = 120_000
CELL_TIMEOUT_MS = 60_000

WRONG_FORWARD = """class MyWrapper(WrapperSkeleton):
    def forward(self, x):
        return self.heads[0](x)
"""
RIGHT_FORWARD = """class MyWrapper(WrapperSkeleton):
    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)
"""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def live_code():
    """_ext/live_code.py, the extension that writes each page's kernel settings."""
    spec = importlib.util.spec_from_file_location("live_code", ROOT / "_ext" / "live_code.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The page's kernel settings, as _ext/live_code.py writes them.
LIVE_META = re.compile(r'<meta name="mha-live" content="([^"]*)">')


def with_settings(page, settings):
    """A chapter page's HTML as a book built for the local server has it: its kernel settings are
    ``settings`` (the notebook it names stays the page's own)."""
    found = LIVE_META.search(page)
    assert found, "the chapter page carries no kernel settings"
    notebook = json.loads(html.unescape(found[1]))["notebook"]
    meta = html.escape(json.dumps({**settings, "notebook": notebook}))
    return LIVE_META.sub(lambda _: f'<meta name="mha-live" content="{meta}">', page)


@pytest.fixture(scope="module")
def live_site():
    """``(book URL, server URL, token)``: a Jupyter server on this machine, and the built book
    served with chapter 1's kernel settings pointing at it, as _ext/live_code.py writes them into
    a book built with ``MHA_LIVE_SERVER_URL`` / ``MHA_LIVE_SERVER_TOKEN`` set
    (tests/test_live_code_settings.py tests that the build writes those settings)."""
    if not (BUILD / "index.html").exists():
        pytest.fail(f"No built book in {BUILD}: run `make html` first.")
    token = secrets.token_hex(16)
    server_port = free_port()
    server_url = f"http://127.0.0.1:{server_port}/"
    extension = live_code()
    settings = extension.live_settings(
        {}, environ={extension.SERVER_URL: server_url, extension.SERVER_TOKEN: token}
    )
    pages = {
        f"/{chapter}.html": with_settings((BUILD / f"{chapter}.html").read_text(), settings)
        for chapter in (CHAPTER, CHAPTER_2)
    }
    with (
        serve(BUILD, replaced=pages) as book_url,
        tempfile.TemporaryDirectory() as tmp,
        open(Path(tmp) / "server.log", "w") as log,
    ):
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                "--no-browser",
                "--allow-root",  # CI runs as root
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={server_port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.allow_origin={book_url}",
                f"--ServerApp.root_dir={ROOT}",
            ],
            env={**os.environ, "JUPYTER_RUNTIME_DIR": tmp, "JUPYTER_CONFIG_DIR": tmp},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            wait_for_server(server_url, token, server, Path(tmp) / "server.log")
            yield book_url, server_url, token
        finally:
            server.terminate()
            server.wait(timeout=30)


def wait_for_server(url, token, process, log, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the Jupyter server exited:\n{log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(f"{url}api/status?token={token}", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"the Jupyter server at {url} did not answer within {seconds} s")


def open_chapter(browser, url, viewport, chapter=CHAPTER):
    """A fresh page at ``viewport`` (touch on a phone); records errors, off-machine requests."""
    context = browser.new_context(viewport=viewport, has_touch=viewport == PHONE)
    page = context.new_page()
    errors, blocked = [], []
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))

    def stay_local(route, request):
        if is_local(request.url):
            route.continue_()
        else:
            blocked.append(request.url)
            route.abort()

    context.route("**/*", stay_local)
    page.goto(f"{url}/{chapter}.html")
    return context, page, errors, blocked


def press(page, locator, viewport):
    locator.scroll_into_view_if_needed()
    if viewport == PHONE:
        locator.tap()
    else:
        locator.click()


def live_cell(page, text):
    """The live cell whose code contains ``text`` now (it stays that cell once edited)."""
    cells = page.locator(".cell.mha-live")
    codes = page.evaluate("() => window.thebe.notebook.cells.map(cell => cell.source)")
    matches = [i for i, code in enumerate(codes) if text in code]
    assert len(matches) == 1, f"{len(matches)} live cells contain {text!r}"
    return cells.nth(matches[0])


def wait_until_idle(page):
    """Until no cell runs. Asked every 100 ms: the default, every frame the page draws, kept the
    page drawing frames for as long as the kernel worked (about 0.07 s of CPU a second)."""
    page.wait_for_function(
        "() => window.thebe.notebook.cells.every(cell => !cell.isBusy)",
        polling=100,
        timeout=CELL_TIMEOUT_MS,
    )


def run(page, cell, viewport):
    press(page, cell.locator(".thebe-run-button"), viewport)
    page.wait_for_timeout(100)
    wait_until_idle(page)


def run_until(page, text, viewport):
    """Run the page's cells from the top, down to the one whose code contains ``text``."""
    cells = page.locator(".cell.mha-live")
    codes = page.evaluate("() => window.thebe.notebook.cells.map(cell => cell.source)")
    for i in range(next(i for i, code in enumerate(codes) if text in code)):
        run(page, cells.nth(i), viewport)


def go_live(page, viewport):
    press(page, page.get_by_role("button", name="Run this page"), viewport)
    page.locator(".mha-live-status").get_by_text("Kernel ready").wait_for(timeout=KERNEL_TIMEOUT_MS)


def write_code(page, cell, code, viewport):
    """Select the cell's code and type ``code`` over it (as a paste: no auto-indent)."""
    editor = cell.locator(".CodeMirror")
    press(page, editor, viewport)
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(code)


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390px-touch", "1280px"])
def test_chapter_1_runs_in_the_page(browser, live_site, viewport):
    book_url, server_url, token = live_site
    context, page, errors, blocked = open_chapter(browser, book_url, viewport)
    try:
        assert page.locator("script[src*='thebe/index.js']").count() == 0, (
            "thebe loads before the reader asks"
        )
        notice = page.locator(".mha-launch-notice")
        assert not notice.count() or '"Run this page" works' in notice.inner_text(), (
            "beside a working Run button, the notice says the page cannot run"
        )
        button = page.get_by_role("button", name="Run this page")
        started = time.monotonic()
        press(page, button, viewport)
        status = page.locator(".mha-live-status")
        status.get_by_text("Kernel ready").wait_for(timeout=KERNEL_TIMEOUT_MS)
        kernel_s = time.monotonic() - started
        # The kernel runs in the chapter's folder, as Binder's does: `import mha` finds the
        # package beside the notebooks there.
        with urllib.request.urlopen(f"{server_url}api/sessions?token={token}") as response:
            paths = [session["path"] for session in json.load(response)]
        assert f"{CHAPTER}.ipynb" in paths, paths

        cells = page.locator(".cell.mha-live")
        # thebe's own sources, not the editors' text: an editor draws only the lines in view.
        codes = page.evaluate("() => window.thebe.notebook.cells.map(cell => cell.source)")
        practice = live_cell(page, "class MyWrapper")
        first_output_s = None
        for i in range(next(i for i, code in enumerate(codes) if "class MyWrapper" in code)):
            run(page, cells.nth(i), viewport)
            if first_output_s is None and cells.nth(i).locator(".jp-OutputArea-output").count():
                first_output_s = time.monotonic() - started
        trace = live_cell(page, "for call in trace_heads")
        assert "step  head  is x" in trace.locator(".mha-live-output").inner_text()
        # The figure drawn live keeps its caption (the static one hid with the static output).
        drawn = live_cell(page, "plot_concatenated_output(")
        assert drawn.locator(".mha-live-output img").is_visible()
        caption = drawn.locator(".mha-live-caption")
        assert caption.is_visible() and "concatenated on the last axis" in caption.inner_text()

        check = live_cell(page, "check_wrapper(MyWrapper)")
        verdicts = []
        for code in (WRONG_FORWARD, RIGHT_FORWARD):
            write_code(page, practice, code, viewport)
            run(page, practice, viewport)
            run(page, check, viewport)
            verdicts.append(check.locator(".mha-live-output .mha-box").inner_text())
        assert verdicts[0].startswith("✗ Not yet."), verdicts[0]
        assert "head 1's alone" in verdicts[0], verdicts[0]
        assert verdicts[1].startswith("✓ Correct."), verdicts[1]
        assert check.locator(".mha-live-output .mha-passed").is_visible()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        practice.scroll_into_view_if_needed()
        page.screenshot(path=SCREENSHOTS / f"live-practice-{viewport['width']}.png")

        guess = live_cell(page, "prediction_shape = None")
        write_code(page, guess, "prediction_shape = (2, 6, 4)\n", viewport)
        run(page, guess, viewport)
        reveal = live_cell(page, "prediction_shape,")
        assert not reveal.locator(".thebe-input").is_visible(), "the reveal shows its code"
        run(page, reveal, viewport)
        box = reveal.locator(".mha-live-output .mha-reveal")
        assert box.is_visible()
        assert "(2, 6, 4)" not in box.inner_text(), "the answer shows before it is asked for"
        press(page, box.get_by_text("Show the answer"), viewport)
        answer = box.inner_text()
        assert "(2, 6, 4)" in answer and "matches the answer" in answer, answer
        reveal.scroll_into_view_if_needed()
        page.screenshot(path=SCREENSHOTS / f"live-reveal-{viewport['width']}.png")

        guess_reaches_the_kernel(page, viewport)
        restart_asks_first(page, viewport)

        assert blocked == [], f"the live page asked for files off this machine: {blocked}"
        assert errors == [], errors
        print(
            f"\n{viewport['width']} px: kernel ready {kernel_s:.1f} s and first output "
            f"{first_output_s:.1f} s after the button (a busy machine inflates both)"
        )
    finally:
        context.close()


def guess_reaches_the_kernel(page, viewport):
    """A choice committed in "Your guess" becomes the prediction cell's value, in its code and in
    the kernel, so the reveal cell judges it (its prediction cell ran earlier with None)."""
    group = page.locator("fieldset.mha-guess").first
    choice = group.locator("button.mha-guess-choice").first
    label = choice.get_attribute("data-guess")
    press(page, choice, viewport)
    words = group.locator(".mha-guess-verdict").inner_text()
    quoted = re.match(r"Your prediction, (.+), (matches|is not)", words)
    assert quoted, words
    page.wait_for_timeout(100)
    wait_until_idle(page)
    prediction = live_cell(page, "prediction_second_head = ")
    code = page.evaluate("() => window.thebe.notebook.cells.map(cell => cell.source)")
    assert f"prediction_second_head = {quoted[1]}" in "\n".join(code), (label, code)
    reveal = live_cell(page, "prediction_second_head,")
    run(page, reveal, viewport)
    box = reveal.locator(".mha-live-output .mha-reveal")
    press(page, box.get_by_text("Show the answer"), viewport)
    assert words in box.inner_text(), (words, box.inner_text())
    assert prediction.locator(".thebe-run-button").count() == 1


def restart_asks_first(page, viewport):
    """Restart asks before it forgets the variables; declined, they stay; accepted, the page says
    the kernel is restarting, and a cell that needs them says they are gone."""
    trace = live_cell(page, "for call in trace_heads")
    restart = trace.locator(".thebe-restart-button")
    asked = []

    def answer(accept):
        def on_dialog(dialog):
            asked.append(dialog.message)
            if accept:
                dialog.accept()
            else:
                dialog.dismiss()

        return on_dialog

    page.once("dialog", answer(False))
    press(page, restart, viewport)
    assert asked and "forgets every variable" in asked[0], asked
    run(page, trace, viewport)
    assert "step  head  is x" in trace.locator(".mha-live-output").inner_text()

    page.once("dialog", answer(True))
    press(page, restart, viewport)
    assert len(asked) == 2, asked
    status = page.locator(".mha-live-status")
    assert "Restarting the kernel" in status.inner_text(), status.inner_text()
    page.wait_for_timeout(3000)  # the restart takes its moment; the next run waits for it
    run(page, trace, viewport)
    trace.locator(".mha-live-output").get_by_text("NameError").first.wait_for(
        timeout=CELL_TIMEOUT_MS
    )


#: Reads, in the editor of the cell holding ``text`` (its line holding ``arg``): whether the
#: editor scrolls sideways, and the left edge of each row the line takes on screen, against the
#: left edge of the line's first character, with its continuation mark.
WRAPPED_LINE = """([text, arg]) => {
  const cell = [...document.querySelectorAll('.cell.mha-live')].find(
    (c) => c.querySelector('.CodeMirror') &&
      c.querySelector('.CodeMirror').CodeMirror.getValue().includes(text));
  const scroller = cell.querySelector('.CodeMirror-scroll');
  const line = [...cell.querySelectorAll('pre.CodeMirror-line')].find(
    (l) => l.textContent.includes(arg));
  const range = document.createRange();
  range.selectNodeContents(line);
  const rows = new Map();
  for (const r of range.getClientRects()) {
    if (r.width < 1) continue;
    const top = Math.round(r.top);
    rows.set(top, Math.min(rows.get(top) ?? Infinity, r.left));
  }
  const lefts = [...rows.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
  const text0 = line.textContent;
  const first = text0.length - text0.trimStart().length;
  const start = document.createRange();
  const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
  let node, seen = 0;
  while ((node = walker.nextNode())) {
    if (seen + node.length > first) { start.setStart(node, first - seen);
      start.setEnd(node, first - seen + 1); break; }
    seen += node.length;
  }
  const where = range.toString().indexOf(arg);
  return {
    sideways: scroller.scrollWidth - scroller.clientWidth,
    lefts,
    textLeft: start.getBoundingClientRect().left,
    mark: getComputedStyle(line, '::before').content,
    found: where >= 0,
  };
}"""


def test_chapter_2_reads_live_at_390px(browser, live_site):
    """At 390 px the practice line that names ``num_heads=2`` wraps in the editor, hung right of
    its text behind a mark, as on the static page; the mistakes gallery's verdicts, run, wait
    behind "Show the check's feedback" as on the static page."""
    book_url, _, _ = live_site
    context, page, errors, blocked = open_chapter(browser, book_url, PHONE, CHAPTER_2)
    try:
        go_live(page, PHONE)
        practice = page.locator(".cell.tag_practice.mha-live").first
        practice.scroll_into_view_if_needed()
        line = page.evaluate(WRAPPED_LINE, ["# Edit the arguments of this call:", "num_heads=2"])
        assert line["found"], line
        assert line["sideways"] <= 1, f"the editor scrolls sideways: {line}"
        assert len(line["lefts"]) >= 2, f"the line does not wrap at 390 px: {line}"
        assert all(left > line["textLeft"] + 1 for left in line["lefts"][1:]), line
        assert "↪" in line["mark"], line
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / "live-practice-wrap-390.png")

        run_until(page, "num_heads=1\n)\ncheck_two_dim_output(wrong)", PHONE)
        gallery = live_cell(page, "num_heads=1\n)\ncheck_two_dim_output(wrong)")
        toggle = gallery.locator("details.mha-live-toggle")
        assert not toggle.is_visible(), "an empty live toggle beside the static one"
        run(page, gallery, PHONE)
        verdict = gallery.locator(".mha-live-output .mha-box")
        verdict.wait_for(state="attached", timeout=CELL_TIMEOUT_MS)
        assert toggle.is_visible() and not verdict.is_visible(), "the verdict shows unasked"
        summary = toggle.locator("summary")
        assert summary.inner_text().strip() == "Show the check's feedback", summary.inner_text()
        press(page, summary, PHONE)
        assert verdict.is_visible()
        assert verdict.inner_text().startswith("✗ Not yet."), verdict.inner_text()
        assert gallery.locator(".cell_output").evaluate_all(
            "parts => parts.every(p => !p.checkVisibility())"
        ), "the static feedback still shows beside the live one"
        assert blocked == [], blocked
        assert errors == [], errors
    finally:
        context.close()


def test_no_kernel_says_so_and_offers_colab_and_the_download(browser, book_url):
    """The default build asks Binder; with Binder out of reach the page says so, at once."""
    context, page, errors, blocked = open_chapter(browser, book_url, DESKTOP)
    try:
        press(page, page.get_by_role("button", name="Run this page"), DESKTOP)
        status = page.locator(".mha-live-status[data-state='failed']")
        status.wait_for(timeout=30_000)
        text = status.inner_text()
        assert "Binder may be full or down" in text, text
        assert status.get_by_role("link", name="Open this chapter in Colab").count() == 1
        assert status.get_by_role("link", name="download the notebook").count() == 1
        assert any("mybinder.org" in url for url in blocked), blocked
        assert not any("thebe" in url or "cdn" in url for url in blocked), blocked
        # The page reads as before: every reveal is back behind its toggle, with its output.
        assert page.locator(".cell.mha-live").count() == 0
        assert page.locator(".cell.tag_reveal > details > summary").count() > 0
    finally:
        context.close()
