"""Chapter 7's exercise: ``query_block``, the online softmax over the key blocks a query block needs.

The check builds the reader's class in six configurations and compares its output with
``MultiHeadAttention``'s on the same weights. A wrong output is named by the first entry of
``WRONG`` it matches: a buggy reference (:func:`online` with the entry's switches) or a fact of the
run (:class:`.tiled_run.Run`). A right one must also hold no scores wider than a block, compute
each causal block once (``AFTER``) and, in training, drop whole weights (``TRAINING``).
"""

from collections import namedtuple

import torch

from ..tiled import TiledAttention
from .core import CheckResult, Exercise, fill, never_raises
from .reference import Recipe, same, split_attention
from .tiled_run import CONFIGS, Run, dropped, online


class TiledAttentionStart(TiledAttention):
    """The practice's start: ``TiledAttention``'s layers and ``forward``, which hands each block
    of ``block_size`` queries to ``query_block``; ``query_block`` is the reader's to write."""

    def query_block(self, q, keys, values, q_start):
        raise NotImplementedError("write the loop over key blocks in query_block")


START = ("What must each row of a query block remember from one key block to the next? "
         "online_softmax.hint(1) starts from there.")
TILES = (" For queries {bs} to {end2} and keys {keys}, your code hides what self.mask[{bs}:{bs2}, "
         "0:{bs}] marks{how}. This block's part of the mask is self.mask[{bs}:{bs2}, {right}]: "
         "rows from q_start, columns from k_start.")
WRONG = (  # what a wrong output matches, and what to tell the reader; most specific first
    ("wide", "{story}Your code holds scores for {r.widest} keys (or queries) at once, but a block "
     "has block_size={bs}: take the keys block by block and carry a running maximum, sum and output."),
    (dict(training=True), "In evaluation mode your output changes from call to call: dropout is "
     "on. Use the skeleton's self.dropout, which is off in evaluation mode."),
    ("factor_one", "Your factor is 1 at every block, even the first, where it must be 0: it is "
     "computed after row_max became new_max. Compute it from the old maximum, then update row_max."),
    (dict(rescale_sum=False, rescale_out=False), "Neither the running sum nor the running output is "
     "rescaled when a block raises a row's maximum: multiply both by exp(old max - new max)."),
    (dict(rescale_sum=False), "The running output is rescaled, but the running sum is not: it is "
     "relative to the old maximum too. Multiply it by exp(old maximum - new maximum)."),
    (dict(rescale_out=False), "The running sum is rescaled, but the running output is not: its "
     "terms are exp(score - old max) × value. Multiply it by exp(old max - new max) as well."),
    ("overflows", "Your output is right on small scores, but here the scores reach {largest:.0f} "
     "and your output holds nan or inf: exp overflows above 88.7. Subtract the running maximum."),
    (dict(stop=1), "For the queries {scoreless} your code computed no score at all: no key block was "
     "visited (nan). A query block needs key blocks range(0, q_end, self.block_size), q_end = "
     "q_start + rows."),
    ("all_nan", "Every output is nan: the first key block makes nan, where row_max is -inf and row_sum "
     "and out are 0 (inf × 0). exp(row_max - new_max) is 0 for the first block, at most 1 after."),
    (dict(factor="new - old"), "Your rescaling factor is upside down: exp(new max - old max) grows "
     "the old terms. A larger maximum shrinks them: exp(old - new), at most 1."),
    (dict(scale="sqrt d_out"), "Your scores are divided by √d_out = √{c.d_out}, the width of all "
     "heads. Each head's scores are scaled by √head_dim = √{head_dim}, self.head_dim**0.5."),
    (dict(scale="head_dim"), "Your scores are divided by head_dim = {head_dim}, not by its square "
     "root: self.head_dim**0.5."),
    (dict(divide="never"), "Your output is never divided by the running sum: its weights are "
     "unnormalised. After the last key block, return out / row_sum."),
    (dict(power=2), "Your running sum is rescaled by the factor squared; it moves to a new maximum "
     "as the output does: row_sum * factor, once."),
    (dict(factor="old / new"), "Your factor is the ratio of the maxima, old / new, but exp(score - "
     "new) = exp(score - old) × exp(old - new): the factor is exp(old max - new max)."),
    (dict(own_max=True), "Each block's weights are relative to that block's own maximum, then added "
     "as if they shared one. Keep one running maximum per row and rescale what came before."),
    (dict(mask="none"), "Every query sees the keys after it inside its own block: the diagonal "
     "block needs the causal mask, self.mask[q_start:q_end, k_start:k_end], filled with -inf."),
    (dict(mask="whole"), "The whole diagonal block is masked (or skipped): a query never sees the "
     "keys of its own block, not even itself. Mask only the keys after each query."),
    (dict(divide="inside"), "The output is divided by the running sum inside the loop, so the next "
     "block adds unnormalised terms to a normalised output: divide once, after the last block."),
    (dict(mask="too"), "Your mask hides each query's own key as well as the later ones "
     "(diagonal=0): the first token sees nothing (nan). self.mask is True strictly above it."),
    (dict(mask="origin"), TILES.replace("{keys}", "0 to {last}").replace("self.mask[{bs}:{bs2}, 0",
     "self.mask[0:{bs}, 0").replace("{how}", ": the mask sliced at the origin").replace(
     "{right}", "0:{bs}")),
    (dict(mask="no column offset"), TILES.replace("{keys}", "{bs} to {end2}").replace("{how}",
     " (nothing): the mask sliced without the column offset").replace("{right}", "{bs}:{bs2}")),
    (dict(mask="inverted"), "For queries 0 to {last} and keys 0 to {last}, your code hides what "
     "~self.mask[0:{bs}, 0:{bs}] marks: your mask is inverted, so each query sees the later keys. "
     "masked_fill hides where the mask is True: use self.mask without ~ (or == 0)."),
    (dict(shrink=1), "For queries 0 to {last}, your code gives no weight to key {last}. Does a key "
     "block end early? keys[:, :, k_start:k_end] stops before k_start + self.block_size."),
    (dict(combine="mean"), "Each key block a query sees gets the same share of its weight, 1/n: "
     "your blocks are normalised each on its own, then averaged. Carry one running sum instead."),
    (dict(combine="sum"), "Each key block a query sees gets the same share of its weight, 1: your "
     "blocks are normalised each on its own, then added. Carry one running sum instead."),
    ("has_nan", "Some outputs are nan. A row whose scores in a block are all -inf has a maximum of "
     "-inf, and exp(-inf - (-inf)) is nan. Skip the key blocks entirely after a query block."),
    (dict(scale="none"), "The scores are not divided by √head_dim, as MultiHeadAttention divides "
     "them: scores = q @ k.transpose(2, 3) / self.head_dim**0.5."),
    ("always", "Your output has the right shape, not the right values (largest difference {gap:.3g}"
     "), and none of the usual mistakes explains it: check the scale, the diagonal's mask, the "
     "maximum, the rescaling of the old sum and output, and one division after the loop."))
AFTER = (WRONG[0], ("future", "Your output is right, but your code computed {computed} blocks of "
    "scores where a causal pass needs {causal} (of {blocks_n} × {blocks_n}): a key block that "
    "starts after a query block's last token is all future. Skip it."),
    ("twice", "Your output is right, but your code computed {computed} blocks of scores where a "
     "causal pass needs {causal}: each one {times:g} times, as two passes (the maximum, then the "
     "sum) do. Keep a running maximum, and rescale the old sum and output when it grows."))
TRAINING = tuple((dict(drop=kind) if kind else "always", f"In training mode your {says}. MultiHeadAttention drops whole "
    "weights: out = out * factor + self.dropout(weights) @ v; row_sum takes them undropped.")
    for kind, says in (("none", "code applies no dropout"), ("values", "dropout drops single "
    "numbers of the values"), ("context", "dropout drops single numbers of an output, the "
    "context"), ("running output", "dropout drops single numbers of an output, the running one"),
    ("twice", "code scales a kept weight by 1 / (1 - p) twice: dropout is applied twice"),
    ("scores", "dropout acts on the scores"), ("masked scores", "dropout acts on the scores"),
    ("sum", "dropout also reaches the running sum, and the division undoes it"),
    (None, "output is not what dropping whole weights gives")))  # fmt: skip
# fmt: on


STARTING = ("Your query_block still raises NotImplementedError: this is the starting code, and the "
            "loop over key blocks is yours to write. " + START)  # fmt: skip
EARLY = (("max_axes_seen", "Your code takes a maximum over {max_axes} scores, not over the keys "
          "alone: a row's maximum runs over the last dimension, scores.amax(-1, keepdim=True)."),
         ("partial", "Your code is right on {divisible} tokens, but on {c.num_tokens} tokens, which "
          "blocks of {bs} do not divide, it goes wrong. Slice the last, shorter block with "
          "keys[:, :, k_start:k_end] and let range(0, q_end, self.block_size) reach it."))  # fmt: skip
BOOK = __package__.split(".")[0] + "."  # the book's modules: mha.*


def _alike(output, reference):
    """Equal within float32 rounding, nan where ``reference`` has nan (a buggy one may)."""
    return isinstance(output, torch.Tensor) and output.shape == reference.shape and bool(
        torch.allclose(output.double(), reference.double(), 1e-4, 1e-5, equal_nan=True))


def _named(entries, run, output, **mode):
    """The message of the first entry ``output`` matches, filled from ``run``, or None."""
    for test, message in entries:
        try:
            if isinstance(test, str):
                hit = getattr(run, test)
            else:
                hit = _alike(output, online(run.m, run.x, **mode, **test))
        except Exception:
            hit = False
        if hit:
            return fill(message, run)
    return None


def _not_an_answer(cls):
    """What is wrong with ``cls`` before it runs (not a class, the book's, no query_block)."""
    name, fix = getattr(cls, "__name__", "it"), "subclass TiledAttentionStart and write query_block."
    if cls is None:
        return ("online_softmax.check got None. Run the cell that defines your class, then pass "
                "the class itself: online_softmax.check(MyTiledAttention).")  # fmt: skip
    if isinstance(cls, torch.nn.Module):
        return (f"You passed an instance of {type(cls).__name__}, not the class. Pass the class "
                "itself: the check builds its own instances, with several sizes.")  # fmt: skip
    if not isinstance(cls, type):
        kind = f"the function {name}" if callable(cls) else f"a {type(cls).__name__}"
        return (f"online_softmax.check expects a class, but got {kind}. Pass the class you "
                "defined with class ...: by its name, without calling it.")  # fmt: skip
    if not issubclass(cls, torch.nn.Module):
        return f"{name} is a class, but not an nn.Module: {fix}"
    book = any(k.__module__.startswith(BOOK) for k in cls.__mro__)
    own = getattr(cls, "query_block", None)
    if not issubclass(cls, TiledAttentionStart) and book or own is TiledAttention.query_block:
        return f"{name} is one of the book's own modules, or built on one. This exercise asks for your own query_block: {fix}"
    if not issubclass(cls, TiledAttentionStart):
        return f"{name} does not start from TiledAttentionStart, so the check cannot know its layers: {fix}"
    if own is TiledAttentionStart.query_block:
        return f"{name} has no query_block of its own yet: the starting code's only raises. {START}"
    return None


def _raised(run):
    """What to say when the forward raised: what query_block returned, or the error."""
    try:
        q, block, _ = run.blocks()[0]
    except Exception:
        return fill("Calling your class on an input of shape {x.shape} raised {error_text}.", run)
    if not isinstance(block, torch.Tensor):
        what = "None" if block is None else f"a {type(block).__name__}"
    elif block.shape != q.shape:
        what = f"shape {tuple(block.shape)} for q of shape {tuple(q.shape)}"
    else:
        return fill("Calling your class on an input of shape {x.shape} raised {error_text}.", run)
    return (f"Your query_block returned {what}. Return the block's context: a tensor shaped like "
            "q, (b, num_heads, rows, head_dim).")  # fmt: skip


def _trained(run):
    """What is wrong with the output in training mode (dropout's place), or None."""
    run.m.train()
    try:
        with run.recorder():
            output = run.m(run.x)
    finally:
        run.m.eval()
    drop = Recipe(dropout=lambda weights: dropped(weights, run.c.dropout))
    if same(output, split_attention(run.m, run.x, run.c.num_heads, drop)):
        return None
    return _named(TRAINING, run, output, training=True)


def _verdict(cls, c):
    """The first mistake the run of ``cls`` in configuration ``c`` shows, or None."""
    run = Run(cls, c)
    if run.m is None:
        return fill("Building your class as {call} raised {error_text}. Keep the constructor of "
                    "TiledAttentionStart: subclass it and write only query_block.", run)  # fmt: skip
    if isinstance(run.error, NotImplementedError):
        return STARTING
    if run.r.book:
        return (f"Your code hands the work to the book's {run.r.book[0]}. Write the loop over key "
                "blocks yourself, from q, keys and values.")  # fmt: skip
    if run.r.torch_attention:
        return ("Your code calls PyTorch's own attention (scaled_dot_product_attention or "
                "nn.MultiheadAttention): it does the online softmax for you. Write the scores, "
                "the running maximum, sum and output yourself.")  # fmt: skip
    run.right = split_attention(run.m, run.x, c.num_heads)  # (b, num_tokens, d_out)
    if same(run.out, run.right):
        found = _named(AFTER, run, run.out) or (_trained(run) if c.dropout else None)
    elif not (found := _named(EARLY, run, run.out)) and run.error is not None:
        found = _raised(run)
    elif not found and getattr(run.out, "shape", None) != run.right.shape:
        found = fill("Your class returned {out!r:.40}, not a tensor of shape {right.shape}.", run)
    elif not found:
        found = _named(WRONG, run, run.out)
    return found and found + fill("\n(Seen with {call}.)", run)


@never_raises
def check_online_softmax(cls):
    """Check a class whose ``query_block`` runs the online softmax over key blocks."""
    problem = _not_an_answer(cls)
    if problem:
        return CheckResult(False, problem)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        for c in CONFIGS:
            found = _verdict(cls, c)
            if found:
                return CheckResult(False, found)
    return CheckResult(True, (
        f"Your loop matches MultiHeadAttention in all {len(CONFIGS)} configurations (lengths the "
        "block divides and does not, shorter than a block, one token, biases, scores in the "
        "hundreds). No tensor of scores it computed spans more than a block; it computed as many "
        "scores as the blocks on and below the diagonal hold; in training it drops whole weights."))


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
