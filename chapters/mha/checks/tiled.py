"""Chapter 7's exercise: ``query_block``, the online softmax over the key blocks a query needs.

The check builds the reader's class in each of ``CONFIGS`` and names the first mistake of
:data:`.tiled_catalogue.CATALOGUE` that a run (:class:`.tiled_run.Run`) shows: a wrong output
matches a buggy reference, or a fact of the run holds (a score matrix wider than a block, blocks
computed twice or above the diagonal, dropout misplaced in training).
"""

from collections import namedtuple

import torch

from ..tiled import TiledAttention
from .core import CheckResult, Exercise, fill, never_raises
from .tiled_catalogue import MISTAKES
from .tiled_run import Run


class TiledAttentionStart(TiledAttention):
    """The practice's start: ``TiledAttention``'s layers and ``forward``, which hands each block
    of queries to ``query_block``, the reader's to write."""

    def query_block(self, q, keys, values, q_start):
        raise NotImplementedError("write the loop over key blocks in query_block")


Config = namedtuple("Config", "d_in d_out context_length num_heads num_tokens qkv_bias block_size "
                    "query_gain dropout seed")  # fmt: skip
#: Lengths a block divides and not, shorter than a block, one token, biases, dropout, and scores
#: in the hundreds (W_query × 250), where exp overflows; head_dim is no block size nor d_in.
CONFIGS = tuple(Config(*c) for c in ((6, 6, 12, 2, 12, False, 4, 1, 0.0, 1),
    (5, 9, 14, 3, 10, True, 4, 1, 0.0, 2), (4, 6, 8, 1, 3, False, 5, 1, 0.0, 3),
    (4, 6, 8, 2, 1, False, 4, 1, 0.0, 4), (8, 12, 9, 4, 9, False, 4, 1, 0.5, 5),
    (6, 6, 12, 2, 12, False, 4, 250, 0.0, 6)))  # fmt: skip
BOOK = __package__.split(".")[0] + "."  # the book's modules: mha.*
# fmt: off
START = ("What must each row of a query block remember from one key block to the next? "
         "online_softmax.hint(1) starts from there.")
CATALOGUE = (  # what the answer is, then what it computes (MISTAKES)
    ("built_wrong", "Building your class raised {error_text}: keep the starting constructor."),
    ("starting", "Your query_block still raises NotImplementedError: this is the starting code, "
     "and the loop over key blocks is yours to write. " + START),
    ("book", "Your code hands the work to the book's {r.book[0]}: write the loop yourself."),
    ("torch_attention", "Your code calls PyTorch's own attention (scaled_dot_product_attention or "
     "nn.MultiheadAttention), which does the online softmax for you: write it yourself."),
    *MISTAKES,
)
# fmt: on


def _not_an_answer(cls):
    """What is wrong with ``cls`` before it runs (not a class, the book's, no query_block)."""
    name, own = getattr(cls, "__name__", ""), getattr(cls, "query_block", None)
    module = isinstance(cls, type) and issubclass(cls, torch.nn.Module)
    start = module and issubclass(cls, TiledAttentionStart)
    book = module and any(k.__module__.startswith(BOOK) for k in cls.__mro__)
    kind, write = f"the function {name}" if callable(cls) else "something else", "subclass "
    write += "TiledAttentionStart and write query_block."
    for wrong, message in (
        (cls is None, "online_softmax.check got None: run the cell that defines your class."),
        (isinstance(cls, torch.nn.Module), f"You passed an instance of {type(cls).__name__}: "
         "pass the class itself; the check builds its own instances, with several sizes."),
        (not isinstance(cls, type), f"online_softmax.check expects a class, but got {kind}."),
        (not module, f"{name} is a class, but not an nn.Module: {write}"),
        (book and not start or own is TiledAttention.query_block,
         f"{name} is one of the book's own modules, or built on one: {write}"),
        (not start, f"{name} does not start from TiledAttentionStart: {write}"),
        (own is TiledAttentionStart.query_block, f"{name} has no query_block of its own yet: "
         f"the starting code's only raises. {START}"),
    ):  # fmt: skip
        if wrong:
            return message
    return None


@never_raises
def check_online_softmax(cls):
    """Check a class whose ``query_block`` runs the online softmax over key blocks: the first
    mistake of the catalogue that a run shows, in the first configuration that shows one."""
    problem = _not_an_answer(cls)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        for run in (Run(cls, c) for c in CONFIGS if not problem):
            test, message = next(((t, m) for t, m in CATALOGUE if run.shows(t)), (None, None))
            seen = "" if test in ("built_wrong", "starting") else "\n(Seen with {call}.)"
            problem = message and fill(message + seen, run)
    return CheckResult(not problem, problem or (
        f"Your loop matches MultiHeadAttention in all {len(CONFIGS)} configurations, holds no "
        "scores wider than a block, computes each causal block once, and in training shows none "
        "of the dropout mistakes this check knows."))  # fmt: skip


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
        "The factor is torch.exp(row_max - new_max), 0 for the first block. Then "
        "row_sum = row_sum * factor + weights.sum(-1, keepdim=True) and "
        "out = out * factor + self.dropout(weights) @ v, with "
        "weights = torch.exp(scores - new_max). After the loop, return out / row_sum.",
    ),
    solution_code="""\
class MyTiledAttention(TiledAttentionStart):
    def query_block(self, q, keys, values, q_start):
        b, num_heads, rows, _ = q.shape
        q_end = q_start + rows
        # (b, num_heads, rows, 1): each row's running maximum and sum
        row_max = q.new_full((b, num_heads, rows, 1), -torch.inf)
        row_sum = q.new_zeros((b, num_heads, rows, 1))
        out = torch.zeros_like(q)  # (b, num_heads, rows, head_dim)
        for k_start in range(0, q_end, self.block_size):
            k_end = min(k_start + self.block_size, q_end)
            # (b, num_heads, cols, head_dim)
            k = keys[:, :, k_start:k_end]
            v = values[:, :, k_start:k_end]
            # (b, num_heads, rows, cols)
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            if k_end > q_start + 1:  # the diagonal block
                future = self.mask[q_start:q_end, k_start:k_end]
                scores = scores.masked_fill(future, -torch.inf)
            block_max = scores.amax(-1, keepdim=True)
            new_max = torch.maximum(row_max, block_max)
            weights = torch.exp(scores - new_max)
            # 0 at the first block, where row_max is -inf
            factor = torch.exp(row_max - new_max)
            row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
            out = out * factor + self.dropout(weights) @ v
            row_max = new_max
        return out / row_sum  # (b, num_heads, rows, head_dim)


online_softmax.check(MyTiledAttention)
""",
)
