"""Binder's configuration agrees with the book: same versions, Python 3.11, links to this
repository's main.

``.ci/binder_check.py`` (``make binder-check``) proves the configuration runs every chapter; these
are the cheap agreements it relies on.
"""

import re
from urllib.parse import urlparse

import yaml

from conftest import ROOT

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def pins(path):
    """``{package: version}`` for every ``name==version`` line of a requirements file."""
    found = re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", path.read_text(), re.M)
    return {name.lower().replace("_", "-"): version for name, version in found}


def test_binder_installs_exactly_the_versions_the_book_is_tested_with():
    binder, book = pins(ROOT / "binder" / "requirements.txt"), pins(ROOT / "requirements.txt")
    assert binder, "binder/requirements.txt pins nothing"
    assert {name: book.get(name) for name in binder} == binder


def test_binder_runs_python_3_11():
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"


def test_launch_buttons_open_the_main_branch():
    assert CONFIG["repository"]["branch"] == "main"


def test_the_readme_binder_badge_opens_this_repository_on_main():
    org_repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    hub = CONFIG["launch_buttons"]["binderhub_url"].rstrip("/")
    badges = re.findall(r"\((https?://[^)\s]*/v2/gh/[^)\s]*)\)", (ROOT / "README.md").read_text())
    assert badges and all(b.startswith(f"{hub}/v2/gh/{org_repo}/main?") for b in badges), badges
