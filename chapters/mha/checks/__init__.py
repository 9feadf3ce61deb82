"""Self-checks for the book's exercises: one module per exercise, on one small core.

:mod:`.core` holds what every check returns and shows (:class:`CheckResult`, hints and the
solution of an :class:`Exercise`); :mod:`.reference` computes attention right and each known
wrong way; :mod:`.catalogue` writes an exercise's check as data: the right reference and its
mistakes as buggy references.
"""

from .core import CheckResult, Exercise, Note, describe_error, fill, never_raises
from .reference import Recipe, same
from .twelve_wide import check_twelve_wide_output, twelve_wide_output
from .two_dim import check_two_dim_output, two_dim_output
from .weight_split import WeightSplitSkeleton, check_weight_split, weight_split
from .wrapper import WrapperSkeleton, check_wrapper, sequential_wrapper

__all__ = [
    "CheckResult",
    "Exercise",
    "Note",
    "Recipe",
    "WeightSplitSkeleton",
    "WrapperSkeleton",
    "check_twelve_wide_output",
    "check_two_dim_output",
    "check_wrapper",
    "check_weight_split",
    "describe_error",
    "fill",
    "never_raises",
    "same",
    "sequential_wrapper",
    "twelve_wide_output",
    "two_dim_output",
    "weight_split",
]
