"""Chapter 2's exercises: choose the wrapper's arguments for a given output width.

Both start from ``MultiHeadAttentionWrapper(d_in=3, d_out=2, context_length=6, dropout=0.0,
num_heads=2)`` and keep the class: only the arguments change. The first asks for two heads and
two-dimensional context vectors, the second for four heads twelve values wide (a configuration
no earlier cell builds). :func:`diagnosis` runs the catalogue: what the answer is, then how the
wrapper was built (:mod:`.wrapper_args`), then how it computes (:data:`.heads.JOINS`).
"""

from dataclasses import dataclass

from .core import CheckResult, Exercise, fill, first_mistake, never_raises
from .wrapper_args import KEEP_FORWARD, MISTAKES, Attempt


@dataclass(frozen=True)
class Target:
    """What an exercise asks for: how many heads, how wide the context vectors are, and the
    configurations the book builds before it, ``(num_heads, d_out, what it is)``."""

    check: str  # the check's name, as messages quote it
    exercise: str  # the Exercise's name, for hint(1)
    heads: int
    width: int
    earlier: tuple = ()


TWO_DIM = Target("check_two_dim_output", "two_dim_output", heads=2, width=2)
TWELVE_WIDE = Target(
    "check_twelve_wide_output",
    "twelve_wide_output",
    heads=4,
    width=12,
    earlier=(
        (3, 2, "chapter 1's running example"),
        (3, 4, "the answer to chapter 1's question about d_out"),
        (2, 1, "the first practice's answer"),
    ),
)


def diagnosis(answer, target):
    """The first catalogued mistake in ``answer`` (with its evidence), or ``None`` if right."""
    attempt = Attempt(answer, target)
    return first_mistake(MISTAKES, attempt), attempt


def check(answer, target, praise):
    """The verdict on ``answer`` for ``target``: ``praise``, or what is wrong, in words."""
    mistake, attempt = diagnosis(answer, target)
    if mistake is not None:
        return CheckResult(False, mistake.tell(attempt))
    if attempt.is_correct():
        return CheckResult(True, praise)
    unknown = "Your wrapper's output (shape {run.output_shape}) is not its heads' outputs side "
    unknown += "by side, and matches no mistake this check knows. Keep forward as "
    return CheckResult(False, fill(unknown + KEEP_FORWARD + ".", attempt))


PRAISE = (
    "{}, each with W_query, W_key and W_value {} wide: the context vectors are "
    "{}-dimensional (num_heads × d_out = {}). Each head reads the same x and computes causal "
    "attention from its own weights, and the output holds the heads' values side by side, in "
    "head order."
)


@never_raises
def check_two_dim_output(wrapper):
    """Chapter 2's first exercise: two heads, two-dimensional context vectors."""
    return check(wrapper, TWO_DIM, PRAISE.format("Two heads", "1 value", 2, "2 × 1"))


@never_raises
def check_twelve_wide_output(wrapper):
    """Chapter 2's second exercise: four heads, twelve-dimensional context vectors."""
    return check(wrapper, TWELVE_WIDE, PRAISE.format("Four heads", "3 values", 12, "4 × 3"))


def _solution(name, d_out, num_heads, check_name):
    return (
        f"torch.manual_seed(123)\n{name} = MultiHeadAttentionWrapper(\n"
        f"    d_in=3, d_out={d_out}, context_length=6, dropout=0.0, num_heads={num_heads}\n"
        f")\n{check_name}({name})"
    )


two_dim_output = Exercise(
    check_two_dim_output,
    hints=(
        "The wrapper's output is num_heads × d_out wide, because every head contributes d_out "
        "values per token. Of those two arguments, which one does the exercise let you change?",
        "num_heads stays 2, so for a width of 2 each head may contribute only one value per "
        "token. Which argument sets the width of each head?",
        "d_out is the width of each head. The other arguments describe the input "
        "(d_in, context_length) or regularise (dropout): keep them as they were.",
    ),
    solution_code=_solution("my_wrapper", 1, 2, "check_two_dim_output"),
)

twelve_wide_output = Exercise(
    check_twelve_wide_output,
    hints=(
        "Two arguments set the output's width. Which one counts the heads, and which one is "
        "the width of each head?",
        "Twelve values shared by four heads: how many values does each head contribute? "
        "Chapter 1 shared twelve values among three heads; one more head changes each "
        "head's share.",
        "num_heads=4, and d_out is the width of each head, not of the whole output.",
    ),
    solution_code=_solution("my_wrapper12", 3, 4, "check_twelve_wide_output"),
)
