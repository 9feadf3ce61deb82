"""Chapter 7's exercise, ``query_block``: the online softmax over the key blocks a query needs."""

import inspect
import textwrap
from collections import namedtuple

import torch

from ..starting import TiledAttentionStart
from ..tiled import TiledAttention
from .core import CheckResult, Exercise, fill, first_mistake, never_raises
from .shortcuts import refusal
from .tiled_catalogue import CATALOGUE
from .tiled_recorder import Run

Config = namedtuple("Config", "d_in d_out context dropout heads block bias num_tokens gain seed")
#: Batches of 2; lengths a block divides (first) and not, below context_length, shorter than a
#: block, one token; biases; dropout (in eval mode too); scores in the hundreds (W_query × 250),
#: where exp overflows and a row's scores all lie below -100. head_dim is no block size nor d_in.
#: Nine tokens come before one: a last block of one query shows a loop that stops short of it.
CONFIGS = (
    Config(6, 6, 12, 0.0, 2, 4, False, 12, 1, 1),
    Config(5, 9, 14, 0.0, 3, 4, True, 10, 1, 2),
    Config(4, 6, 8, 0.0, 1, 5, False, 3, 1, 3),
    Config(8, 12, 9, 0.5, 4, 4, False, 9, 1, 5),
    Config(4, 6, 8, 0.0, 2, 4, False, 1, 1, 4),
    Config(6, 6, 12, 0.0, 2, 4, False, 12, 250, 26),
)
#: The book's own loop, as the reader's class (its source: one copy, the one the tests run).
LOOP = textwrap.indent(textwrap.dedent(inspect.getsource(TiledAttention.query_block)), "    ")
CALL = "online_softmax.check(MyTiledAttention)"
SOLUTION = f"class MyTiledAttention(TiledAttentionStart):\n{LOOP}\n\n{CALL}"
PRAISE = "Your loop matches MultiHeadAttention in all 6 configurations, in eval and training mode."
WRITE = "Subclass TiledAttentionStart and write query_block there, the loop over key blocks."


@never_raises
def check_online_softmax(cls):
    """The first mistake of :data:`.tiled_catalogue.CATALOGUE` that a run of ``cls`` shows. A
    query_block of its own runs on the book's TiledAttention too: its forward is the start's."""
    tiled = isinstance(cls, type) and issubclass(cls, TiledAttention)
    start = TiledAttention if tiled else TiledAttentionStart
    problem = refusal(cls, start, own=True, inherited="", method="query_block")
    if tiled and cls.query_block is TiledAttention.query_block:  # nothing of the reader's yet
        yet = "it is the book's own class" if cls is TiledAttention else "yours is not written yet"
        problem = f"{cls.__name__} runs the book's query_block: {yet}. {WRITE}"
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        for run in (Run(cls, c) for c in CONFIGS if not problem):
            mistake = first_mistake(CATALOGUE, run)
            problem = mistake and fill(mistake.message, run)
    return CheckResult(not problem, problem or PRAISE)


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
