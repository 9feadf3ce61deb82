"""Chapter 2's practices: two heads two values wide, then four heads twelve
values wide. The checks are in :mod:`mha.checks.two_dim`."""

from .checks.two_dim import TWELVE_WIDE, TWO_DIM, check_twelve_wide_output, check_two_dim_output
from .exercise import Exercise


def solution(name, t):
    """The solution's code for target ``t``: the starting call with the right
    arguments, and the check."""
    return (f"torch.manual_seed(123)\n{name} = MultiHeadAttentionWrapper(\n"
            f"    d_in=3, d_out={t.d_out}, context_length=6, dropout=0.0, num_heads={t.heads}\n"
            f")\n{t.check}({name})")  # fmt: skip


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
