"""Shared test set-up: where the repository and its chapters are.

The chapters' package is installed (``make`` installs it editable, see pyproject.toml), so tests
import ``mha`` as the notebooks do, from ``chapters/mha``.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
