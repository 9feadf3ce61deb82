"""Chapter 2's exercises on :mod:`.arguments`' catalogue: two heads two values wide, then four
heads twelve values wide (an answer copied from earlier in the book is told its number of heads)."""

from functools import partial

from .arguments import Target, check, solution
from .core import Exercise, never_raises

TWO_DIM = Target("check_two_dim_output", "two_dim_output", "Two", heads=2, width=2)
TWELVE_WIDE = Target("check_twelve_wide_output", "twelve_wide_output", "Four", heads=4, width=12)
check_two_dim_output = never_raises(
    partial(check, TWO_DIM), TWO_DIM.check, "Two heads whose context vectors are two values wide."
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
    solution_code=solution("my_wrapper", TWO_DIM),
)
check_twelve_wide_output = never_raises(
    partial(check, TWELVE_WIDE),
    TWELVE_WIDE.check,
    "Four heads whose context vectors are twelve values wide.",
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
    solution_code=solution("my_wrapper12", TWELVE_WIDE),
)
