"""JupyterLab rehearsal: opened in JupyterLab, as Binder opens it, every reveal and solution is
collapsed.

``binder_check.py`` calls ``check_chapters`` once the chapters have run, with its fresh environment
(which has the JupyterLab that ``binder/jupyterlab.txt`` pins) and its copy of the repository.

1. ``jupyter lab`` serves the copy on 127.0.0.1 at a free port, with no token and no browser. Its
   settings, workspaces, config, runtime files and IPython profile live in a temporary folder, so no
   state leaks in or out, and it fetches nothing from outside: no news, no update check, and an
   extension manager that cannot search PyPI.
2. Chromium opens JupyterLab once, at ``/lab?reset`` (a fresh workspace, as on a fresh Binder),
   then each chapter in it, as a reader opens one from the file browser (JupyterLab's
   ``docmanager:open`` command), the one before it closed first. A reveal or solution cell (known
   by its tag) must show its input collapsed (its first line and •••) and its outputs collapsed;
   every other code cell must show what its ``jupyter`` metadata says, so ordinary cells are open,
   and the check can tell the two apart. Requests that leave the machine are blocked and
   reported. A screenshot at the first reveal goes to ``_build/screenshots/jupyterlab-NAME.png``.
3. The first reveal's answer box, once its code and then its outputs are expanded (two clicks),
   still keeps its content in a closed ``<details>`` (``mha.reveal.collapsed``, for Colab,
   which ignores the metadata): the box has survived JupyterLab's HTML sanitizer, and one click
   on its summary opens it.
4. Self-test: a copy of the first chapter, with one reveal's ``jupyter`` metadata removed, must fail
   the check at that cell and nowhere else.

In JupyterLab 4 a collapsed input replaces the cell's editor (``.jp-InputArea``) with a
``.jp-InputPlaceholder``, and collapsed outputs replace ``.jp-OutputArea`` with a
``.jp-OutputPlaceholder``.
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from chromium import CHROMIUM_ARGS, MISSING, find_chromium  # shared with the browser tests

ROOT = Path(__file__).resolve().parents[1]

REQUIREMENTS = ROOT / "binder" / "jupyterlab.txt"
SCREENSHOTS = ROOT / "_build" / "screenshots"
HIDDEN_KINDS = ("reveal", "solution")
VIEWPORT = {"width": 1280, "height": 800}
START_TIMEOUT = 60  # seconds for the server to answer
RENDER_TIMEOUT = 60_000  # milliseconds for a notebook to show all its cells
# The news prompt ("Would you like to get notified about official Jupyter news?") would cover the
# notebook in every screenshot; saying "no" up front also keeps the page from asking for the feed.
USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}
}
CELLS = ".jp-NotebookPanel .jp-Notebook-cell"
CELL_STATES = """cells => cells.map(cell => ({
    input: cell.querySelector('.jp-InputPlaceholder') && !cell.querySelector('.jp-InputArea')
           ? 'collapsed'
         : cell.querySelector('.jp-InputArea') ? 'open' : 'missing',
    outputs: cell.querySelector('.jp-OutputPlaceholder') && !cell.querySelector('.jp-OutputArea')
             ? 'collapsed'
           : cell.querySelector('.jp-OutputArea-output') ? 'open' : 'missing',
}))"""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def lab_command(venv, repository, state, port):
    command = [
        str(venv / "bin" / "jupyter"),
        "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        f"--ServerApp.root_dir={repository}",
        "--LabApp.news_url=None",
        "--LabApp.extension_manager=readonly",
        # window.jupyterapp: the check opens each chapter with JupyterLab's own command (OPEN).
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        f"--LabApp.user_settings_dir={state / 'settings'}",
        f"--LabApp.workspaces_dir={state / 'workspaces'}",
    ]
    return command + (["--allow-root"] if os.geteuid() == 0 else [])


def write_user_settings(folder):
    for plugin, values in USER_SETTINGS.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@contextlib.contextmanager
def jupyter_lab(venv, repository, env):
    """Serve ``repository`` with the environment's ``jupyter lab``; yield its URL; always stop
    it."""
    with tempfile.TemporaryDirectory(prefix="jupyterlab-check-") as temporary:
        state = Path(temporary)
        write_user_settings(state / "settings")
        env = dict(
            env,
            **{
                name: str(state / folder)
                for name, folder in (
                    ("JUPYTER_CONFIG_DIR", "config"),
                    ("JUPYTER_DATA_DIR", "data"),
                    ("JUPYTER_RUNTIME_DIR", "runtime"),
                    ("IPYTHONDIR", "ipython"),
                )
            },
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log_path = state / "jupyter-lab.log"
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                lab_command(venv, repository, state, port),
                cwd=repository,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                wait_until_answering(url, server, log_path)
                yield url
            finally:
                server.terminate()  # jupyter lab shuts its kernels down on SIGTERM
                try:
                    server.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    server.kill()  # its kernels notice their parent is gone, and exit
                    server.wait()


def wait_until_answering(url, server, log_path):
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            break
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{url}/api/status", timeout=2):
                return
        time.sleep(0.3)
    tail = "\n".join(log_path.read_text().splitlines()[-15:])
    raise RuntimeError(f"jupyter lab did not answer at {url} within {START_TIMEOUT} s:\n{tail}")


def expected_states(notebook):
    """``[(cell number, label, input collapsed?, outputs collapsed? or None if no outputs)]``, for
    every code cell of ``notebook`` (numbered from 1 among all its cells), and how many cells it
    has."""
    cells = json.loads(notebook.read_text())["cells"]
    expected = []
    for number, cell in enumerate(cells, start=1):
        if cell["cell_type"] != "code":
            continue
        kind = next((k for k in HIDDEN_KINDS if k in cell["metadata"].get("tags", [])), None)
        collapsed = cell["metadata"].get("jupyter", {})
        input_collapsed = kind is not None or collapsed.get("source_hidden", False)
        outputs_collapsed = kind is not None or collapsed.get("outputs_hidden", False)
        expected.append(
            (
                number,
                kind or "code",
                input_collapsed,
                outputs_collapsed if cell["outputs"] else None,
            )
        )
    return expected, len(cells)


def collapse_problems(page, notebook):
    """What the open notebook shows collapsed or open that it should not: a list of problems,
    empty if none."""
    expected, cell_count = expected_states(notebook)
    if not any(not inp and outs is False for _, kind, inp, outs in expected if kind == "code"):
        return ["no ordinary code cell with outputs to tell open from collapsed"]
    page.wait_for_function(
        f"n => document.querySelectorAll('{CELLS}').length >= n",
        arg=cell_count,
        timeout=RENDER_TIMEOUT,
    )
    states = page.eval_on_selector_all(CELLS, CELL_STATES)
    if len(states) != cell_count:
        return [f"the notebook has {cell_count} cells, JupyterLab shows {len(states)}"]
    problems = []
    for number, label, input_collapsed, outputs_collapsed in expected:
        shown = states[number - 1]
        want = {"input": "collapsed" if input_collapsed else "open"}
        if outputs_collapsed is not None:
            want["outputs"] = "collapsed" if outputs_collapsed else "open"
        problems += [
            f"cell {number} ({label}): {part} {shown[part]}, should be {state}"
            for part, state in want.items()
            if shown[part] != state
        ]
    return problems


#: The state of the answer box in a cell: whether it is there, closed in its own <details>,
#: with a summary to click.
ANSWER_BOX = """cell => {
    const box = cell.querySelector('.jp-OutputArea .mha-reveal');
    const details = box && box.querySelector(':scope > details.mha-hidden');
    return {
        box: Boolean(box),
        closed: Boolean(details) && !details.open,
        summary: Boolean(details && details.querySelector(':scope > summary')),
    };
}"""


def answer_box_problems(page, notebook):
    """The first reveal with an answer box: expanded, it shows the box closed; a click on the
    box's summary opens it."""
    number = next(
        (n for n, label, _, outs in expected_states(notebook)[0] if label == "reveal" and outs),
        None,
    )
    if number is None:
        return []
    cell = page.locator(CELLS).nth(number - 1)
    # A reader expands the collapsed code (JupyterLab then shows the collapsed outputs), then
    # the outputs.
    for placeholder in (".jp-InputPlaceholder", ".jp-OutputPlaceholder"):
        content = cell.locator(f"{placeholder} .jp-Placeholder-content")
        if content.count() and content.first.is_visible():
            content.first.click()
    where = f"cell {number} (reveal)"
    try:
        cell.locator(".jp-OutputArea .mha-reveal").first.wait_for(timeout=RENDER_TIMEOUT)
    except PlaywrightError:
        return [f"{where}: no answer box once its outputs are expanded"]
    state = cell.evaluate(ANSWER_BOX)
    if not (state["closed"] and state["summary"]):
        return [f"{where}: the answer box is not closed behind its own summary ({state})"]
    cell.locator(".mha-reveal summary").first.click()
    if cell.evaluate(ANSWER_BOX)["closed"]:
        return [f"{where}: a click on the answer box's summary does not open it"]
    return []


#: Closes every open tab without asking (a chapter whose cells the check expanded has unsaved
#: changes), then opens ``path`` as the file browser does.
OPEN = """async path => {
    const app = window.jupyterapp;
    for (const widget of Array.from(app.shell.widgets('main'))) widget.dispose();
    await app.commands.execute('docmanager:open', {path});
}"""


def open_chapter(page, left, notebook, repository, screenshot=None):
    """Open ``notebook`` in the JupyterLab that ``page`` shows; return its problems, with every
    request in ``left`` (those the page made that would have left the machine since the last
    chapter, or since JupyterLab loaded), which it then empties.

    One page for every chapter: loading JupyterLab once instead of once per chapter took
    about half of the check's CPU off (Chromium, the server and its kernels counted)."""
    try:
        page.evaluate(OPEN, notebook.relative_to(repository).as_posix())
        problems = collapse_problems(page, notebook)
        if screenshot is not None:
            first_hidden = next(
                (n for n, label, *_ in expected_states(notebook)[0] if label in HIDDEN_KINDS), 1
            )
            page.locator(CELLS).nth(first_hidden - 1).evaluate(
                "cell => cell.scrollIntoView({block: 'center'})"
            )
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=screenshot)
        problems += answer_box_problems(page, notebook)
    except PlaywrightError as error:
        problems = [f"JupyterLab did not show the notebook: {error.message.splitlines()[0]}"]
    problems += [
        f"the page asked for {request} (blocked: nothing may leave the machine)" for request in left
    ]
    left.clear()
    return problems


def lab_page(browser, url):
    """JupyterLab, loaded once in a fresh workspace, and the list of the requests it made that
    would have left the machine (each is blocked)."""
    page = browser.new_context(viewport=VIEWPORT).new_page()
    left = []

    def stay_local(route, request):
        if urlparse(request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            left.append(request.url)
            route.abort()

    page.route("**/*", stay_local)
    page.goto(f"{url}/lab?reset")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.restored", timeout=RENDER_TIMEOUT
    )
    page.evaluate("() => window.jupyterapp.restored")
    return page, left


def tampered_copy(notebook):
    """A copy of ``notebook`` beside it whose first reveal or solution lost its ``jupyter``
    metadata; returns the copy and that cell's number."""
    content = json.loads(notebook.read_text())
    number, cell = next(
        (n, c)
        for n, c in enumerate(content["cells"], start=1)
        if set(HIDDEN_KINDS) & set(c["metadata"].get("tags", []))
    )
    del cell["metadata"]["jupyter"]
    copy = notebook.with_name(f"tampered-{notebook.name}")
    copy.write_text(json.dumps(content, indent=1))
    return copy, number


def check_chapters(venv, repository, chapters, env):
    """Open every chapter, then the tampered copy; return ``[(what, problems)]``, the self-test
    last."""
    browser_path = find_chromium()
    if browser_path is None:
        return [("JupyterLab", [MISSING])]
    results = []
    try:
        with jupyter_lab(venv, repository, env) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(browser_path), headless=True, args=CHROMIUM_ARGS
            )
            page, left = lab_page(browser, url)
            for notebook in chapters:
                shot = SCREENSHOTS / f"jupyterlab-{notebook.stem}.png"
                results.append(
                    (notebook.name, open_chapter(page, left, notebook, repository, shot))
                )
            copy, number = tampered_copy(chapters[0])
            try:
                caught = open_chapter(page, left, copy, repository)
            finally:  # a copy left in chapters/ would be a page outside the book's toc
                copy.unlink(missing_ok=True)
            missed = not caught or any(not p.startswith(f"cell {number} ") for p in caught)
            results.append(
                (
                    f"self-test: the check fails on {copy.name} (cell {number} uncollapsed)",
                    [f"it reported {caught or 'nothing'}"] if missed else [],
                )
            )
            browser.close()
    except RuntimeError as error:
        results.append(("JupyterLab", [str(error)]))
    return results


def pinned_version():
    """The version ``binder/jupyterlab.txt`` pins (``jupyterlab==X`` -> ``X``)."""
    lines = [
        line.strip() for line in REQUIREMENTS.read_text().splitlines() if not line.startswith("#")
    ]
    pins = [line.removeprefix("jupyterlab==") for line in lines if line.startswith("jupyterlab==")]
    if len(pins) != 1:
        sys.exit(
            f"binder-check: {REQUIREMENTS.relative_to(ROOT)} must pin exactly jupyterlab==VERSION"
        )
    return pins[0]
