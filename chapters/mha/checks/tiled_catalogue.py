"""Chapter 7's catalogue: the online softmax, and every mistake its check knows, in order.

A mistake is a fact of a run (a property of :class:`.tiled_run.Run`) or a buggy reference: the
switches of :func:`online` it changes (none: the right output), compared with the eval-mode output
(the training-mode one for a ``drop`` switch). ``MISTAKES`` pairs each with the message the
reader sees. A training output that matches no mistake is accepted: the check's dropout
(``dropped``) keeps entries by their place in the tensor it is given, which a right answer
blocking the keys otherwise, or drawing its own mask, does not share.
"""

import torch

from .tiled_recorder import dropped


# fmt: off
def online(m, x, training=False, rescale_sum=True, rescale_out=True, factor="old - new",
           own_max=False, power=1, scale="sqrt head_dim", divide="end", mask="causal", shrink=0,
           stop=0, combine="online", drop="weights"):
    """The online softmax over ``m``'s layers on ``x``, or one catalogued way to get it wrong."""
    d = (lambda t: dropped(t, m.dropout.p)) if training and m.dropout.p else (lambda t: t)
    queries, keys, values = (m.split_heads(f(x)) for f in (m.W_query, m.W_key, m.W_value))
    size, contexts, hd = m.block_size, [], m.head_dim  # queries, ...: (b, H, T, hd)
    for q_start in range(0, x.shape[1], size):
        q = queries[:, :, q_start:q_start + size]  # (b, H, rows, hd)
        q_end, parts = q_start + q.shape[2], []
        row_max = q.new_full((*q.shape[:3], 1), -torch.inf)  # (b, H, rows, 1)
        row_sum, out = torch.zeros_like(row_max), torch.zeros_like(q)
        for k_start in range(0, q_end - stop, size):
            k_end = min(k_start + size - shrink, q_end)
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]  # (b, H, cols, hd)
            s = q @ k.mT / {"sqrt head_dim": hd**0.5, "sqrt d_out": m.d_out**0.5,
                            "head_dim": hd, "none": 1}[scale]  # (b, H, rows, cols)
            i, j = torch.arange(q_start, q_end)[:, None], torch.arange(k_start, k_end)
            s = d(s) if drop == "scores" else s
            s = s.masked_fill({"causal": j > i, "too": j >= i, "inverted": j <= i, "none": j < 0,
                               "whole": (j >= 0) & (k_end > q_start + 1), "origin": j - k_start >
                               i - q_start, "no column offset": j - k_start > i}[mask], -torch.inf)
            s = d(s) if drop == "masked scores" else s
            if combine != "online":  # each block normalised on its own
                parts.append(d(torch.softmax(s, -1)) @ v)
                continue
            new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
            new_max, first = s.amax(-1, keepdim=True) if own_max else new_max, row_max == -torch.inf
            w, f = torch.exp(s - new_max), 1.0 if own_max else {"old - new": torch.exp(row_max -
                new_max), "old / new": torch.where(first, 0.0, row_max / new_max), "new - old":
                torch.where(first, 0.0, torch.exp(new_max - row_max))}[factor]
            w_sum = (d(w) if drop == "sum" else w).sum(-1, keepdim=True)
            row_sum = row_sum * (f**power if rescale_sum else 1) + w_sum
            out = (d(out) if drop == "running output" else out) * (f if rescale_out else 1)
            v = d(v) if drop == "values" else v
            out = out + {"weights": d(w), "sum": d(w), "twice": d(d(w))}.get(drop, w) @ v
            out, row_max = out / row_sum if divide == "inside" else out, new_max
        end = out / row_sum if divide == "end" else out
        block = {"mean": sum(parts) / max(len(parts), 1), "sum": sum(parts)}.get(combine, end)
        contexts.append(d(block) if drop == "context" else block)
    return m.out_proj(torch.cat(contexts, 2).transpose(1, 2).flatten(2))  # (b, T, d_out)


TRAINED = ". Drop whole weights: out = out * factor + self.dropout(weights) @ v, row_sum undropped."
MISTAKES = (  # what a run shows, most specific first, and what the reader is told
    ("max_axes", "Your code takes a maximum over {max_axes} scores, not over the keys alone: a "
     "row's maximum runs over the last dimension, scores.amax(-1, keepdim=True)."),
    ("partial", "Your code is right on {divisible} tokens, but on {c.num_tokens} tokens, which "
     "blocks of {bs} do not divide, it goes wrong: reach the last, shorter key block."),
    ("block_kind", "Your query_block returned {block_kind}. Return a tensor shaped like q."),
    ("error", "Calling your class on an input raised {error_text}."),
    ("misshapen", "Your forward returned no tensor shaped like MultiHeadAttention's output."),
    ("wide", "{story}Your code holds scores for {r.widest} keys (or queries) at once, but a "
     "block has block_size={bs}: take keys block by block, carrying a running max, sum and out."),
    (dict(training=True), "In evaluation mode your output changes from call to call: dropout is "
     "on. Use self.dropout, which is off in evaluation mode."),
    ("factor_one", "Your factor is 1 at every block, even the first, where it must be 0: it is "
     "computed after row_max became new_max. Compute it first, then update row_max."),
    (dict(rescale_sum=False, rescale_out=False), "Neither the running sum nor the running output "
     "is rescaled when a block raises the maximum: multiply both by exp(old max - new max)."),
    (dict(rescale_sum=False), "The running output is rescaled, but the running sum is not: "
     "multiply it by exp(old max - new max) too."),
    (dict(rescale_out=False), "The running sum is rescaled, but the running output is not: "
     "multiply it by exp(old max - new max) too."),
    ("overflows", "Your output is right on small scores, but on scores in the hundreds it holds "
     "nan or inf: exp overflows above 88.7. Subtract the running maximum before exp."),
    (dict(stop=1), "For the queries {scoreless} your code computed no score at all: no key block "
     "was visited (nan). They need range(0, q_end, self.block_size), q_end = q_start + rows."),
    ("all_nan", "Every output is nan: at the first block row_max is -inf, row_sum and out are 0, "
     "and inf × 0 is nan. exp(row_max - new_max) is 0 there, at most 1 after."),
    (dict(factor="new - old"), "Your rescaling factor is upside down: exp(new max - old max) "
     "grows the old terms. A larger maximum shrinks them: exp(old - new), at most 1."),
    (dict(scale="sqrt d_out"), "Your scores are divided by √d_out = √{c.d_out}, the width of all "
     "heads. Each head's are scaled by √head_dim = √{head_dim}: self.head_dim**0.5."),
    (dict(scale="head_dim"), "Your scores are divided by head_dim = {head_dim}, not by its "
     "square root: self.head_dim**0.5."),
    (dict(divide="never"), "Your output is never divided by the running sum: its weights are "
     "unnormalised. After the last key block, return out / row_sum."),
    (dict(power=2), "Your running sum is rescaled by the factor squared; it moves to a new "
     "maximum as the output does: row_sum * factor."),
    (dict(factor="old / new"), "Your factor is the ratio of the maxima, old / new; exp(s - new) = "
     "exp(s - old) × exp(old - new): the factor is exp(old max - new max)."),
    (dict(own_max=True), "Each block's weights are relative to that block's own maximum, then "
     "added as if they shared one. Keep one running maximum and rescale what came before."),
    (dict(mask="none"), "Every query sees the keys after it inside its own block: the diagonal "
     "block needs the causal mask, self.mask[q_start:q_end, k_start:k_end]."),
    (dict(mask="whole"), "The whole diagonal block is masked (or skipped): a query never sees the "
     "keys of its own block, itself included. Mask only the keys after each query."),
    (dict(divide="inside"), "The output is divided by the running sum inside the loop, then "
     "added to unnormalised terms: divide once, after the last block."),
    (dict(mask="too"), "Your mask hides each query's own key as well as the later ones "
     "(diagonal=0): the first token sees nothing (nan)."),
    (dict(mask="origin"), "For queries {bs} to {end2}, keys 0 to {last}, you hide self.mask[0:{bs},"
     " 0:{bs}]: the mask sliced at the origin. Use self.mask[{bs}:{bs2}, 0:{bs}]."),
    (dict(mask="no column offset"), "For queries and keys {bs} to {end2}, you hide self.mask[{bs}:"
     "{bs2}, 0:{bs}]: without the column offset. Use self.mask[{bs}:{bs2}, {bs}:{bs2}]."),
    (dict(mask="inverted"), "For queries and keys 0 to {last}, you hide what ~self.mask[0:{bs}, 0:"
     "{bs}] marks: your mask is inverted. masked_fill hides where it is True: drop the ~."),
    (dict(shrink=1), "For queries 0 to {last}, your code gives no weight to key {last}: does a "
     "key block end early? k_end = min(k_start + self.block_size, q_end)."),
    (dict(combine="mean"), "Each key block a query sees gets the same share of its weight, 1/n: "
     "your blocks are normalised each on its own, then averaged. Carry one running sum."),
    (dict(combine="sum"), "Each key block a query sees gets the same share of its weight, 1: "
     "your blocks are normalised each on its own, then added. Carry one running sum."),
    ("has_nan", "Some outputs are nan. A row whose scores in a block are all -inf has a maximum "
     "of -inf, and exp(-inf + inf) is nan. Skip the key blocks entirely after the queries."),
    (dict(scale="none"), "The scores are not divided by √head_dim, as MultiHeadAttention "
     "divides them: scores = q @ k.transpose(2, 3) / self.head_dim**0.5."),
    ("wrong", "Your output has the right shape, not the right values (off by up to "
     "{gap:.3g}), and none of the usual mistakes explains it: check each step of the loop."),
    ("future", "Your output is right, but your code computed {computed} blocks of scores where "
     "a causal pass needs {causal} (of {blocks_n} × {blocks_n}): skip key blocks all future."),
    ("twice", "Your output is right, but your code computed {computed} blocks of scores where a "
     "causal pass needs {causal}: each one {times:g} times. Keep a running maximum instead."),
    *((dict(drop=kind), f"In training mode your {says}" + TRAINED) for kind, says in (
        ("none", "code applies no dropout"), ("values", "dropout drops single numbers of the "
         "values"), ("context", "dropout drops single numbers of an output"), ("running output",
         "dropout drops single numbers of an output, the running one"), ("twice", "code scales "
         "kept weights by 1 / (1 - p) twice: dropout is applied twice"), ("scores", "dropout "
         "acts on the scores"), ("masked scores", "dropout acts on the scores"), ("sum",
         "dropout reaches the running sum"))),
)
# fmt: on
