"""Chapter 7's check, on one table of answers: right ones in several styles (block orders, layouts
of the scores, log-sum-exp, a normalised running output) are accepted; each catalogued mistake,
the starting code and each shortcut (the book's code, PyTorch's attention, a whole row of scores)
is named."""

import pytest
import torch
import torch.nn.functional as F

from mha import MultiHeadAttention, TiledAttention
from mha.checks.reference import same
from mha.checks.shortcuts import Watch
from mha.checks.tiled import CONFIGS, online_softmax
from mha.checks.tiled_catalogue import CATALOGUE, online
from mha.starting import TiledAttentionStart

NEG = -torch.inf


def state(q):
    b, h, rows, _ = q.shape
    return q.new_full((b, h, rows, 1), NEG), q.new_zeros((b, h, rows, 1)), torch.zeros_like(q)


def blocks(self, q, keys, values, q_start, *, skip=True, order=1):
    """(k, v, mask or None) per key block, the diagonal's mask at its position."""
    q_end = q_start + q.shape[2]
    end = q_end if skip else keys.shape[2]
    for k_start in list(range(0, end, self.block_size))[::order]:
        k_end = min(k_start + self.block_size, end)
        mask = self.mask[q_start:q_end, k_start:k_end] if k_end > q_start + 1 else None
        yield keys[:, :, k_start:k_end], values[:, :, k_start:k_end], mask


def styled(function):
    return type("MyTiledAttention", (TiledAttentionStart,), {"query_block": function})


def rescaling_factor(kind, old, new):
    """The factor that moves the running state from the old maximum to the new, right or wrong."""
    first = old == NEG  # "first block sets it": the state starts from the first block
    return {
        "old - new": lambda: torch.exp(old - new),
        "new - old": lambda: torch.exp(new - old),
        "new - old, first block sets it": lambda: torch.where(first, 0.0, torch.exp(new - old)),
        "old / new": lambda: old / new,
        "old / new, first block sets it": lambda: torch.where(first, 0.0, old / new),
    }[kind]()


def make(rescale_sum=True, rescale_out=True, factor="old - new", diagonal="mask", divide="end",
         skip=True, order=1, divisor="sqrt head_dim", dropout="weights", divisible_only=False,
         sum_power=1):  # fmt: skip
    """A query_block with one deliberate mistake (or none). dropout: "weights" (right), "both"
    (weights and sum), "always", "none", "values", "context", "running output", "twice",
    "functional", "torch.dropout" and "bernoulli" (right)."""

    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        scale = {"sqrt head_dim": self.head_dim**0.5, "sqrt d_out": self.d_out**0.5}
        scale |= {"head_dim": self.head_dim, "none": 1.0}
        if divisible_only:  # drops the partial last block
            keys = keys[:, :, : keys.shape[2] // self.block_size * self.block_size]
        for k, v, mask in blocks(self, q, keys, values, q_start, skip=skip, order=order):
            scores = q @ k.transpose(2, 3) / scale[divisor]
            if mask is not None and diagonal == "mask":
                scores = scores.masked_fill(mask, NEG)
            elif mask is not None and diagonal == "whole":
                scores = torch.full_like(scores, NEG)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)
            f = rescaling_factor(factor, row_max, new_max)
            dropped = self.dropout(weights) if dropout in ("weights", "both") else weights
            if dropout == "twice":
                dropped = self.dropout(self.dropout(weights))
            summed = dropped if dropout == "both" else weights
            if dropout in ("always", "functional"):
                training = self.training if dropout == "functional" else True
                dropped = F.dropout(weights, self.dropout.p, training=training)
            if dropout == "bernoulli" and self.training:  # dropout written by hand
                keep = torch.bernoulli(torch.full_like(weights, 1 - self.dropout.p))
                dropped = weights * keep / (1 - self.dropout.p)
            if dropout == "torch.dropout":
                dropped = torch.dropout(weights, self.dropout.p, self.training)
            if dropout == "values":
                v = self.dropout(v)
            row_sum = (row_sum * f**sum_power if rescale_sum else row_sum) + summed.sum(-1, True)
            if dropout == "running output":
                out = self.dropout(out)
            out = (out * f if rescale_out else out) + dropped @ v
            if divide == "inside":
                out = out / row_sum
            row_max = new_max
        context = out / row_sum if divide == "end" else out
        return self.dropout(context) if dropout == "context" else context

    return styled(query_block)


SOLUTION = online_softmax.solution_text.replace("online_softmax.check(MyTiledAttention)", "")
ON_THE_DIAGONAL = """\
            if k_end > q_start + 1:  # the diagonal block
                future = self.mask[q_start:q_end, k_start:k_end]
                scores = scores.masked_fill(future, -torch.inf)
"""
ON_EVERY_BLOCK = """\
            future = self.mask[q_start:q_end, k_start:k_end]
            scores = scores.masked_fill(future, -torch.inf)
"""


def learner(*slips):
    """The solution as a learner writes it, the mask applied to every key block it visits (an
    earlier block's slice is all False), with slips: (text, what the learner wrote instead)."""
    code = SOLUTION.replace(ON_THE_DIAGONAL, ON_EVERY_BLOCK)
    for text, slip in slips:
        assert text in code, text
        code = code.replace(text, slip)
    namespace = {"TiledAttentionStart": TiledAttentionStart, "torch": torch}
    exec(code, namespace)
    return namespace["MyTiledAttention"]


MASK = "self.mask[q_start:q_end, k_start:k_end]"
KEY_RANGE, KEY_END = "range(0, q_end, self.block_size)", "min(k_start + self.block_size, q_end)"
NEW_MAX, WEIGHTS = "new_max = torch.maximum(row_max, block_max)", "torch.exp(scores - new_max)"
FACTOR = "torch.exp(row_max - new_max)"


def per_block_softmax(combine):
    """Each key block normalised on its own, a softmax per block, then combined (mean or sum)."""

    def query_block(self, q, keys, values, q_start):
        parts = []
        for k, v, mask in blocks(self, q, keys, values, q_start):
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            scores = scores if mask is None else scores.masked_fill(mask, NEG)
            parts.append(self.dropout(torch.softmax(scores, -1)) @ v)
        return combine(torch.stack(parts))

    return styled(query_block)


# ----------------------------------------------------------------------------------------------
# Answers in their own style, right or wrong
# ----------------------------------------------------------------------------------------------


def normalised_as_it_goes(self, q, keys, values, q_start):
    """Keeps out normalised: the old output is reweighted by the share of the old sum."""
    row_max, row_sum, out = state(q)
    for k, v, mask in blocks(self, q, keys, values, q_start):
        scores = q @ k.transpose(-1, -2) * self.head_dim**-0.5
        if mask is not None:
            scores = scores.masked_fill(mask, NEG)
        new_max = torch.max(row_max, scores.max(dim=-1, keepdim=True).values)
        weights = (scores - new_max).exp()
        old = row_sum * (row_max - new_max).exp()
        row_sum = old + weights.sum(-1, keepdim=True)
        out = out * (old / row_sum) + self.dropout(weights) @ v / row_sum
        row_max = new_max
    return out


def log_sum_exp(self, q, keys, values, q_start):
    """Per-block softmax merged through each block's log-sum-exp, with einsum."""
    lse = out = None
    for k, v, mask in blocks(self, q, keys, values, q_start):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / self.head_dim**0.5
        if mask is not None:
            scores = torch.where(mask, NEG, scores)
        block_lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        block_out = self.dropout(torch.exp(scores - block_lse)) @ v
        if lse is None:
            lse, out = block_lse, block_out
        else:
            new_lse = torch.logaddexp(lse, block_lse)
            out = out * torch.exp(lse - new_lse) + block_out * torch.exp(block_lse - new_lse)
            lse = new_lse
    return out


def key_blocks(size_of, order=1):
    """Keys transposed once (a copy, head_dim rows), sliced in key blocks of size_of(block_size)
    and visited in ``order`` (-1: the diagonal block first), masked by positions from arange, the
    scores scaled in q. Key blocks one narrower than the query blocks (odd where block_size is
    even) let dropout see its blocks at other offsets than the book's."""

    def query_block(self, q, keys, values, q_start):
        keys_t = keys.transpose(2, 3).contiguous()  # (b, num_heads, head_dim, num_tokens)
        q = q / self.head_dim**0.5
        row_max, row_sum, out = state(q)
        q_end, size = q_start + q.shape[2], size_of(self.block_size)
        for k_start in list(range(0, q_end, size))[::order]:
            k_end = min(k_start + size, q_end)
            scores = q @ keys_t[..., k_start:k_end]
            later = torch.arange(k_start, k_end)[None, :] > torch.arange(q_start, q_end)[:, None]
            scores = scores.masked_fill(later, NEG)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)
            factor = torch.exp(row_max - new_max)
            row_sum = factor * row_sum + weights.sum(-1, keepdim=True)
            out = factor * out + self.dropout(weights) @ values[:, :, k_start:k_end]
            row_max = new_max
        return out / row_sum

    return styled(query_block)


def log_sum_exp_rows(self, q, keys, values, q_start):
    """A while loop, a (b, heads, rows) log-sum-exp, positions from arange, einsum."""
    q_end = q_start + q.shape[2]
    lse = torch.full(q.shape[:-1], float("-inf"))  # (b, num_heads, rows)
    acc = torch.zeros_like(q)
    q_pos = torch.arange(q_start, q_end)[:, None]
    k_start = 0
    while k_start < q_end:
        k_end = min(k_start + self.block_size, q_end)
        k = keys[:, :, k_start:k_end]
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.head_dim**-0.5
        s = torch.where(torch.arange(k_start, k_end)[None, :] > q_pos, float("-inf"), s)
        new = torch.logaddexp(lse, torch.logsumexp(s, -1))
        weights = torch.exp(s - new[..., None])
        acc = acc * torch.exp(lse - new)[..., None]
        acc = acc + self.dropout(weights) @ values[:, :, k_start:k_end]
        lse, k_start = new, k_end
    return acc


def product(q, k):
    return q @ k.transpose(2, 3)  # (b, num_heads, rows, cols)


def per_head(q, k):
    """One (batch, head) at a time, in 2-D."""
    b, h = q.shape[:2]
    return torch.stack([torch.stack([q[i, j] @ k[i, j].T for j in range(h)]) for i in range(b)])


def elementwise(q, k):
    return (q.unsqueeze(3) * k.unsqueeze(2)).sum(-1)  # (b, num_heads, rows, cols)


def elementwise_trailing(q, k):
    """The same, through a trailing size-1 axis."""
    return (q[:, :, :, None, :, None] * k[:, :, None, :, :, None]).sum((-2, -1))


def laid_out(scores_of, every_block=False):
    """The online softmax with scores computed by ``scores_of``; with ``every_block``, it visits
    every key block and masks each one fully where it lies after the queries."""

    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        q_end = q_start + q.shape[2]
        end = keys.shape[2] if every_block else q_end
        for k_start in range(0, end, self.block_size):
            k_end = min(k_start + self.block_size, end)
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]
            scores = scores_of(q, k) / self.head_dim**0.5
            later = torch.arange(k_start, k_end)[None, :] > torch.arange(q_start, q_end)[:, None]
            scores = scores.masked_fill(later, NEG)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.nan_to_num(torch.exp(scores - new_max))
            factor = torch.nan_to_num(torch.exp(row_max - new_max))
            row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
            out = out * factor + self.dropout(weights) @ v
            row_max = torch.maximum(row_max, new_max)
        return out / row_sum

    return styled(query_block)


def full_row(self, q, keys, values, q_start):
    """No tiling: the whole row of scores at once."""
    q_end = q_start + q.shape[2]
    scores = q @ keys[:, :, :q_end].transpose(2, 3) / self.head_dim**0.5
    scores = scores.masked_fill(self.mask[q_start:q_end, :q_end], NEG)
    return self.dropout(torch.softmax(scores, -1)) @ values[:, :, :q_end]


def whole_row_per_head(self, q, keys, values, q_start):
    """A whole row of scores per (batch, head), in 2-D, with one softmax."""
    q_end = q_start + q.shape[2]
    scores = per_head(q, keys[:, :, :q_end]) / self.head_dim**0.5
    scores = scores.masked_fill(self.mask[q_start:q_end, :q_end], NEG)
    return self.dropout(torch.softmax(scores, -1)) @ values[:, :, :q_end]


def blocks_joined(by_hand):
    """Scores block by block, then torch.cat into a row and a softmax over it (by hand: a
    softmax written out, then blockwise products)."""

    def query_block(self, q, keys, values, q_start):
        q_end, parts = q_start + q.shape[2], []
        for k, _, mask in blocks(self, q, keys, values, q_start):
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            parts.append(scores if mask is None else scores.masked_fill(mask, NEG))
        if not by_hand:
            return self.dropout(torch.softmax(torch.cat(parts, -1), -1)) @ values[:, :, :q_end]
        row = torch.cat(parts, -1)
        weights = torch.exp(row - row.amax(-1, keepdim=True))
        weights = weights / weights.sum(-1, keepdim=True)
        out = 0
        for i, (_, v, _) in enumerate(blocks(self, q, keys, values, q_start)):
            start = i * self.block_size
            out = out + self.dropout(weights[..., start : start + v.shape[2]]) @ v
        return out

    return styled(query_block)


def two_passes(first_pass=product):
    """Exact: the maximum in a first pass (scores by ``first_pass``), the sum and output in a
    second, with no online rescale."""

    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        for k, _, mask in blocks(self, q, keys, values, q_start):
            scores = first_pass(q, k) / self.head_dim**0.5
            scores = scores if mask is None else scores.masked_fill(mask, NEG)
            row_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        for k, v, mask in blocks(self, q, keys, values, q_start):
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            scores = scores if mask is None else scores.masked_fill(mask, NEG)
            weights = torch.exp(scores - row_max)
            row_sum = row_sum + weights.sum(-1, keepdim=True)
            out = out + self.dropout(weights) @ v
        return out / row_sum

    return styled(query_block)


def dropped_scores(before_mask):
    def query_block(self, q, keys, values, q_start):
        row_max, row_sum, out = state(q)
        for k, v, mask in blocks(self, q, keys, values, q_start):
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            scores = self.dropout(scores) if before_mask else scores
            if mask is not None:
                scores = scores.masked_fill(mask, NEG)
            scores = scores if before_mask else self.dropout(scores)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)
            factor = torch.exp(row_max - new_max)
            row_sum = row_sum * factor + weights.sum(-1, keepdim=True)
            out = out * factor + weights @ v
            row_max = new_max
        return out / row_sum

    return styled(query_block)


def fused_per_block(self, q, keys, values, q_start):
    q_end = q_start + q.shape[2]
    mask = ~self.mask[q_start:q_end, :q_end]
    return F.scaled_dot_product_attention(q, keys[:, :, :q_end], values[:, :, :q_end], mask)


def borrowed(self, q, keys, values, q_start):
    return TiledAttention.query_block(self, q, keys, values, q_start)


def the_books_forward(self, x):
    return MultiHeadAttention.forward(self, x)


def starting_code(self, q, keys, values, q_start):
    b, num_heads, rows, _ = q.shape
    raise NotImplementedError("write the loop over key blocks")


def raises(self, q, keys, values, q_start):
    raise KeyError("boom")


def raises_in_training(self, q, keys, values, q_start):
    """Right in eval mode; in training mode, a slip that only that mode runs raises."""
    context = make().query_block(self, q, keys, values, q_start)
    if self.training:
        context = context * self.dropout(torch.ones(q.shape[2] + 1))  # shapes that do not match
    return context


def mine(*bases, **methods):
    return type("Mine", bases, methods)


RIGHT = "matches MultiHeadAttention in all 6 configurations"
BLOCKS = "blocks of scores where a causal pass needs"
#: The fallback, which names the key range, the mask and the division (their rows), and what no
#: entry explains.
UNKNOWN = "none of the usual mistakes"


def ok(name, answer):
    return name, answer, True, [RIGHT], []


def no(name, answer, *words, unsaid=()):
    return name, answer, False, list(words), list(unsaid)


LAYOUTS = (product, per_head, elementwise, elementwise_trailing)
# fmt: off
CASES = [  # (id, answer, passes, words the message has, words it must not have)
    ok("solution", learner((ON_EVERY_BLOCK, ON_THE_DIAGONAL))), ok("running state", make()),
    ok("normalised as it goes", styled(normalised_as_it_goes)),
    ok("log-sum-exp", styled(log_sum_exp)),
    ok("diagonal first", key_blocks(lambda size: size, order=-1)),
    ok("keys transposed once", key_blocks(lambda size: size)),
    ok("log-sum-exp per row, while loop", styled(log_sum_exp_rows)),
    ok("key blocks half as wide", key_blocks(lambda size: max(size // 2, 1))),
    ok("functional dropout", make(dropout="functional")), ok("the learner's loop", learner()),
    ok("torch.dropout", make(dropout="torch.dropout")),
    ok("key blocks one narrower", key_blocks(lambda size: max(size - 1, 1))),
    ok("dropout by hand with bernoulli", make(dropout="bernoulli")),
    *[ok(f"layout {f.__name__}", laid_out(f)) for f in LAYOUTS],
    # what the answer is
    no("None", None, "got None"), no("an instance", make()(6, 6, 12, 0.0, 2, 4), "an instance"),
    no("a function", make, "expects a class, but got the function make"),
    no("not a module", int, "not an nn.Module"),
    no("the book's class", TiledAttention, "the book's own modules"),
    no("built on the book's", mine(TiledAttention), "the book's own modules"),
    no("the book's other class", MultiHeadAttention, "the book's own modules"),
    no("the book's method", mine(TiledAttentionStart, query_block=TiledAttention.query_block),
       "the book's own modules"),
    no("not from the start", mine(torch.nn.Module), "does not start from TiledAttentionStart"),
    no("the start itself", TiledAttentionStart, "still raises NotImplementedError", "?",
       "hint(1)", "starting"),
    no("the start subclassed", mine(TiledAttentionStart), "still raises NotImplementedError"),
    no("starting code", styled(starting_code), "starting code", "?", "hint(1)"),
    # shortcuts
    no("the book's query_block", styled(borrowed),
       "hands the work to the book's TiledAttention.query_block", "write the loop yourself"),
    no("the book's forward", mine(TiledAttentionStart, query_block=make().query_block,
       forward=the_books_forward), "hands the work to the book's MultiHeadAttention.forward"),
    no("PyTorch's attention", styled(fused_per_block), "scaled_dot_product_attention"),
    no("a whole row", styled(full_row), "scores for 12 keys (or queries) at once"),
    no("blocks joined", blocks_joined(by_hand=False), "scores for 12 keys (or queries) at once"),
    no("blocks joined by hand", blocks_joined(by_hand=True), "scores for 12 keys"),
    no("a whole row per head in 2-D", styled(whole_row_per_head), "at once",
       unsaid=["never holds"]),
    no("two passes", two_passes(), "computed 12 blocks of scores where a causal pass needs 6"),
    no("exact maximum first, elementwise", two_passes(elementwise), "blocks of scores"),
    no("every key block", make(skip=False),
       "computed 9 blocks of scores where a causal pass needs 6"),
    *[no(f"every key block, {f.__name__}", laid_out(f, True), BLOCKS) for f in LAYOUTS],
    no("future blocks on odd query blocks", learner(
       (KEY_RANGE, "range(0, keys.shape[2] if q_start // self.block_size % 2 else q_end, 4)"),
       (KEY_END, "min(k_start + self.block_size, keys.shape[2])")),
       "computed 7 blocks of scores where a causal pass needs 6", "all future",
       unsaid=["never touch"]),
    # the running state
    no("exp overflows", learner((WEIGHTS, "torch.exp(scores)"), (FACTOR, "1.0")), "exp overflows"),
    no("factor after the update", learner((NEW_MAX, NEW_MAX + "\n            row_max = new_max")),
       "then update row_max"),
    no("own block maximum", learner((NEW_MAX, "new_max = block_max"), (FACTOR, "1.0")),
       "Keep one running maximum"),
    no("factor upside down", make(factor="new - old, first block sets it"), "upside down"),
    no("ratio of the maxima", make(factor="old / new, first block sets it"), "ratio of the maxima"),
    no("ratio of the maxima from -inf", make(factor="old / new"), "every output nan"),
    no("factor upside down from -inf", make(factor="new - old"), "every output nan"),
    no("nothing rescaled", make(rescale_sum=False, rescale_out=False),
       "rescale the running sum and output"),
    no("sum not rescaled", make(rescale_sum=False), "rescale the running sum and output"),
    no("output not rescaled", make(rescale_out=False), "rescale the running sum and output"),
    no("sum rescaled by factor²", make(sum_power=2), UNKNOWN),
    no("divided inside the loop", make(divide="inside"), "divided by it inside the loop", UNKNOWN),
    no("no final division", make(divide="never"), "never divided by the running", UNKNOWN),
    no("blocks averaged", per_block_softmax(lambda parts: parts.mean(0)), "1/n",
       "normalised each", "averaged", UNKNOWN),
    no("blocks added", per_block_softmax(lambda parts: parts.sum(0)), "normalised each",
       "added", UNKNOWN),
    no("max over the rows", learner(("amax(-1", "amax(2")), "maximum over dimension 2",
       "amax(-1"),
    # the scale
    no("no scaling", make(divisor="none"), "not divided by √head_dim"),
    no("scaled by √d_out", make(divisor="sqrt d_out"), "divided by √d_out"),
    no("divided by head_dim", make(divisor="head_dim"), "not by its square root"),
    # the blocks and the mask
    no("no diagonal mask", make(diagonal="none"), "Mask the diagonal block", UNKNOWN),
    no("whole diagonal masked", make(diagonal="whole"), "hides each query's own key", UNKNOWN),
    no("diagonal masked too",
       learner((MASK, "torch.ones(q_end, q_end).triu(0).bool()[q_start:, k_start:k_end]")),
       "hides each query's own key", UNKNOWN),
    no("mask at the origin", learner((MASK, "self.mask[:rows, : k_end - k_start]")),
       "sliced at the origin", UNKNOWN),
    no("mask without column offset", learner((MASK, "self.mask[q_start:q_end, : k_end - k_start]")),
       "without the column offset", UNKNOWN),
    no("inverted mask", learner((MASK, "~" + MASK)), "hides each query's own key", UNKNOWN),
    no("key block ends early", learner((KEY_END, "min(k_start + self.block_size - 1, q_end)")),
       "k_start + self.block_size", UNKNOWN),
    no("no key block for a query", learner((KEY_RANGE, "range(0, q_end - 1, self.block_size)")),
       "range(0, q_end", UNKNOWN, unsaid=["factor"]),
    no("future blocks first", make(skip=False, order=-1), UNKNOWN),
    no("partial block dropped", make(divisible_only=True), "RuntimeError"),
    # what query_block returns
    no("returns None", styled(lambda self, q, keys, values, q_start: None), "NoneType"),
    no("forgets the heads", styled(lambda self, *a: make().query_block(self, *a)[:, 0]),
       "RuntimeError"),
    no("raises oddly", styled(raises), "Your class raised", "KeyError",
       "when called in eval mode"),
    no("raises in training mode only", styled(raises_in_training), "RuntimeError",
       "when called in training mode"),
    # dropout
    no("dropout in eval", make(dropout="always"), "dropout is on"),
    no("no dropout in training", make(dropout="none"), "your dropout is missing"),
    no("dropout on the values", make(dropout="values"), "single numbers of the values"),
    no("dropout on the context", make(dropout="context"), "of an output"),
    no("dropout on the running output", make(dropout="running output"), "of an output"),
    no("dropout twice", make(dropout="twice"), "applied twice"),
    no("dropout in the sum", make(dropout="both"), "in the running sum"),
    no("dropout on the scores", dropped_scores(before_mask=True), "on the scores"),
    no("dropout on the masked scores", dropped_scores(before_mask=False), "on the scores"),
]
# fmt: on


@pytest.mark.parametrize(
    ("answer", "passed", "words", "unsaid"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_online_softmax(answer, passed, words, unsaid):
    result = online_softmax.check(answer)
    assert result.passed is passed, result.feedback
    for word in words:
        assert word in result.feedback, result.feedback
    for word in [*unsaid, UNKNOWN] * (not passed and UNKNOWN not in words):
        assert word not in result.feedback, result.feedback


def test_every_catalogued_mistake_has_a_case():
    """Each message of the catalogue is what some wrong answer in CASES is told."""
    told = [word for _, _, passed, words, _ in CASES if not passed for word in words]
    for mistake in CATALOGUE:
        assert any(word in mistake.message for word in told), mistake.message


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("training", [False, True])
def test_the_catalogues_online_softmax_without_a_mistake_is_multi_head_attention(config, training):
    """The buggy references differ from the right output by one mistake: with none, it is
    MultiHeadAttention's output, the book's forward (in training, with the check's dropout)."""
    torch.manual_seed(config.seed)
    m = TiledAttentionStart(*config[:3], config.dropout, config.num_heads, config.block_size)
    x = torch.randn(2, config.num_tokens, config.d_in)
    with torch.no_grad(), Watch():
        book = MultiHeadAttention.forward(m.train(training), x)
        assert same(online(m, x, training=training), book)


def test_the_check_leaves_the_readers_random_state_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    online_softmax.check(make())
    assert torch.equal(torch.rand(3), expected)


def test_the_configurations_cover_partial_blocks_one_token_biases_dropout_and_large_scores():
    lengths = {(c.num_tokens % c.block_size != 0, c.num_tokens < c.block_size) for c in CONFIGS}
    assert {(False, False), (True, False), (True, True)} <= lengths
    assert any(c.num_tokens == 1 for c in CONFIGS) and any(c.qkv_bias for c in CONFIGS)
    assert any(c.dropout > 0 and c.block_size % 2 == 0 for c in CONFIGS)
    assert any(c.query_gain > 100 for c in CONFIGS)
    assert all(c.d_out // c.num_heads not in (c.block_size, c.d_in) for c in CONFIGS)


def test_hints_and_solution_follow_the_books_pattern():
    assert len(online_softmax.hints) == 3
    assert "online_softmax.check(MyTiledAttention)" in online_softmax.solution_text
    assert str(online_softmax.hint(1)).startswith("Hint 1 of 3")
