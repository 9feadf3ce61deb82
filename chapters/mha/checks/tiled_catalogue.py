"""Chapter 7's catalogue, :data:`TABLE` (``- names: message``, each name a fact of the run or a
buggy reference); a training output that matches none passes: a right loop may drop others."""

import re
from operator import attrgetter, methodcaller

import torch

from .core import Mistake
from .reference import Buggy
from .shortcuts import dropped


def online(m, x, mistake="", training=False):
    """The online softmax over ``m``'s layers on ``x``, or with ``mistake`` (a buggy reference's
    name in :data:`TABLE`) made; in ``training``, with the check's dropout."""
    p = m.dropout.p if training or mistake == "dropout in eval" else 0.0
    place = mistake.removeprefix("drop ") if mistake.startswith("drop ") else "weights"

    def drop(t, *where):  # t, dropped if this mistake puts dropout at one of where
        return dropped(t, p) if place in where else t

    queries, keys, values = (m.split_heads(f(x)) for f in (m.W_query, m.W_key, m.W_value))
    hd, size, contexts = m.head_dim, m.block_size, []  # queries, ...: (b, H, T, hd)
    scale = {"scaled by sqrt d_out": m.d_out**0.5, "divided by head_dim": hd, "not scaled": 1}
    for q_start in range(0, x.shape[1], size):
        q = queries[:, :, q_start : q_start + size]  # (b, H, rows, hd)
        q_end = q_start + q.shape[2]
        row_max = q.new_full((*q.shape[:3], 1), -torch.inf)  # (b, H, rows, 1)
        row_sum, out = torch.zeros_like(row_max), torch.zeros_like(q)
        for k_start in range(0, q_end, size):
            k_end = min(k_start + size, q_end)
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]  # (b, H, cols, hd)
            s = drop(q @ k.mT / scale.get(mistake, hd**0.5), "scores")  # (b, H, rows, cols)
            hidden = torch.arange(k_start, k_end) > torch.arange(q_start, q_end)[:, None]
            s = drop(s.masked_fill(hidden, -torch.inf), "masked scores")
            own = s.amax(-1, keepdim=True)
            new_max = own if mistake == "own block maximum" else torch.maximum(row_max, own)
            w, first = torch.exp(s - new_max), row_max == -torch.inf
            f = {
                "own block maximum": 1.0,
                "factor upside down": torch.where(first, 0.0, torch.exp(new_max - row_max)),
                "ratio of the maxima": torch.where(first, 0.0, row_max / new_max),
            }.get(mistake, torch.exp(row_max - new_max))
            kept = drop(drop(w, "weights", "sum", "twice"), "twice")  # out's weights
            summed = kept if place == "sum" else w  # row_sum's
            row_sum = row_sum * (1 if mistake in ("sum not rescaled", "nothing rescaled") else f)
            row_sum = row_sum + summed.sum(-1, keepdim=True)
            out = drop(out, "running output")
            out = out * (1 if mistake in ("output not rescaled", "nothing rescaled") else f)
            out = out + kept @ drop(v, "values")
            row_max = new_max
        contexts.append(drop(out / row_sum, "context"))
    return m.out_proj(torch.cat(contexts, 2).transpose(1, 2).flatten(2))  # (b, T, d_out)


TABLE = """
- starting: Your query_block still raises NotImplementedError: this is the starting code, and
  the loop over key blocks is yours to write. What must each row of a query block remember
  from one key block to the next? online_softmax.hint(1) starts from there.
- book: Your code hands the work to the book's {book[0]}: write the loop yourself.
- torch_attention: Your code calls PyTorch's attention (scaled_dot_product_attention): write yours.
- max_axes: Your code takes a maximum over dimension {max_axes} of the scores, not over the keys
  alone: a row's maximum runs over the last dimension, scores.amax(-1, keepdim=True).
- error: Your class raised {error_text}, {when}.
- wide: Your code holds scores for {widest} keys (or queries) at once, but a block has
  block_size={bs}: take keys block by block, carrying a running max, sum and out.
- dropout in eval: Your dropout is on in evaluation mode, where self.dropout is off: use it.
- overflows: Your output is right on small scores, but on scores in the hundreds it holds nan
  or inf: exp overflows above 88.7. Subtract the running maximum before exp.
- nothing rescaled | sum not rescaled | output not rescaled | own block maximum | all_nan | factor
  upside down | ratio of the maxima: Keep one running maximum: rescale the running sum and output
  by exp(row_max - new_max), then update row_max. Yours is missing, upside down, a ratio of the
  maxima, or nan at the first block, where row_max is -inf (every output nan): it is 0, then <= 1.
- scaled by sqrt d_out | divided by head_dim | not scaled: Your scores are divided by √d_out,
  or by head_dim, not by its square root, or not divided by √head_dim at all: self.head_dim**0.5.
- wrong: Your output is not MultiHeadAttention's. Key blocks start in range(0, q_end,
  self.block_size), end at min(k_start + self.block_size, q_end). Mask the diagonal block with
  self.mask[q_start:q_end, k_start:k_end]: not sliced at the origin or without the column
  offset, nor so that it hides each query's own key (masked_fill hides where it is True). Divide
  by the running sum once, after the last key block: an output never divided by the running
  sum, or divided by it inside the loop, or key blocks normalised each on its own, then averaged
  (1/n each) or added, is wrong. If all that holds, none of the usual mistakes explains it.
- extra: Your output is right, but your code computed {computed} blocks of scores where a
  causal pass needs {causal}: compute each once, and skip key blocks all future.
- drop none | drop twice | drop values | drop context | drop running output | drop scores | drop
  masked scores | drop sum: In training mode your dropout is missing, applied twice, on single
  numbers of the values or of an output, on the scores, or in the running sum. Drop whole
  weights: out = out * factor + self.dropout(weights) @ v, row_sum undropped.
"""


def _entries(names, message):
    """An entry of :data:`TABLE` as :class:`.core.Mistake` and :class:`.catalogue.Buggy` items."""
    message = " ".join(message.split())  # the table's line breaks are not the reader's
    for name in " ".join(names.split()).split(" | "):
        if name.isidentifier():
            yield Mistake(name, message, attrgetter(name))
        else:
            yield Buggy(name, message, methodcaller("reference", name))


CATALOGUE = tuple(
    entry
    for names, message in re.findall(r"^- (.+?): (.+?)(?=^- |\Z)", TABLE, re.M | re.S)
    for entry in _entries(names, message)
)
