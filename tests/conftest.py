"""Shared test set-up: the chapters' package is importable as ``mha``, as it is for the notebooks."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
sys.path.insert(0, str(CHAPTERS))
