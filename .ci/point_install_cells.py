"""Point every chapter's install cell at a repository and a version (a branch or a commit).

Usage: python .ci/point_install_cells.py REPOSITORY_URL VERSION [chapters/NN_name.ipynb ...]

Each chapter's first code cell installs ``mha`` from ``REPOSITORY_URL/archive/VERSION.zip`` where
the package is missing (Colab, Kaggle, a downloaded notebook). The committed chapters name
``repository.url`` and ``branch`` of ``_config.yml`` (tests/test_standalone_chapters.py checks):
Colab opens them from that branch. The deploy workflow points the published copy at the repository
it runs in and at the very commit it builds, so a chapter downloaded from the book installs the
package its outputs were computed with. After changing the address in ``_config.yml``, run this
with the new address and ``main`` and commit the chapters.

It edits two lines of each notebook's text and keeps the rest byte for byte. Standard library
only: the deploy job installs nothing but requirements-book.txt.
"""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The two lines of the install cell, as the notebook's JSON spells them.
SETTINGS = {
    "BOOK_REPOSITORY": re.compile(r'(BOOK_REPOSITORY = \\")([^"\\]*)(\\")'),
    "BOOK_VERSION": re.compile(r'(BOOK_VERSION = \\")([^"\\]*)(\\")'),
}
REPOSITORY = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+")
VERSION = re.compile(r"[\w.-]+(/[\w.-]+)*")


def point(notebook, repository, version):
    """Rewrite ``notebook``'s install cell; return what was wrong with it, or ''."""
    text = notebook.read_text()
    for name, value in (("BOOK_REPOSITORY", repository), ("BOOK_VERSION", version)):
        text, count = SETTINGS[name].subn(lambda m, v=value: m[1] + v + m[3], text)
        if count != 1:
            return f"{notebook.name}: {count} lines set {name}, expected exactly 1"
    json.loads(text)  # still a notebook
    notebook.write_text(text)
    return ""


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    repository, version, *notebooks = argv
    repository = repository.rstrip("/")
    if not REPOSITORY.fullmatch(repository) or not VERSION.fullmatch(version):
        sys.exit(f"expected https://github.com/OWNER/NAME and a branch or commit: {argv[:2]}")
    paths = [Path(n) for n in notebooks] or sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
    problems = [p for p in (point(path, repository, version) for path in paths) if p]
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(paths) - len(problems)} chapters install mha from {repository} at {version}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
