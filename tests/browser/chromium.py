"""The browser every browser check drives: Debian's Chromium, installed when missing.

Shared by the browser tests (``conftest.py``) and the JupyterLab rehearsal (``.ci/jupyterlab_check.py``).
"""

import os
import subprocess
from pathlib import Path

# Debian's Chromium by default; CHROMIUM_EXECUTABLE names another Chromium-based browser (GitHub's
# Ubuntu runners ship Google Chrome, and their `chromium` package is a snap that Playwright cannot drive).
CHROMIUM = Path(os.environ.get("CHROMIUM_EXECUTABLE", "/usr/bin/chromium"))
# No sandbox and no GPU: containers and CI runners have neither. The rest keeps Chromium from
# phoning home, so the only requests a page makes are the book's own.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]


def chromium_path():
    """Debian's Chromium; installed with apt-get when missing (root, or passwordless sudo).
    Returns None if there is still no browser."""
    if not CHROMIUM.exists() and "CHROMIUM_EXECUTABLE" not in os.environ:
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
            subprocess.run(sudo + command, check=True, env=env)
    return CHROMIUM if CHROMIUM.exists() else None
