"""Chapter 7's exercise, ``query_block``: the online softmax over the key blocks a query needs."""

from collections import namedtuple

import torch

from ..starting import TiledAttentionStart
from ..tiled import TiledAttention
from .core import CheckResult, fill, first_mistake, never_raises
from .shortcuts import refusal
from .tiled_catalogue import CATALOGUE
from .tiled_recorder import Run

Config = namedtuple("Config", "d_in d_out context dropout heads block bias num_tokens gain seed")
#: Batches of 2; lengths a block divides (first) and not, below context_length, shorter than a
#: block, one token; biases; dropout (in eval mode too); scores in the hundreds (W_query × 250),
#: where exp overflows and a row's scores all lie below -100. head_dim is no block size nor d_in.
#: Nine tokens come before one: a last block of one query shows a loop that stops short of it.
CONFIGS = tuple(map(Config._make, (
    (6, 6, 12, 0.0, 2, 4, False, 12, 1, 1), (5, 9, 14, 0.0, 3, 4, True, 10, 1, 2),
    (4, 6, 8, 0.0, 1, 5, False, 3, 1, 3), (8, 12, 9, 0.25, 4, 4, False, 9, 1, 5),
    (4, 6, 8, 0.0, 2, 4, False, 1, 1, 4), (6, 6, 12, 0.0, 2, 4, False, 12, 250, 26))))  # fmt: skip
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
