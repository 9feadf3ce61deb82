"""Chapter 7's exercise: the loop over key blocks of the online softmax.

The reader subclasses :class:`TiledAttentionStart` (``MultiHeadAttention``'s layers, a
``block_size``, and a ``forward`` that walks the query blocks) and writes ``query_block``: the
loop over the key blocks one query block needs, the scores of each block, the diagonal mask,
the running maximum, sum and output, and the final division. The check builds the class in
several configurations (lengths that a block divides and that it does not, shorter than a
block, a single token, biases, dropout), compares the output in eval mode with the book's
``MultiHeadAttention`` given the instance's own weights, counts the blocks of scores it computed,
and names the mistake it recognises.
"""

import torch

from .classes import class_answer_mistakes
from .config import check_class, trial_mistakes, unexplained
from .core import Exercise, Mistake, never_raises
from .tiled_trial import TILED_CONFIGS, WRONG_FACTORS, TiledRecipe, TiledTrial, book_modules
from .weight_split import WeightSplitSkeleton


class TiledAttentionStart(WeightSplitSkeleton):
    """Chapter 7's starting point: the layers, the query blocks, and a ``query_block`` to write.

    ``forward`` projects, splits the heads, hands each block of ``block_size`` queries to
    ``query_block`` and merges the results; ``mask`` is ``True`` above the diagonal.
    """

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, block_size=64, qkv_bias=False
    ):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.block_size = block_size

    def split_heads(self, t):
        """(b, num_tokens, d_out) → (b, num_heads, num_tokens, head_dim)."""
        b, num_tokens, _ = t.shape
        return t.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        b, num_tokens, _ = x.shape
        # (b, num_heads, num_tokens, head_dim)
        queries = self.split_heads(self.W_query(x))
        keys = self.split_heads(self.W_key(x))
        values = self.split_heads(self.W_value(x))
        blocks = []
        for q_start in range(0, num_tokens, self.block_size):
            q = queries[:, :, q_start : q_start + self.block_size]
            blocks.append(self.query_block(q, keys, values, q_start))
        context = torch.cat(blocks, dim=2).transpose(1, 2)  # (b, T, num_heads, head_dim)
        return self.out_proj(context.reshape(b, num_tokens, self.d_out))

    def query_block(self, q, keys, values, q_start):
        raise NotImplementedError("write the loop over key blocks in query_block")


def _follows(**changes):
    return lambda t: t.follows(TiledRecipe(**changes))


NOT_A_CLASS_MISTAKES = class_answer_mistakes(
    "online_softmax.check",
    "MyTiledAttention",
    start=TiledAttentionStart,
    book=book_modules,
    method="query_block",
    first="What must each row of a query block remember from one key block to the next? "
    "online_softmax.hint(1) starts from there.",
)
DELEGATES = Mistake(
    "delegates to the book",
    "Your code hands the work to the book's {t.book_calls[0]}. Write the loop over key "
    "blocks yourself, from q, keys and values.",
    lambda t: t.book_calls,
)
FUSED_KERNEL = Mistake(
    "the fused kernel",
    "Your code calls PyTorch's own attention (scaled_dot_product_attention or "
    "nn.MultiheadAttention): it does the online softmax for you. Write the scores, the "
    "running maximum, sum and output yourself.",
    lambda t: t.torch_attention,
)
NOT_TILED = Mistake(
    "scores larger than a block",
    "{t.wide_story}Your code holds scores for {t.widest_scores} keys (or queries) at once, "
    "but a block has block_size={t.config.block_size}. Take the keys block by block, "
    "keys[:, :, k_start:k_start + self.block_size], and carry only a running maximum, sum "
    "and output from one block to the next.",
    lambda t: t.widest_scores > t.config.block_size,
)
DROPOUT_IN_EVAL = Mistake(
    "dropout in evaluation mode",
    "In evaluation mode your output changes from call to call: dropout is on. Use the "
    "skeleton's self.dropout, which is off in evaluation mode.",
    lambda t: t.random_in_eval,
)
CONSTRUCTOR, RAISES, NOT_A_TENSOR, WRONG_SHAPE = trial_mistakes(
    "TiledAttentionStart", "query_block"
)

TILED_MISTAKES = (
    CONSTRUCTOR,
    Mistake(
        "the starting code",
        "Your query_block still raises NotImplementedError: this is the starting code, and "
        "the loop over key blocks is yours to write. What must each row of a query block "
        "remember from one key block to the next? online_softmax.hint(1) starts from there.",
        lambda t: isinstance(t.error, NotImplementedError),
    ),
    DELEGATES,
    FUSED_KERNEL,
    Mistake(
        "maximum over the wrong axes",
        "Your code takes a maximum over {t.max_axes} scores, not over the keys alone. A "
        "row's maximum runs over its keys, the last dimension of (b, num_heads, rows, cols): "
        "scores.amax(-1, keepdim=True), (b, num_heads, rows, 1).",
        lambda t: t.log.max_axes,
    ),
    Mistake(
        "block size does not divide the length",
        "Your code is right on {t.config.divisible_tokens} tokens, but on "
        "{t.config.num_tokens} tokens, which blocks of {t.config.block_size} do not divide, "
        "it goes wrong. The last block is shorter: slice it with "
        "keys[:, :, k_start:k_start + self.block_size] (a slice stops at the end) and let "
        "range(0, end, self.block_size) reach the last, partial block.",
        lambda t: t.config.num_tokens % t.config.block_size and t.right_on_divisible_part,
    ),
    Mistake(
        "query_block returns no tensor",
        "Your query_block returned {t.block_kind}. Return the block's context: a tensor "
        "shaped like q, (b, num_heads, rows, head_dim).",
        lambda t: not isinstance(t.first_block[1], torch.Tensor),
    ),
    Mistake(
        "query_block returns the wrong shape",
        "Your query_block returned shape {t.block_shapes[0]} for q of shape {t.block_shapes[1]}. "
        "It should return one row of head_dim values per query of q, for every head: the "
        "shape of q, (b, num_heads, rows, head_dim).",
        lambda t: t.block_shapes[0] != t.block_shapes[1],
    ),
    RAISES,
    NOT_A_TENSOR,
    WRONG_SHAPE,
    NOT_TILED,
    DROPOUT_IN_EVAL,
    Mistake(
        "factor always 1",
        "Your factor is 1 at every block, even the first, where it must be 0: it is "
        "computed from the new maximum alone (row_max already updated to new_max, so "
        "exp(row_max - new_max) is exp(0)). Nothing is rescaled. Compute the factor from "
        "the old maximum first, then update row_max.",
        lambda t: (
            t.factor_always_one and t.follows(TiledRecipe(rescale_sum=False, rescale_out=False))
        ),
    ),
    Mistake(
        "running sum and output not rescaled",
        "Neither the running sum nor the running output is rescaled when a block raises a "
        "row's maximum. Both were summed relative to the old maximum: multiply each by "
        "exp(old maximum - new maximum) before adding the new block.",
        _follows(rescale_sum=False, rescale_out=False),
    ),
    Mistake(
        "running sum not rescaled",
        "The running output is rescaled, but the running sum is not. The sum of "
        "exp(score - old maximum) is relative to the old maximum too: multiply it by "
        "exp(old maximum - new maximum) before adding the new block's sum.",
        _follows(rescale_sum=False),
    ),
    Mistake(
        "running output not rescaled",
        "The running sum is rescaled, but the running output is not. The output's terms "
        "are exp(score - old maximum) × value: multiply it by exp(old maximum - new maximum) "
        "as well, before adding the new block.",
        _follows(rescale_out=False),
    ),
    Mistake(
        "no maximum subtracted: exp overflows",
        "Your output is right on small scores, but here the scores reach "
        "{t.largest_score:.0f} and your output holds nan or inf, where MultiHeadAttention's "
        "is finite: exp overflows. In float32, exp(x) is inf above x ≈ 88.7, and inf / inf "
        "is nan. Subtract each row's running maximum before exp, "
        "weights = torch.exp(scores - new_max), and rescale the old sum and output by "
        "exp(old maximum - new maximum) when it grows.",
        lambda t: t.overflows,
    ),
    Mistake(
        "no key block visited",
        "For the queries {t.scoreless_block[0]} to {t.scoreless_block[1]} your code computed "
        "no score at all: no key block was visited, and the output there is nan. A block of "
        "queries needs the key blocks from 0 up to its last query: "
        "range(0, q_end, self.block_size), with q_end = q_start + rows.",
        lambda t: t.has_nan and t.scoreless_block,
    ),
    Mistake(
        "every output nan",
        "Every output is nan, so the first key block already makes nan. There the running "
        "state is still empty: row_max is -inf, row_sum and out are 0. Your factor is not a "
        "number there (exp(new_max - row_max) is inf, row_max / new_max is ±inf), and "
        "inf × 0 is nan. The factor that moves the old sum and output to the new maximum is "
        "exp(row_max - new_max): 0 for the first block, at most 1 after it.",
        lambda t: t.all_nan,
    ),
    Mistake(
        "wrong factor",
        "Your rescaling factor is upside down: exp(new maximum - old maximum) grows the old "
        "terms. Going from the old maximum to a larger new one shrinks them: "
        "exp(old - new), at most 1.",
        lambda t: any(t.follows(recipe) for recipe in WRONG_FACTORS),
    ),
    Mistake(
        "scaled by √d_out",
        "Your scores are divided by √d_out = √{t.config.d_out}, the width of all heads "
        "together. Each head's scores are scaled by its own width: √head_dim = "
        "√{t.config.head_dim}, self.head_dim**0.5.",
        _follows(scale="sqrt d_out"),
    ),
    Mistake(
        "divided by head_dim",
        "Your scores are divided by head_dim = {t.config.head_dim}, not by its square root: "
        "scale them by self.head_dim**0.5.",
        _follows(scale="head_dim"),
    ),
    Mistake(
        "no final division",
        "Your output is never divided by the running sum: it is the weighted sum of the "
        "values with unnormalised weights. After the last key block, return out / row_sum.",
        _follows(divide="never"),
    ),
    Mistake(
        "running sum rescaled by factor²",
        "Your running sum is rescaled by the factor squared. The sum of exp(score - max) "
        "moves to a new maximum exactly as the output does: row_sum * factor, once.",
        _follows(sum_factor="factor squared"),
    ),
    Mistake(
        "ratio of the maxima",
        "Your factor is the ratio of the maxima, old / new. The terms are exponentials: "
        "exp(score - new) = exp(score - old) × exp(old - new), so the factor is "
        "exp(old maximum - new maximum), not old maximum / new maximum.",
        _follows(factor="old / new"),
    ),
    Mistake(
        "each block with its own maximum",
        "Each block's weights are taken relative to that block's own maximum, and then the "
        "blocks are added as if they shared one: a block of low scores weighs as much as a "
        "block of high ones. Keep one running maximum per row (the larger of the old one "
        "and the block's), and when it grows, rescale the old sum and output by "
        "exp(old maximum - new maximum).",
        _follows(running_max=False),
    ),
    Mistake(
        "no diagonal mask",
        "Every query sees the keys after it inside its own block: the diagonal block needs "
        "the causal mask. Slice it at the block's position, "
        "self.mask[q_start:q_start + rows, k_start:k_start + cols], and fill with -inf.",
        _follows(diagonal="none"),
    ),
    Mistake(
        "whole diagonal block masked",
        "The whole diagonal block is masked (or skipped), so a query never sees the keys of "
        "its own block, not even itself: the first block's rows see nothing at all (nan). "
        "Only the keys after each query are hidden: mask the diagonal block with the "
        "causal mask, self.mask[q_start:q_start + rows, k_start:k_start + cols].",
        _follows(diagonal="whole"),
    ),
    Mistake(
        "divided inside the loop",
        "The output is divided by the running sum inside the loop. The next block then adds "
        "unnormalised terms to a normalised output, and the sum keeps growing: keep out "
        "unnormalised in the loop and divide once, after the last block.",
        _follows(divide="inside"),
    ),
    Mistake(
        "diagonal masked too",
        "Your mask hides each query's own key as well as the later ones (a triangle built "
        "with diagonal=0), so the first token sees nothing at all: its scores are all -inf, "
        "and its output is nan. Hide only the keys after each query: the module's mask, "
        "self.mask[q_start:q_end, k_start:k_end], is True strictly above the diagonal.",
        _follows(diagonal="diagonal too"),
    ),
    Mistake("keys hidden or seen wrongly", "{t.mask_story}", lambda t: t.mask_story),
    Mistake(
        "blocks normalised separately",
        "Each of the n key blocks a query sees gets the same share of its weight, "
        "{t.block_shares[0]}: your blocks are normalised each on its own, then "
        "{t.block_shares[1]}. A block's share must follow its scores: carry one running "
        "maximum and sum over all the blocks, and divide by the sum once, after the last.",
        lambda t: t.block_shares,
    ),
    Mistake(
        "nan from a fully masked row",
        "Some outputs are nan. A row whose scores in a block are all -inf has a maximum of "
        "-inf, and exp(-inf - (-inf)) is nan. Skip the key blocks that lie entirely after a "
        "query block, and start each row with a block that holds at least its first key.",
        lambda t: t.has_nan,
    ),
    Mistake(
        "no scaling",
        "The scores are not divided by √head_dim, as MultiHeadAttention divides them: "
        "scores = q @ k.transpose(2, 3) / self.head_dim**0.5.",
        _follows(scale="none"),
    ),
    unexplained(
        "scores scaled by √head_dim, the mask on the diagonal block, the new maximum, the "
        "rescaling of the old sum and output, the new terms added; one division after the loop."
    ),
)

#: Checked once the output is right: what tiling and the causal mask must save.
AFTER_MATCH_MISTAKES = (
    DELEGATES,
    FUSED_KERNEL,
    NOT_TILED,
    Mistake(
        "blocks above the diagonal computed",
        "Your output is right, but your code computed {t.blocks_computed} blocks of scores "
        "where a causal pass needs {t.config.causal_blocks} (of {t.config.blocks} × "
        "{t.config.blocks}). A key block that starts after a query block's last token is "
        "all future: skip it, rather than compute it and mask it all.",
        lambda t: t.blocks_computed > t.config.causal_blocks and t.touches_future,
    ),
    Mistake(
        "causal blocks computed more than once",
        "Your output is right, and you never touch a key block after the queries, but your "
        "code computed {t.blocks_computed} blocks of scores where a causal pass needs "
        "{t.config.causal_blocks}: each one {t.times_over:g} times, as a first pass for the "
        "maximum and a second for the sum and output do. The online softmax needs one "
        "pass: keep a running maximum, and when a block raises it, rescale the old sum and "
        "output by exp(old maximum - new maximum).",
        lambda t: t.blocks_computed > t.config.causal_blocks,
    ),
    DROPOUT_IN_EVAL,
    Mistake(
        "no dropout in training",
        "In training mode your code applies no dropout, although the module was built with "
        "dropout={t.config.dropout}. Apply self.dropout to the block's unnormalised weights "
        "before they multiply the values.",
        lambda t: t.dropout_place == "none",
    ),
    Mistake(
        "dropout in the wrong place",
        "{t.dropout_story} MultiHeadAttention drops whole attention weights. Dropout belongs "
        "on the unnormalised weights on their way into the output, "
        "out = out * factor + self.dropout(weights) @ v, and not into the sum: "
        "row_sum takes the weights before dropout.",
        lambda t: t.dropout_misplaced,
    ),
)


@never_raises
def check_online_softmax(cls):
    """Check a class whose ``query_block`` runs the online softmax over key blocks."""
    return check_class(
        cls,
        NOT_A_CLASS_MISTAKES,
        TiledTrial,
        TILED_CONFIGS,
        TILED_MISTAKES,
        AFTER_MATCH_MISTAKES,
        f"Your loop matches MultiHeadAttention in all {len(TILED_CONFIGS)} configurations "
        "(lengths the block divides and does not, shorter than a block, one token, biases, "
        "scores in the hundreds). No tensor of scores it computed, by products or "
        "elementwise, spans more than a block; it computed as many scores as the blocks on "
        "and below the diagonal hold; in training, token 0's context is 0 or its value / "
        "(1 - p), and the mean of 48 calls is the eval output.",
    )


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
