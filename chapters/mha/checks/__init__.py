"""Self-checks for the book's exercises: one module per exercise, the shared machinery in ``core``.

The convention every exercise follows is described in :mod:`mha.checks.core`.
"""

from .core import (
    CheckResult,
    Exercise,
    Mistake,
    Note,
    describe_error,
    evaluating,
    first_mistake,
    never_raises,
)
from .two_dim import TWO_DIM_MISTAKES, TwoDimAttempt, check_two_dim_output, two_dim_output
from .weight_split import WEIGHT_SPLIT_MISTAKES, check_weight_split, weight_split

__all__ = [
    "TWO_DIM_MISTAKES",
    "WEIGHT_SPLIT_MISTAKES",
    "CheckResult",
    "Exercise",
    "Mistake",
    "Note",
    "TwoDimAttempt",
    "check_two_dim_output",
    "check_weight_split",
    "describe_error",
    "evaluating",
    "first_mistake",
    "never_raises",
    "two_dim_output",
    "weight_split",
]
