"""Chapter 7's catalogue: every mistake its check knows, and what the reader is told.

:data:`TABLE` lists them most specific first, as ``- name: message``. A name that is an
identifier is a fact of the run (a property of :class:`.tiled_run.Run`): a :class:`.core.Mistake`.
Any other name is a buggy reference, :func:`.tiled_reference.online` with that mistake made (a
:class:`.catalogue.Buggy`), compared with the output in eval mode and, where the configuration
has dropout, in training mode too. A training output that matches no mistake is accepted: the
check's dropout keeps entries by their place in the tensor it is given, which a right answer
blocking the keys otherwise, or drawing its own mask, does not share.
"""

import re
from operator import attrgetter

from .catalogue import Buggy
from .core import Mistake

TABLE = """
- built_wrong: Building your class raised {error_text}: keep the starting constructor.
- starting: Your query_block still raises NotImplementedError: this is the starting code, and
  the loop over key blocks is yours to write. What must each row of a query block remember
  from one key block to the next? online_softmax.hint(1) starts from there.
- book: Your code hands the work to the book's {book[0]}: write the loop yourself.
- torch_attention: Your code calls PyTorch's own attention (scaled_dot_product_attention or
  nn.MultiheadAttention), which does the online softmax for you: write it yourself.
- max_axes: Your code takes a maximum over {max_axes} scores, not over the keys alone: a row's
  maximum runs over the last dimension, scores.amax(-1, keepdim=True).
- partial: Your code is right on {divisible} tokens, but on {c.num_tokens} tokens, which blocks
  of {bs} do not divide, it goes wrong: reach the last, shorter key block.
- block_kind: Your query_block returned {block_kind}. Return a tensor shaped like q.
- error: Calling your class on an input raised {error_text}.
- misshapen: Your forward returned no tensor shaped like MultiHeadAttention's output.
- wide: {story}Your code holds scores for {widest} keys (or queries) at once, but a block has
  block_size={bs}: take keys block by block, carrying a running max, sum and out.
- dropout in eval: In evaluation mode your output changes from call to call: dropout is on.
  Use self.dropout, which is off in evaluation mode.
- factor_one: Your factor is 1 at every block, even the first, where it must be 0: it is
  computed after row_max became new_max. Compute it first, then update row_max.
- nothing rescaled: Neither the running sum nor the running output is rescaled when a block
  raises the maximum: multiply both by exp(old max - new max).
- sum not rescaled: The running output is rescaled, but the running sum is not: multiply it by
  exp(old max - new max) too.
- output not rescaled: The running sum is rescaled, but the running output is not: multiply it
  by exp(old max - new max) too.
- overflows: Your output is right on small scores, but on scores in the hundreds it holds nan
  or inf: exp overflows above 88.7. Subtract the running maximum before exp.
- scoreless: For the queries {scoreless} your code computed no score at all: no key block
  was visited (nan). They need range(0, q_end, self.block_size), q_end = q_start + rows.
- all_nan: Every output is nan: at the first block row_max is -inf, row_sum and out are 0, and
  inf × 0 is nan. exp(row_max - new_max) is 0 there, at most 1 after.
- factor upside down: Your rescaling factor is upside down: exp(new max - old max) grows the
  old terms. A larger maximum shrinks them: exp(old - new), at most 1.
- scaled by sqrt d_out: Your scores are divided by √d_out = √{c.d_out}, the width of all heads.
  Each head's are scaled by √head_dim = √{hd}: self.head_dim**0.5.
- divided by head_dim: Your scores are divided by head_dim = {hd}, not by its square root:
  self.head_dim**0.5.
- never divided: Your output is never divided by the running sum: its weights are
  unnormalised. After the last key block, return out / row_sum.
- sum rescaled by factor squared: Your running sum is rescaled by the factor squared; it moves
  to a new maximum as the output does: row_sum * factor.
- ratio of the maxima: Your factor is the ratio of the maxima, old / new; exp(s - new) =
  exp(s - old) × exp(old - new): the factor is exp(old max - new max).
- own block maximum: Each block's weights are relative to that block's own maximum, then added
  as if they shared one. Keep one running maximum and rescale what came before.
- no mask: Every query sees the keys after it inside its own block: the diagonal block needs
  the causal mask, self.mask[q_start:q_end, k_start:k_end].
- whole diagonal masked: The whole diagonal block is masked (or skipped): a query never sees
  the keys of its own block, itself included. Mask only the keys after each query.
- divided inside the loop: The output is divided by the running sum inside the loop, then
  added to unnormalised terms: divide once, after the last block.
- diagonal masked too: Your mask hides each query's own key as well as the later ones
  (diagonal=0): the first token sees nothing (nan).
- mask at the origin: For queries {bs} to {end2}, keys 0 to {last}, you hide
  self.mask[0:{bs}, 0:{bs}]: the mask sliced at the origin. Use self.mask[{bs}:{bs2}, 0:{bs}].
- mask without column offset: For queries and keys {bs} to {end2}, you hide
  self.mask[{bs}:{bs2}, 0:{bs}]: without the column offset. Use
  self.mask[{bs}:{bs2}, {bs}:{bs2}].
- inverted mask: For queries and keys 0 to {last}, you hide what ~self.mask[0:{bs}, 0:{bs}]
  marks: your mask is inverted. masked_fill hides where it is True: drop the ~.
- key block ends early: For queries 0 to {last}, your code gives no weight to key {last}: does
  a key block end early? k_end = min(k_start + self.block_size, q_end).
- blocks averaged: Each key block a query sees gets the same share of its weight, 1/n: your
  blocks are normalised each on its own, then averaged. Carry one running sum.
- blocks added: Each key block a query sees gets the same share of its weight, 1: your blocks
  are normalised each on its own, then added. Carry one running sum.
- has_nan: Some outputs are nan. A row whose scores in a block are all -inf has a maximum of
  -inf, and exp(-inf + inf) is nan. Skip the key blocks entirely after the queries.
- not scaled: The scores are not divided by √head_dim, as MultiHeadAttention divides them:
  scores = q @ k.transpose(2, 3) / self.head_dim**0.5.
- wrong: Your output has the right shape, not the right values (off by up to {gap:.3g}), and
  none of the usual mistakes explains it: check each step of the loop.
- future: Your output is right, but your code computed {computed} blocks of scores where a
  causal pass needs {causal} (of {blocks_n} × {blocks_n}): skip key blocks all future.
- twice: Your output is right, but your code computed {computed} blocks of scores where a
  causal pass needs {causal}: each one {times:g} times. Keep a running maximum instead.
- drop none: In training mode your code applies no dropout
- drop values: In training mode your dropout drops single numbers of the values
- drop context: In training mode your dropout drops single numbers of an output
- drop running output: In training mode your dropout drops single numbers of an output, the
  running one
- drop twice: In training mode your code scales kept weights by 1 / (1 - p) twice: dropout is
  applied twice
- drop scores: In training mode your dropout acts on the scores
- drop masked scores: In training mode your dropout acts on the scores
- drop sum: In training mode your dropout reaches the running sum
"""
#: After each dropout mistake's message; after every message but the first two, the run's call.
TRAINED = ". Drop whole weights: out = out * factor + self.dropout(weights) @ v, row_sum undropped."
SEEN = "\n(Seen with {call}.)"


def _entry(name, message):
    """An entry of :data:`TABLE` as a :class:`.core.Mistake` or a :class:`.catalogue.Buggy`."""
    message = " ".join(message.split())  # the table's line breaks are not the reader's
    message += TRAINED if name.startswith("drop ") else ""
    message += "" if name in ("built_wrong", "starting") else SEEN
    if name.isidentifier():
        return Mistake(name, message, attrgetter(name))
    return Buggy(name, message, lambda run: run.reference(name))


CATALOGUE = tuple(_entry(*e) for e in re.findall(r"^- (.+?): (.+?)(?=^- |\Z)", TABLE, re.M | re.S))
