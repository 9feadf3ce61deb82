"""Chapter 7's check on one table: (answer, passes?, words its feedback must contain)."""

import pytest
import torch

import mha.checks.tiled as tiled
from mha import MultiHeadAttention, TiledAttention
from mha.starting import TiledAttentionStart
from mha.tiled_exercise import CALL, online_softmax


def slip(slips):
    """The solution (the book's loop) with slips "text -> written instead ; ...", {NAME}: CODE's."""
    code, namespace = LOOP, {**globals(), "F": torch.nn.functional}  # as a chapter has them
    for text, wrong in (s.format(**CODE).split(" -> ") for s in slips.split(" ; ") if s):
        assert text in code, text
        code = code.replace(text, wrong, 1)
    return exec(code, namespace) or namespace["MyTiledAttention"]


def mine(query_block, base=TiledAttentionStart, **methods):
    return type("Mine", (base,), {"query_block": query_block, **methods})


def list_and_stack(self, q, keys, values, q_start):
    """Each block's maximum, sum and output kept in lists, combined once with torch.stack."""
    q_end, blocks = q_start + q.shape[2], []
    for k_start in range(0, q_end, self.block_size):
        k_end = min(k_start + self.block_size, q_end)
        s = torch.einsum("bhqd,bhkd->bhqk", q, keys[:, :, k_start:k_end]) / self.head_dim**0.5
        s = s.masked_fill(self.mask[q_start:q_end, k_start:k_end], float("-inf"))
        w, v = torch.exp(s - s.amax(-1, keepdim=True)), values[:, :, k_start:k_end]
        blocks.append([s.amax(-1, keepdim=True), w.sum(-1, keepdim=True), self.dropout(w) @ v])
    maxima, sums, outs = map(torch.stack, zip(*blocks))  # (blocks, b, H, rows, 1 or head_dim)
    return ((f := torch.exp(maxima - maxima.amax(0))) * outs).sum(0) / (f * sums).sum(0)


def per_head(self, q, keys, values, q_start, size=None):
    """A loop over batch and heads, in 2-D, key blocks of ``size`` (None: block_size)."""
    (b, heads, rows, hd), context, size = q.shape, torch.zeros_like(q), size or self.block_size
    for i, h in ((i, h) for i in range(b) for h in range(heads)):
        m, s, o = torch.full((rows, 1), -torch.inf), torch.zeros(rows, 1), torch.zeros(rows, hd)
        for k in range(0, q_start + rows, size):
            end = min(k + size, q_start + rows)
            scores = q[i, h] @ keys[i, h, k:end].T / hd**0.5  # (rows, cols)
            scores = scores.masked_fill(self.mask[q_start : q_start + rows, k:end], -1e9)
            new = torch.maximum(m, scores.max(-1, keepdim=True).values)
            w, f, m = torch.exp(scores - new), torch.exp(m - new), new
            s, o = s * f + w.sum(-1, keepdim=True), o * f + self.dropout(w) @ values[i, h, k:end]
        context[i, h] = o / s
    return context


# fmt: off
LOOP = online_softmax.solution_text.removesuffix(CALL)  # the book's loop
CODE = dict(  # lines of the solution
    DIAG="if k_end > q_start + 1:", RANGE="range(0, q_end, self.block_size)", NL="\n" + " " * 12,
    MASK="self.mask[q_start:q_end, k_start:k_end]", FILL="masked_fill(future, -torch.inf)",
    W="torch.exp(scores - new_max)", DROP="self.dropout(weights) @ v", RET="return out / row_sum",
    F="torch.exp(row_max - new_max)", OWN="torch.ones(rows, k_end - k_start)", K="k_start:k_end]",
    SUM="weights.sum(-1, keepdim=True)", Q="q_start:q_end]")
RIGHT, EVERY = "matches MultiHeadAttention in all 6 configurations", "{DIAG} -> if True: ; "
ALL_KEYS = "{RANGE} -> range(0, keys.shape[2], self.block_size) ; q_end) -> keys.shape[2])"
CASES = [  # (id, answer, passes, words the feedback must contain)
    ("solution", "", True, RIGHT), ("list and stack", mine(list_and_stack), True, RIGHT),
    ("loop over heads, 2-D, on TiledAttention", mine(per_head, TiledAttention), True, RIGHT),
    ("broadcast, F.dropout, own mask", "q @ k.transpose(2, 3) -> (q[..., None, :] * k[:, :, None])"
     ".sum(-1) ; {MASK} -> {OWN}.triu(1).bool() ; "
     "{DROP} -> F.dropout(weights, self.dropout.p, self.training) @ v", True, RIGHT),
    ("every block masked, -1e9", EVERY + "{FILL} -> masked_fill(future, -1e9)", True, RIGHT),
    ("None", None, False, "got None"), ("the book's class", TiledAttention, False, "own class"),
    ("nothing written", type("Mine", (TiledAttention,), {}), False, "yours is not written yet"),
    ("starting code", TiledAttentionStart, False, "online_softmax.hint(1)"),
    ("chapter 3's class", MultiHeadAttention, False, "write the query_block yourself"),
    ("raises", mine(lambda *a: {}[0]), False, "Your class raised KeyError"),
    ("book's query_block", mine(lambda *a: TiledAttention.query_block(*a)), False, "TiledAtt"),
    ("calls the book's forward", mine(slip("").query_block, forward=lambda s, x:
     MultiHeadAttention.forward(s, x)), False, "hands the work to the book's MultiHeadAttention"),
    ("SDPA", "{RET} -> return F.scaled_dot_product_attention(q, keys, values)", False, "PyTorch"),
    ("whole row, 2-D", mine(lambda *a: per_head(*a, size=99)), False, "wider than a"),
    ("every key block", ALL_KEYS + " ; " + EVERY, False, "computed 9 blocks of scores"),
    ("future blocks unmasked", ALL_KEYS + " ; {DIAG} -> if k_start == q_start:", False, "after"),
    ("range to q_start", "{RANGE} -> range(0, q_start, self.block_size)", False, "stop before"),
    ("key blocks end early", "(k_start + -> (k_start - 1 +", False, "end one key early"),
    ("state of block_size", "rows, 1), - -> self.block_size, 1), -", False, "fewer rows"),
    ("no mask", "{DIAG} -> if False:", False, "not masked"),
    ("mask filled with 0", "{FILL} -> masked_fill(future, 0)", False, "fills hidden scores with 0"),
    ("mask after exp", EVERY + "scores = scores.{FILL} -> pass ; {W} -> {W}.masked_fill(future, 0)",
     False, "zeroes weights after exp"),
    ("mask hides the diagonal", "{MASK} -> {OWN}.triu().bool()", False, "own key too"),
    ("inverted mask", "{FILL} -> masked_fill(~future, -torch.inf)", False, "inverted"),
    ("at the origin", EVERY + "{MASK} -> self.mask[:rows, : k_end - k_start]", False, "origin"),
    ("column offset", EVERY + "q_end, k_start:k_end -> q_end, :k_end - k_start", False, "offset"),
    ("row_max from 0", "rows, 1), -torch.inf) -> rows, 1), 0.0)", False, "starts at 0"),
    ("row_max never updated", "row_max = new_max -> pass", False, "stays -inf"),
    ("no max subtracted", "{W} -> torch.exp(scores) ; {F} -> 1.0", False, "exp overflows"),
    ("own block maximum", "torch.maximum(row_max, -> ( ; {F} -> 1.0", False, "own maximum"),
    ("rescale upside down", "{F} -> torch.exp(new_max - row_max)", False, "Every number is nan"),
    ("upside down, 0 first", "{F} -> (1 / {F}).nan_to_num(0, 0)", False, "upside down"),
    ("sum not rescaled", "row_sum * rescale -> row_sum", False, "running sum is not rescaled"),
    ("out not rescaled", "out * rescale -> out", False, "running output is not rescaled"),
    ("nothing rescaled", "row_sum * rescale -> row_sum ; out * rescale -> out", False, "never"),
    ("rescaled after adding", "row_sum * rescale + {SUM} -> (row_sum + {SUM}) * rescale ; "
     "out * rescale + {DROP} -> (out + {DROP}) * rescale", False, "new block too"),
    ("sum without keepdim", "{SUM} -> weights.sum(-1)", False, "keepdim"),
    ("max over the rows", "scores.amax(-1 -> scores.amax(-2", False, "dimension -2"),
    ("never divided", "{RET} -> return out", False, "never divided"),
    ("divided in loop too", "{DROP} -> {DROP}{NL}out = out / row_sum", False, "inside the loop"),
    ("block softmax", "{W} -> torch.softmax(scores, -1) ; {F} -> 1.0", False, "its own softmax"),
    ("sums", "{DROP} -> self.dropout(weights / {SUM}) @ v ; {RET} -> return out", False, "own sum"),
    ("not scaled", " / self.head_dim**0.5 -> ", False, "not divided by √head_dim"),
    ("divided by head_dim", "self.head_dim**0.5 -> self.head_dim", False, "not by its square"),
    ("divided by √d_out", "self.head_dim**0.5 -> self.d_out**0.5", False, "divided by √d_out"),
    ("scale multiplied", "/ self.head_dim**0.5 -> * self.head_dim**0.5", False, "multiplied"),
    ("layout", "{RET} -> return (out / row_sum).transpose(1, 2).reshape(q.shape)", False, "as q"),
    ("row_sum over the queries", "{SUM} -> weights.sum(-2, keepdim=True).mT", False, "its queries"),
    ("head 0", ":, :, {K} -> :, :1, {K} ; :, :, {K} -> :, :1, {K}", False, "head 0's keys"),
    ("values from the keys", "v = values[:, :, -> v = keys[:, :,", False, "the keys' block"),
    ("no dropout", "{DROP} -> weights @ v", False, "has no dropout"),
    ("seed", "new_max = -> torch.manual_seed(0){NL}new_max =", False, "do not reseed"),
    ("eval dropout", "{DROP} -> F.dropout(weights, self.dropout.p, True) @ v", False, "evaluation"),
    ("dropout in sum", "{W} -> self.dropout({W}) ; {DROP} -> weights @ v", False, "running sum"),
    ("dropout twice", "{DROP} -> self.dropout(self.dropout(weights)) @ v", False, "applied twice"),
    ("dropout on the scores", "new_max = -> scores = self.dropout(scores){NL}new_max = ; "
     "{DROP} -> weights @ v", False, "on the scores"),
    ("dropout on the values", "{DROP} -> weights @ self.dropout(v)", False, "single numbers of v"),
    ("past blocks skipped", "{RANGE} -> range(q_start, q_end, self.block_size)", False, "first"),
    ("context transposed", "{RET} -> return (out / row_sum).transpose(1, 2)", False, "transposed"),
    ("dropout p 0.1", "{DROP} -> F.dropout(weights, 0.1, self.training) @ v", False, "eval mode"),
    ("keys of the query block", "keys[:, :, {K} -> keys[:, :, {Q}", False, "already at the scores"),
    ("mask one key late", "{MASK} -> {OWN}.triu(2).bool()", False, "first differ at the weights"),
    ("q block's values", "values[:, :, {K} -> values[:, :, {Q}", False, "at the running output"),
]
ONE_OF_EACH = ["head 0", "range to q_start", "no mask", "row_max never updated", "layout",
               "whole row, 2-D", "state of block_size", "dropout p 0.1", "past blocks skipped"]
# fmt: on
ANSWERS = {c[0]: slip(c[1]) if isinstance(c[1], str) else c[1] for c in CASES}


@pytest.mark.parametrize("name, answer, passes, words", CASES, ids=[c[0] for c in CASES])
def test_the_check(name, answer, passes, words):
    result = online_softmax.check(ANSWERS[name])
    assert result.passed is passes and words in result.feedback, result.feedback


@pytest.mark.parametrize("name", ONE_OF_EACH)
def test_a_row_fails_on_a_check_without_its_entry(name, monkeypatch):
    words = next(c[3] for c in CASES if c[0] == name)  # each a wrong answer
    monkeypatch.setattr(tiled, "CATALOGUE", [m for m in tiled.CATALOGUE if words not in m.message])
    assert words not in online_softmax.check(ANSWERS[name]).feedback
