"""The answer boxes' figures as files beside the page, not inline in its HTML.

A reveal's figure (``mha.reveal.reveal(figure=...)``) is an ``<img>`` with a base64 PNG inside the
answer box's HTML: in JupyterLab and Colab the box must carry its picture with it. On the web it
made chapter 3's page 303 KB, most of it one figure in a closed box, text the browser must read
before it can show the page. Here each such image is written once, by its content's hash, to the
site's ``_images/`` and the page links it; a browser fetches it like any figure, after the text.
``tests/browser/test_links_and_weight.py`` holds every page's HTML to its budget.
"""

import base64
import hashlib
import re
from pathlib import Path

INLINE_IMAGE = re.compile(r'src="data:image/(png|jpeg|gif);base64,([A-Za-z0-9+/=]+)"')
EXTENSIONS = {"png": "png", "jpeg": "jpg", "gif": "gif"}


def image_file(outdir, kind, data):
    """Writes the image to ``_images/`` (once: its name is its content's hash); its file name."""
    content = base64.b64decode(data)
    name = f"answer-{hashlib.sha256(content).hexdigest()[:20]}.{EXTENSIONS[kind]}"
    path = Path(outdir) / "_images" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return name


def move_inline_images(app, pagename, templatename, context, doctree):
    body = context.get("body") or ""
    if "data:image/" not in body:
        return
    up = "../" * pagename.count("/")

    def linked(match):
        return f'src="{up}_images/{image_file(app.outdir, *match.groups())}"'

    context["body"] = INLINE_IMAGE.sub(linked, body)


def setup(app):
    app.connect("html-page-context", move_inline_images)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
