"""The Chromium every browser check drives: found here, installed only by ``make chromium``.

Usage: python .ci/chromium.py --install     (``make chromium``; ``make browser`` and
                                              ``make binder-check`` run it first)

Looked for in this order:
1. ``$CHROMIUM_EXECUTABLE``, if set (GitHub's Ubuntu runners ship Google Chrome, and their
   ``chromium`` package is a snap that Playwright cannot drive);
2. Debian's ``/usr/bin/chromium``;
3. the Chromium that ``playwright install chromium`` downloads.

``--install``, when none is found: ``apt-get install -y chromium`` (as root, or with passwordless
``sudo -n``), else ``playwright install chromium``. The browser tests (``tests/browser``) and the
JupyterLab rehearsal (``jupyterlab_check.py``) only look; finding none, they fail and say to run
``make chromium``.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

DEBIAN = Path("/usr/bin/chromium")
# No sandbox and no GPU: containers and CI runners have neither. The rest keeps Chromium from
# phoning home, so the only requests a page makes are the book's own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MISSING = (
    "No Chromium found: run `make chromium` "
    "(or set CHROMIUM_EXECUTABLE to a Chromium-based browser)."
)


def playwright_chromium():
    """The executable of Playwright's own Chromium, or ``None`` if it is not downloaded."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        path = Path(playwright.chromium.executable_path)
    return path if path.exists() else None


def find_chromium():
    """The first Chromium of the three places above, or ``None``. Installs nothing."""
    if "CHROMIUM_EXECUTABLE" in os.environ:
        named = Path(os.environ["CHROMIUM_EXECUTABLE"])
        return named if named.exists() else None
    if DEBIAN.exists():
        return DEBIAN
    return playwright_chromium()


def install_with_apt():
    """``apt-get install -y chromium``, as root or with ``sudo -n``; whether it worked."""
    if shutil.which("apt-get") is None:
        return False
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        if subprocess.run(sudo + command, env=env).returncode != 0:
            return False
    return DEBIAN.exists()


def install_with_playwright():
    command = [sys.executable, "-m", "playwright", "install", "chromium"]
    return subprocess.run(command).returncode == 0


def main(arguments):
    found = find_chromium()
    if found is None and "--install" in arguments:
        if "CHROMIUM_EXECUTABLE" in os.environ:
            sys.exit(
                f"chromium: CHROMIUM_EXECUTABLE={os.environ['CHROMIUM_EXECUTABLE']} does not exist."
            )
        print("chromium: none found; installing Debian's chromium", flush=True)
        if not install_with_apt():
            print("chromium: apt-get could not; installing Playwright's Chromium", flush=True)
            install_with_playwright()
        found = find_chromium()
    if found is None:
        sys.exit(f"chromium: {MISSING}")
    print(f"chromium: {found}")


if __name__ == "__main__":
    main(sys.argv[1:])
