"""Self-checks for the book's exercises, one module each on a small core (AUTHORING.md); here,
what the chapters import from ``mha.checks`` (re-exports, hence the noqa)."""

from .core import CheckResult, Exercise, Note  # noqa: F401
from .twelve_wide import check_twelve_wide_output, twelve_wide_output  # noqa: F401
from .two_dim import check_two_dim_output, two_dim_output  # noqa: F401
from .weight_split import WeightSplitSkeleton, check_weight_split, weight_split  # noqa: F401
from .wrapper import WrapperSkeleton, check_wrapper, sequential_wrapper  # noqa: F401
