"""Chapter 2's exercises on :mod:`.arguments`' catalogue: two heads two values wide, then four
heads twelve values wide (an answer copied from earlier in the book is told its number of heads)."""

from functools import partial

from .arguments import Target, check
from .core import never_raises

TWO_DIM = Target("check_two_dim_output", "two_dim_output", "Two", heads=2, width=2)
TWELVE_WIDE = Target("check_twelve_wide_output", "twelve_wide_output", "Four", heads=4, width=12)
# fmt: off
check_two_dim_output = never_raises(partial(check, TWO_DIM), TWO_DIM.check,
                                    "Two heads whose context vectors are two values wide.")
check_twelve_wide_output = never_raises(partial(check, TWELVE_WIDE), TWELVE_WIDE.check,
                                        "Four heads whose context vectors are twelve values wide.")
# fmt: on
