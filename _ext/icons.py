"""The page's icons without Font Awesome's script.

pydata-sphinx-theme loads Font Awesome's whole JavaScript (1.49 MB, about two thirds of a chapter
page's bytes) on every page to draw the seventeen icons the book's header, drawer, search and
"Run this page" button show. This extension puts ``templates/`` before the theme's templates:
its ``static/webpack-macros.html`` emits the theme's own asset tags less that script, and
``_static/icons.css`` draws each icon the pages use from its Font Awesome path (10 KB).
tests/browser/test_links_and_weight.py checks that every icon on a page is drawn and that no page
loads the script.
"""

from pathlib import Path

TEMPLATES = Path(__file__).parent / "templates"


def put_templates_first(app, config):
    config.templates_path = [str(TEMPLATES), *config.templates_path]


def setup(app):
    app.connect("config-inited", put_templates_first)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
