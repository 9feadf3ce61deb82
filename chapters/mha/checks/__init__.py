"""Self-checks for the book's exercises (AUTHORING.md): what chapters import (re-exports)."""

from .core import CheckResult, Exercise, Note  # noqa: F401
from .two_dim import (  # noqa: F401
    check_twelve_wide_output,
    check_two_dim_output,
    twelve_wide_output,
    two_dim_output,
)
from .weight_split import check_weight_split, weight_split  # noqa: F401
from .wrapper import check_wrapper, sequential_wrapper  # noqa: F401
