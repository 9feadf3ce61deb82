"""Self-checks for the book's exercises: one module per exercise, the shared machinery beside.

The convention every exercise follows is described in :mod:`mha.checks.core`; the reference
every checker compares with is :mod:`mha.checks.reference`; answers that are classes written
from a skeleton are handled by :mod:`mha.checks.classes`.
"""

from .classes import (
    AnswerFacts,
    Skeleton,
    book_forward_of,
    book_shortcut_message,
    class_answer_mistakes,
    delegation_message,
    watching_book_forwards,
)
from .core import (
    CheckResult,
    Exercise,
    Mistake,
    Note,
    describe_error,
    evaluating,
    fill,
    first_mistake,
    kind_of,
    listed,
    never_raises,
)
from .reference import PROJECTIONS, Recipe, head_output, same, split_attention
from .two_dim import (
    TWO_DIM_MISTAKES,
    TwoDimAttempt,
    check_twelve_wide_output,
    check_two_dim_output,
    twelve_wide_output,
    two_dim_output,
)
from .weight_split import (
    WEIGHT_SPLIT_MISTAKES,
    WeightSplitSkeleton,
    check_weight_split,
    weight_split,
)
from .wrapper import WRAPPER_MISTAKES, WrapperSkeleton, check_wrapper, sequential_wrapper

__all__ = [
    "PROJECTIONS",
    "TWO_DIM_MISTAKES",
    "WEIGHT_SPLIT_MISTAKES",
    "WRAPPER_MISTAKES",
    "AnswerFacts",
    "CheckResult",
    "Exercise",
    "Mistake",
    "Note",
    "Recipe",
    "Skeleton",
    "TwoDimAttempt",
    "WeightSplitSkeleton",
    "WrapperSkeleton",
    "book_forward_of",
    "book_shortcut_message",
    "check_twelve_wide_output",
    "check_two_dim_output",
    "check_weight_split",
    "check_wrapper",
    "class_answer_mistakes",
    "delegation_message",
    "describe_error",
    "evaluating",
    "fill",
    "head_output",
    "first_mistake",
    "kind_of",
    "listed",
    "never_raises",
    "same",
    "sequential_wrapper",
    "split_attention",
    "twelve_wide_output",
    "two_dim_output",
    "watching_book_forwards",
    "weight_split",
]
