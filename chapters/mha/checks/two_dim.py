"""Chapter 2's two exercises: two heads with two-dimensional context vectors, then four heads
twelve values wide. The reader changes only the arguments of the starting call
``MultiHeadAttentionWrapper(d_in=3, d_out=2, context_length=6, dropout=0.0, num_heads=2)``."""

from .arguments import Target, check, solution
from .core import Exercise, never_raises

TWO_DIM = Target("check_two_dim_output", "two_dim_output", heads=2, width=2)


@never_raises
def check_two_dim_output(wrapper):
    """Two heads whose context vectors are two values wide."""
    return check(
        wrapper,
        TWO_DIM,
        "Two heads, each with W_query, W_key and W_value 1 value wide: the context vectors are "
        "2-dimensional (num_heads × d_out = 2 × 1). Each head reads the same x and computes "
        "causal attention from its own weights, and the output holds the heads' values side "
        "by side, in head order.",
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
    solution_code=solution("my_wrapper", 1, 2, "check_two_dim_output"),
)


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
