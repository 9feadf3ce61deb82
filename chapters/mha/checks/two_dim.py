"""Chapter 2's first exercise: two heads, two values wide, on :mod:`.arguments`' catalogue."""

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
