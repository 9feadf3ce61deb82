"""Chapter 7's catalogue, :data:`TABLE`: ``- names: message``, each name a fact of the run or a
mistake :func:`online` makes. A training output matching none fails only if the check's dropout
ran (a dropout of the reader's own drops other weights)."""

import re
from operator import attrgetter, methodcaller

import torch

from .core import Mistake
from .reference import Buggy
from .shortcuts import dropped

PER_BLOCK = ("softmax per block averaged", "softmax per block added")  # no running maximum


# fmt: off
def online(m, x, mistake="", training=False, stages=None):
    """The online softmax over ``m``'s layers on ``x``, or with ``mistake`` (a name in
    :data:`TABLE`) made; in ``training``, with the check's dropout. ``stages`` (a dict) gets
    the last query block's steps, named as :data:`.tiled_recorder.STEPS` names them."""
    stages = {} if stages is None else stages
    p = m.dropout.p if training or mistake == "dropout in eval" else 0.0
    place = mistake.removeprefix("drop ") if mistake.startswith("drop ") else "weights"

    def drop(t, *where):  # t, dropped if this mistake puts dropout at one of where
        return dropped(t, p) if place in where else t

    def bug(right, **wrong):  # what ``mistake`` (its words joined by _) makes of ``right``
        return wrong.get(mistake.replace(" ", "_"), right)

    queries, keys, values = (m.split_heads(f(x)) for f in (m.W_query, m.W_key, m.W_value))
    hd, size, num_tokens, contexts = m.head_dim, m.block_size, x.shape[1], []  # (b, H, T, hd)
    scale = bug(hd**0.5, scaled_by_sqrt_d_out=m.d_out**0.5, divided_by_head_dim=hd,
                not_scaled=1, scale_multiplied=hd**-0.5)
    for q_start in range(0, num_tokens, size):
        q = queries[:, :, q_start : q_start + size]  # (b, H, rows, hd)
        q_end = q_start + q.shape[2]
        row_max = q.new_full((*q.shape[:3], 1), bug(-torch.inf, row_max_from_zero=0.0))
        row_sum, out = torch.zeros_like(row_max), torch.zeros_like(q)  # (b, H, rows, 1), like q
        stop = bug(q_end, diagonal_skipped=q_start, range_one_short=q_end - 1,
                   future_blocks_unmasked=num_tokens)
        for k_start in range(0, stop, size):
            k_end = min(k_start + size - (mistake == "key blocks end early"), max(stop, q_end))
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]  # (b, H, cols, hd)
            v = bug(v, values_from_keys=k)
            s = drop(q @ k.mT / scale, "scores")  # (b, H, rows, cols)
            kp, qp = torch.arange(k_start, k_end), torch.arange(q_start, q_end)[:, None]
            local = kp - k_start > qp - q_start  # the diagonal block's mask, on any block
            hidden = bug(kp > qp, no_mask=kp < 0, diagonal_hidden=kp >= qp,
                         inverted_mask=(kp <= qp) & (k_start >= q_start),  # on the diagonal
                         inverted_on_every_block=kp <= qp, mask_at_the_origin=local,
                         mask_without_the_column_offset=kp - k_start > qp,
                         future_blocks_unmasked=(kp > qp) & (k_start <= q_start))
            masked = s.masked_fill(hidden, bug(-torch.inf, mask_fills_zero=0.0))
            stages["scores"] = stages["scores"] if k_start else (s, masked)  # the first block's
            s = drop(bug(masked, mask_after_exp=s), "masked scores")
            own = s.amax(-1, keepdim=True)
            new_max = bug(torch.maximum(row_max, own), own_block_maximum=own)
            w = torch.softmax(s, -1) if mistake in PER_BLOCK else torch.exp(s - new_max)
            w = bug(w, mask_after_exp=w.masked_fill(hidden, 0))
            f = torch.exp(row_max - new_max)  # 0 at the first block: its 1 / f is inf
            f = bug(f, factor_upside_down=torch.where(row_max == -torch.inf, 0.0, 1 / f),
                    own_block_maximum=1, softmax_per_block_averaged=1, softmax_per_block_added=1)
            kept = drop(drop(w, "weights", "sum", "twice"), "twice")  # out's weights
            summed = (kept if place == "sum" else w).sum(-1, keepdim=True)  # row_sum's
            block = drop(kept @ drop(v, "values"), "block output")  # (b, H, rows, hd)
            old, new = bug(f, rescaled_after_adding=1), bug(1, rescaled_after_adding=f)
            row_sum = (row_sum * bug(old, sum_not_rescaled=1, no_rescale=1) + summed) * new
            out = drop((out * bug(old, output_not_rescaled=1, no_rescale=1) + block) * new, "out")
            out = out / row_sum if mistake.startswith("divided in the loop") else out
            row_max = bug(new_max, row_max_never_updated=row_max)
            stages |= {"weights (mask, running maximum)": [w], "running sum": [row_sum]}
            stages["running output"] = [out]
        undivided = mistake in ("never divided", "divided in the loop", PER_BLOCK[1])
        context = drop(out if undivided else out / row_sum, "context")  # (b, H, rows, hd)
        stages["context out / row_sum"] = [context]
        laid_out = context.transpose(1, 2).reshape(context.shape)  # (b, rows, H, hd) as q's
        transposed = context.transpose(1, 2)  # (b, rows, H, hd)
        contexts.append(bug(context, wrong_layout=laid_out, context_transposed=transposed))
    joined = torch.cat(contexts, 2).transpose(1, 2)  # (b, T, H, hd), as the book's forward
    return m.out_proj(joined.reshape(x.shape[0], num_tokens, m.d_out))  # (b, T, d_out)


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
- softmax per block averaged | softmax per block added: Each key block has its own softmax:
  one softmax spans the row, so carry the running maximum and sum, and divide once at the end.
- wrong layout | context transposed: Your context is laid out (b, rows, num_heads, head_dim),
  transposed or reshaped: return it as q is, (b, num_heads, rows, head_dim).
- values from keys: Your weights multiply the keys' block: v is values[:, :, k_start:k_end].
- wrong: Your output is not MultiHeadAttention's on {c.num_tokens} tokens in blocks of {bs}, and no
  mistake this check knows explains it.{where}
- extra: Your output is right, but your code computed {computed} blocks of scores where a
  causal pass needs {causal}: compute each once, and skip key blocks all future.
- drop none: In training mode your output has no dropout: self.dropout(weights) @ v.
- drop sum: Your dropout reaches the running sum: drop only the weights going into out.
- drop twice: Your dropout is applied twice: once, to the weights going into out.
- drop values | drop block output | drop out | drop context: Your dropout drops single
  numbers of v or of an output: drop whole weights, self.dropout(weights) @ v.
- drop scores | drop masked scores: Your dropout is on the scores: drop the weights after exp.
- dropped_otherwise: Your output is right in eval mode, but in training mode its dropout is not
  MultiHeadAttention's: on every key block, drop once the weights going into out, and only those
  (not row_sum's, not the scores): self.dropout(weights) @ v.
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
