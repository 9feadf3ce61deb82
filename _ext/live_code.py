"""Live code in the web book: the settings of the "Run this page" button, and thebe's files.

Every chapter page gets one ``<meta name="mha-live">`` whose JSON tells ``_static/live-code.js``
where to get a kernel and which notebook the page is (the kernel starts in that notebook's
folder, so ``import mha`` finds the package beside the chapters):

- by default, Binder: this repository's ``binder/`` environment, from ``_config.yml``'s
  ``repository.url`` and ``repository.branch`` and ``launch_buttons.binderhub_url``;
- with ``MHA_LIVE_SERVER_URL`` (and ``MHA_LIVE_SERVER_TOKEN``) set when the book is built, that
  Jupyter server instead. The token is written into every page: use it for a server of your own
  (a local one, a test's), never for a shared one.

The settings travel as data, not as an inline script: an inline script emitted twice per page
(sphinx-thebe's under Sphinx 7.4) throws a SyntaxError in every reader's browser.

thebe's prebuilt ``lib/`` (``make thebe``: the pinned npm package in ``.tools/thebe``) is copied
into the built site's ``_static/thebe/`` once the build has finished; the page loads it only when
the reader presses the button. Without it the build warns, and ``-W`` turns that into an error.
"""

import html
import json
import os
import shutil
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from sphinx.util import logging

logger = logging.getLogger(__name__)

SERVER_URL = "MHA_LIVE_SERVER_URL"
SERVER_TOKEN = "MHA_LIVE_SERVER_TOKEN"
#: How long the page waits for a kernel before it says none came and offers Colab and the
#: download: a Binder launch that builds or queues can take minutes; a server of your own answers
#: at once or not at all.
BINDER_TIMEOUT_S = 300
SERVER_TIMEOUT_S = 60
#: Where ``make thebe`` unpacks thebe, relative to the book's root.
THEBE = Path(".tools") / "thebe"
#: What the site needs of it: the bundle and its chunks, not their source maps or type files.
THEBE_SKIP = shutil.ignore_patterns("*.map", "types")


def live_settings(theme_options, environ=os.environ):
    """Where the page gets its kernel: a configured Jupyter server, else Binder."""
    url = environ.get(SERVER_URL, "").strip()
    if url:
        return {
            "server": {"url": url.rstrip("/") + "/", "token": environ.get(SERVER_TOKEN, "")},
            "timeout": SERVER_TIMEOUT_S,
        }
    repository = urlparse(theme_options["repository_url"]).path.strip("/")
    return {
        "binder": {
            "url": theme_options["launch_buttons"]["binderhub_url"].rstrip("/"),
            "repo": repository,
            "ref": theme_options.get("repository_branch") or "main",
        },
        "timeout": BINDER_TIMEOUT_S,
    }


def add_live_meta(app, pagename, templatename, context, doctree):
    """A chapter page (a notebook) names its notebook and the kernel settings."""
    if doctree is None:
        return
    source = Path(app.env.doc2path(pagename))
    if source.suffix != ".ipynb":
        return
    theme = app.config.html_theme_options
    notebook = PurePosixPath(theme.get("path_to_docs") or "") / source.relative_to(app.srcdir)
    settings = {**live_settings(theme), "notebook": str(notebook)}
    context["metatags"] = context.get("metatags", "") + (
        f'<meta name="mha-live" content="{html.escape(json.dumps(settings))}">\n'
    )


def copy_thebe(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    lib = Path(app.srcdir) / THEBE / "lib"
    if not (lib / "index.js").is_file():
        logger.warning(
            f"live code: thebe is not in {THEBE}; run `make thebe` (the pinned npm package). "
            "Without it the pages' Run this page button cannot load."
        )
        return
    target = Path(app.outdir) / "_static" / "thebe"
    shutil.copytree(lib, target, ignore=THEBE_SKIP, dirs_exist_ok=True)
    shutil.copy2(Path(app.srcdir) / THEBE / "package.json", target / "package.json")


def setup(app):
    app.connect("html-page-context", add_live_meta)
    app.connect("build-finished", copy_thebe)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
