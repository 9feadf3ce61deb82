"""Self-checks for the book's exercises: one module per exercise, on one small core (core.py,
facts.py, reference.py, catalogue.py; practice.py for class practices). AUTHORING.md says how to
write one. Here: what the chapters import from ``mha.checks``."""

from .core import CheckResult, Exercise, Note
from .twelve_wide import check_twelve_wide_output, twelve_wide_output
from .two_dim import check_two_dim_output, two_dim_output
from .weight_split import WeightSplitSkeleton, check_weight_split, weight_split
from .wrapper import WrapperSkeleton, check_wrapper, sequential_wrapper

__all__ = [
    "CheckResult",
    "Exercise",
    "Note",
    "WeightSplitSkeleton",
    "WrapperSkeleton",
    "check_twelve_wide_output",
    "check_two_dim_output",
    "check_wrapper",
    "check_weight_split",
    "sequential_wrapper",
    "twelve_wide_output",
    "two_dim_output",
    "weight_split",
]
