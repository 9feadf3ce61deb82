"""Chapter 4's practice: one head per offset of a look-back task. The check
is :func:`mha.checks.lookback.check_lookback_model`."""

import textwrap

from .checks.lookback import check_lookback_model
from .exercise import Exercise

lookback_heads = Exercise(
    checker=check_lookback_model,
    hints=(
        "Count the offsets the variant looks back: each one needs an attention pattern of its own.",
        "A head has one attention pattern. With d_model fixed at 24, "
        "num_heads decides how many patterns there are and how wide each "
        "head is: head_dim = 24 // num_heads.",
    ),
    solution_code=textwrap.dedent(
        """\
        variant = LookbackTask(offsets=(1, 3, 6))
        torch.manual_seed(0)
        my_model = LookbackModel(variant, d_model=24, num_heads=3)
        lookback_heads.check(my_model)
        """
    ),
)
