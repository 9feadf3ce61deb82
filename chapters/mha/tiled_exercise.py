"""Chapter 7's practice: query_block, the online softmax over the key blocks a
query needs. The check is :func:`mha.checks.tiled.check_online_softmax`."""

import inspect
import textwrap

from .checks.tiled import check_online_softmax
from .exercise import Exercise
from .tiled import TiledAttention

#: The book's own loop, as the reader's class (its source: one copy, the one the tests run).
LOOP = textwrap.indent(textwrap.dedent(inspect.getsource(TiledAttention.query_block)), "    ")
CALL = "online_softmax.check(MyTiledAttention)"
SOLUTION = f"class MyTiledAttention(TiledAttentionStart):\n{LOOP}\n\n{CALL}"

online_softmax = Exercise(
    checker=check_online_softmax,
    hints=(
        "Each row of the query block keeps three things from one key block to the next: "
        "the largest score so far (row_max), the sum of exp(score - row_max) so far "
        "(row_sum), and the sum of exp(score - row_max) × value so far (out). The loop "
        "visits the key blocks from the first up to the one that holds the block's last "
        "query; only that last one, the diagonal block, needs the mask.",
        "For one key block: scores = q @ k.transpose(2, 3) / self.head_dim**0.5, "
        "(b, num_heads, rows, cols); on the diagonal block mask them with "
        "self.mask[q_start:q_end, k_start:k_end]; new_max is the larger of row_max and the "
        "block's own row maxima (keepdim=True). The old sum and the old out were taken "
        "relative to row_max: what factor moves them to new_max?",
        "The factor is rescale = torch.exp(row_max - new_max), 0 for the first block. Then "
        "row_sum = row_sum * rescale + weights.sum(-1, keepdim=True) and "
        "out = out * rescale + self.dropout(weights) @ v, with "
        "weights = torch.exp(scores - new_max). After the loop, return out / row_sum.",
    ),
    solution_code=SOLUTION,
)
