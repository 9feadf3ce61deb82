"""Chapter 2's second exercise: four heads, twelve values wide, on :mod:`.arguments`."""

from .arguments import Target, check, solution
from .core import Exercise, never_raises

TWELVE_WIDE = Target("check_twelve_wide_output", "twelve_wide_output", heads=4, width=12)


@never_raises
def check_twelve_wide_output(wrapper):
    """Four heads whose context vectors are twelve values wide."""
    return check(
        wrapper,
        TWELVE_WIDE,
        "Four heads, each with W_query, W_key and W_value 3 values wide: the context vectors "
        "are 12-dimensional (num_heads × d_out = 4 × 3). Each head reads the same x and "
        "computes causal attention from its own weights, and the output holds the heads' "
        "values side by side, in head order.",
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
    solution_code=solution("my_wrapper12", 3, 4, "check_twelve_wide_output"),
)
