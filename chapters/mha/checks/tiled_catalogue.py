"""Chapter 7's catalogue, :data:`TABLE`, ``- names: message``. A training output matching none
fails only if the check's dropout ran (a dropout of the reader's own drops other weights)."""

import re
from operator import attrgetter, methodcaller

from .catalogue import Buggy
from .core import Mistake

# fmt: off
TABLE = """
- starting: Your query_block still raises NotImplementedError: this is the starting code, and
  the loop over key blocks is yours to write. What must each row of a query block remember
  from one key block to the next? online_softmax.hint(1) starts from there.
- book: Your code hands the work to the book's {book[0]}: write the loop yourself.
- torch_attention: Your code calls PyTorch's attention (scaled_dot_product_attention): write yours.
- max_axes: Your maximum runs over dimension {max_axes} of the scores, not the keys': amax(-1).
- keepdim: Your class raised {error_text}: a row's maximum or sum lost its last axis: keepdim=True.
- partial: Your class raised {error_text} on {c.num_tokens} tokens in blocks of {bs}: the last query
  block has fewer rows, and the last key block ends at q_end (min(k_start + block_size, q_end)).
- error: Your class raised {error_text}, {when}, on {c.num_tokens} tokens in blocks of {bs}.
- wide: Your code holds a score matrix wider than a block: {widest} keys (or queries), not {bs}.
- dropout in eval: Your dropout is on in evaluation mode, where self.dropout is off: use it.
- row_max from zero: Your row_max starts at 0: scores all below -100 give exp(score) = 0, and 0 / 0.
- mask after exp: Your mask zeroes weights after exp, so later keys still set row_max, and on
  large scores every visible weight underflows to 0: mask the scores, with -inf.
- overflows: On scores in the hundreds your output holds nan or inf: exp overflows above 88.7.
  Subtract the running maximum, max(row_max, the block's), before exp; the factor is then <= 1.
- all_nan: Every number is nan: a -inf met an operation that makes nan. At the first key block
  row_max is -inf: the factor exp(row_max - new_max) is then 0, the weights exp(scores - new_max)
  (not - row_max); and a mask times -inf gives 0 · -inf = nan: use masked_fill.
- own block maximum: Each key block is taken relative to its own maximum: keep a running one.
- factor upside down: Your factor is exp(new_max - row_max), upside down: exp(row_max - new_max).
- no rescale: Your running sum and output are never rescaled when the maximum grows.
- sum not rescaled: Your running sum is not rescaled when the maximum grows, only the output.
- output not rescaled: Your running output is not rescaled when the maximum grows, only the sum.
- rescaled after adding: Your factor multiplies the new block too: rescale the old sums only.
- scaled by sqrt d_out: Your scores are divided by √d_out: divide by self.head_dim**0.5.
- divided by head_dim: Your scores are divided by head_dim, not by its square root.
- not scaled: Your scores are not divided by √head_dim: self.head_dim**0.5.
- scale multiplied: Your scores are multiplied by √head_dim: divide by it.
- no mask: Your diagonal block is not masked: a query sees the later keys of its block.
- mask fills zero: Your mask fills hidden scores with 0, which exp makes a weight: fill -torch.inf.
- diagonal hidden: Your mask hides each query's own key too: it hides only later keys.
- inverted mask | inverted on every block: Your mask is inverted: hide where self.mask is True.
- mask at the origin: Your mask is sliced at the origin: self.mask[q_start:q_end, k_start:k_end].
- mask without the column offset: Your mask slice has no column offset: [..., k_start:k_end].
- future blocks unmasked: Your loop visits key blocks after the diagonal, unmasked: stop at q_end.
- diagonal skipped | range one short: Your key blocks stop before the diagonal, which holds each
  query's own key: range(0, q_end, self.block_size).
- key blocks end early: Your key blocks end one key early: min(k_start + block_size, q_end).
- few: Your loop computes {computed} blocks of scores where a causal pass needs {causal}: visit
  every key block from the first up to the diagonal one, range(0, q_end, self.block_size).
- row_max never updated: Your row_max stays -inf: set row_max = new_max after each key block.
- never divided | divided in the loop | divided in the loop and at the end: Divide by the running
  sum once, after the last key block: yours is never divided, or divided inside the loop.
- softmax per block averaged | softmax per block added | normalised per block: Each key block
  has its own softmax, its weights divided by its own sum: one softmax spans the row, so carry
  the running maximum and sum, and divide once at the end.
- wrong layout | context transposed: Your context is laid out (b, rows, num_heads, head_dim),
  transposed or reshaped: return it as q is, (b, num_heads, rows, head_dim).
- keys of head 0: Every head scores head 0's keys and values: keys[:, :, k_start:k_end] keeps
  each head's own.
- row_sum over the queries: Your running sum adds a block's weights over its queries (dim=-2):
  a row's sum runs over the keys, weights.sum(-1, keepdim=True).
- values from keys: Your weights multiply the keys' block: v is values[:, :, k_start:k_end].
- wrong: Your output is not MultiHeadAttention's on {c.num_tokens} tokens in blocks of {bs}, and no
  mistake this check knows explains it.{where}
- extra: Your output is right, but your code computed {computed} blocks of scores where a
  causal pass needs {causal}: compute each once, and skip key blocks all future.
- drop none: In training mode your output has no dropout: self.dropout(weights) @ v.
- drop sum: Your dropout reaches the running sum: drop only the weights going into out.
- drop twice: Your dropout is applied twice: once, to the weights going into out.
- drop kept by chance p: Your dropout keeps a weight with chance p, not 1 - p: keep where
  rand >= p.
- drop values | drop block output | drop out | drop context: Your dropout drops single
  numbers of v or of an output: drop whole weights, self.dropout(weights) @ v.
- drop scores | drop masked scores: Your dropout is on the scores: drop the weights after exp.
- dropped_otherwise: Your output is right in eval mode, but in training mode its dropout is not
  MultiHeadAttention's: on every key block, drop once the weights going into out, and only those
  (not row_sum's, not the scores): self.dropout(weights) @ v.
- reseeded: In training mode two calls gave the same output: do not reseed, dropout draws anew.
"""
# fmt: on


CATALOGUE = tuple(  # a name that is an identifier is a fact of the run, any other a mistake
    Mistake(name, message, attrgetter(name))
    if name.isidentifier()
    else Buggy(name, message, methodcaller("reference", name))
    for names, text in re.findall(r"^- (.+?): (.+?)(?=^- |\Z)", TABLE, re.M | re.S)
    for message in [" ".join(text.split())]  # the table's line breaks are not the reader's
    for name in " ".join(names.split()).split(" | ")
)
