"""Chapter 3's exercise: the forward pass of a weight split, written from a skeleton.

The reader subclasses :class:`WeightSplitSkeleton` (``MultiHeadAttention``'s layers, a
``forward`` that raises) and writes ``forward``. :func:`check_weight_split` builds the class
itself in several configurations (several head counts, ``d_in`` != ``d_out``, inputs shorter
than ``context_length``, biases in the projections, dropout) and compares the output, in eval
mode, with the reference computed from each instance's own layers (:mod:`.reference`). With
dropout it also runs training mode, where dropout must drop whole weights (:mod:`.dropout`).
A forward that calls torch's own attention (``scaled_dot_product_attention``,
``nn.MultiheadAttention``: see :func:`.classes.watching_torch_attention`) is refused: it does
the steps the practice teaches (chapter 5 uses the kernel).
"""

import torch
from torch import nn

from .classes import (
    Skeleton,
    book_forward_of,
    book_shortcut_message,
    class_answer_mistakes,
)
from .config import check_class, trial_mistakes, unexplained
from .core import (
    CheckResult,
    Exercise,
    Mistake,
    listed,
    never_raises,
)
from .reference import CORRECT, Recipe
from .split_trial import WEIGHT_SPLIT_CONFIGS, SplitTrial


class WeightSplitSkeleton(Skeleton):
    """Chapter 3's starting point: the layers of ``MultiHeadAttention``, no forward pass yet."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(
                f"d_out={d_out} is not divisible by num_heads={num_heads}: "
                "choose d_out as a multiple of num_heads."
            )
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # the width of each head
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the heads' outputs
        self.dropout = nn.Dropout(dropout)
        future = torch.ones(context_length, context_length).triu(diagonal=1)
        self.register_buffer("mask", future.bool())  # True: a later token


def _following(*recipes):
    """A detector: the reader's output is what one of ``recipes`` computes."""
    return lambda trial: trial.follows(*recipes)


NOT_A_CLASS_MISTAKES = class_answer_mistakes("check_weight_split", "MyWeightSplit")

CONSTRUCTOR, RAISES, NOT_A_TENSOR, WRONG_SHAPE = trial_mistakes("WeightSplitSkeleton", "forward")

#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
WEIGHT_SPLIT_MISTAKES = (
    CONSTRUCTOR,
    Mistake("delegates to the book", "{delegation}", lambda t: t.book_calls),
    Mistake(
        "the starting code",
        "Your forward still raises NotImplementedError: this is the starting code, and the "
        "forward pass is yours to write. What does each head need from W_query, W_key and "
        "W_value, and in which shape? The first hint, just below the check, starts from there.",
        lambda t: isinstance(t.error, NotImplementedError),
    ),
    Mistake(
        "the fused kernel",
        "{torch_attention_text}{sdpa_mask_note}",
        lambda t: t.torch_attention,
    ),
    # Right in eval mode, wrong in training mode:
    Mistake(
        "forward raises in training mode",
        "Your forward works in eval mode, but in training mode (after module.train()) it "
        "raised {training_error_text}. The check runs both modes, because dropout acts only "
        "in training: self.dropout(attn_weights) needs no test of self.training.",
        lambda t: t.passed and t.dropout_place == "raises",
    ),
    Mistake(
        "no dropout in training",
        "In training mode your forward gives the same output on every call, although the "
        "module was built with dropout={c.dropout}: no attention weight is ever dropped. "
        "Apply the skeleton's layer to the weights, attn_weights = "
        "self.dropout(attn_weights): it drops weights at random in training mode and does "
        "nothing in eval mode.",
        lambda t: t.passed and t.dropout_place == "none",
    ),
    Mistake(
        "dropout in the wrong place",
        "{dropout_text}",
        lambda t: t.passed and t.dropout_misplaced,
    ),
    Mistake(
        "projections missing",
        "The check could not use your instance's {names}. It computes the expected output from "
        "the instance's own W_query, W_key and W_value, so keep those names: layers that map "
        "(b, num_tokens, d_in) to (b, num_tokens, d_out), as the skeleton builds them.",
        lambda t: t.unusable_projections,
    ),
    Mistake(
        "d_out taken per head",
        "Your W_query maps d_in={c.d_in} to width {projection_width}, but here d_out={c.d_out} "
        "is the total width of all heads together: each projection is nn.Linear(d_in, d_out), "
        "and each head takes a block of head_dim = d_out // num_heads = {c.head_dim} columns. "
        "(In the wrapper, d_out was the width of each head.)",
        lambda t: t.projection_width != t.config.d_out,
    ),
    Mistake(
        "dropout on in eval mode",
        "Your forward gives a different output each time, even in eval mode (dropout={c.dropout}):"
        " its dropout ignores the module's mode. torch.nn.functional.dropout(w, p) defaults to "
        "training=True. Use the skeleton's layer, self.dropout(attn_weights), which is off in "
        "eval mode.",
        lambda t: t.random_in_eval,
    ),
    Mistake(
        "mask not sliced",
        "Your forward works on an input of context_length={c.context_length} tokens, but on "
        "{c.num_tokens} tokens it raised {error_text}. The mask buffer is context_length × "
        "context_length: slice it to the input's length, self.mask[:num_tokens, :num_tokens].",
        lambda t: t.stage == "forward" and t.works_on_full_length_input,
    ),
    Mistake(
        "view of a transposed tensor",
        "Your forward raised {error_text}. After transpose(1, 2) the context's numbers are no "
        "longer in the order view needs: view never copies. Call .contiguous() before .view(...),"
        " or use .reshape(...), which copies when it has to.",
        lambda t: t.view_not_contiguous,
    ),
    Mistake(
        "keys transposed on the wrong axes",
        "Your scores product failed ({error_text}): the keys were transposed on axes 1 and 2. "
        "That was right in the single-head code, whose keys were (b, num_tokens, head_dim); "
        "here they are (b, num_heads, num_tokens, head_dim), and transpose(1, 2) swaps heads "
        "and tokens. Swap the last two axes instead: keys.transpose(2, 3).",
        lambda t: t.keys_transposed_on_heads,
    ),
    Mistake(
        "head count hard-coded",
        "Built with num_heads={c.num_heads}, your class computes as if it had "
        "{hard_coded_head_count} heads: the head count seems to be written into the code. Take "
        "it from the constructor's argument, and use self.num_heads and self.head_dim "
        "everywhere.",
        lambda t: t.hard_coded_head_count is not None,
    ),
    RAISES,
    NOT_A_TENSOR,
    Mistake(
        "heads not merged",
        "Your forward returned shape {output_shape}: the heads are still separate. Transpose "
        "the context back to (b, num_tokens, num_heads, head_dim) and merge the last two axes "
        "with .contiguous().view(b, num_tokens, d_out), which gives {expected_shape}.",
        lambda t: t.shows_heads_unmerged,
    ),
    WRONG_SHAPE,
    Mistake(
        "projection biases bypassed",
        "Your output is right when the projections have no bias, but wrong with qkv_bias=True: "
        "the queries, keys and values skip the biases, as x @ self.W_query.weight.T does. Call "
        "the layers themselves, self.W_query(x), which add the bias when there is one.",
        _following(Recipe(bias=False)),
    ),
    Mistake(
        "a projection used in the wrong place",
        "Your output is what attention gives when {wrong_projection}. Queries come from "
        "W_query, keys from W_key and values from W_value.",
        lambda t: t.wrong_projection is not None,
    ),
    Mistake(
        "view without transpose",
        "Your heads are split with one view straight to (b, num_heads, num_tokens, head_dim). "
        "A view only regroups numbers in memory order, so each 'head' gets pieces of several "
        "tokens: tokens and heads are mixed. View to (b, num_tokens, num_heads, head_dim) "
        "first, then .transpose(1, 2).",
        _following(
            CORRECT.but(split="no transpose"),
            CORRECT.but(split="no transpose", merge="no transpose"),
        ),
    ),
    Mistake(
        "strided heads",
        "Your heads take every num_heads-th column (head h gets columns h, h + num_heads, ...), "
        "as view(b, num_tokens, head_dim, num_heads) makes them. Each head owns a block of "
        "head_dim consecutive columns: view(b, num_tokens, num_heads, head_dim), then "
        "transpose(1, 2).",
        _following(CORRECT.but(split="strided"), CORRECT.but(split="strided", merge="interleaved")),
    ),
    Mistake(
        "merge without transpose",
        "Your heads are merged without transposing back. The context is (b, num_heads, "
        "num_tokens, head_dim); viewing it straight to (b, num_tokens, d_out) puts one head's "
        "rows where other tokens belong. Call .transpose(1, 2) first, then "
        ".contiguous().view(b, num_tokens, d_out).",
        _following(CORRECT.but(merge="no transpose")),
    ),
    Mistake(
        "heads merged in reverse order",
        "Every head computes the right context, but the merge puts them in reverse order: the "
        "last head's values come first. out_proj expects head 1's block of head_dim columns "
        "first, as the projections made them: transpose(1, 2), then merge, in head order.",
        _following(CORRECT.but(merge="reversed")),
    ),
    Mistake(
        "heads interleaved",
        "Every head computes the right context, but the merge interleaves the heads: each "
        "column alternates between heads instead of keeping each head's head_dim values "
        "together. Transpose to (b, num_tokens, num_heads, head_dim) before merging the last "
        "two axes, not to (b, num_tokens, head_dim, num_heads).",
        _following(CORRECT.but(merge="interleaved")),
    ),
    Mistake(
        "scaled by √d_out",
        "The scores are scaled by √d_out = √{c.d_out}, but each head's dot products have only "
        "head_dim = {c.head_dim} terms. Divide by √head_dim: self.head_dim ** 0.5, or "
        "keys.shape[-1] ** 0.5 after the split.",
        _following(CORRECT.but(scale="sqrt d_out")),
    ),
    Mistake(
        "divided by head_dim",
        "The scores are divided by head_dim = {c.head_dim} itself, not by its square root. "
        "Scale by √head_dim: self.head_dim ** 0.5.",
        _following(CORRECT.but(scale="head_dim")),
    ),
    Mistake(
        "not scaled",
        "The scores are not scaled. Divide them by √head_dim (self.head_dim ** 0.5) before the "
        "softmax, so that large dot products do not make the softmax nearly one-hot.",
        _following(CORRECT.but(scale="none")),
    ),
    Mistake(
        "no causal mask",
        "There is no causal mask: every token also attends to the tokens after it. Fill the "
        "future positions of the scores with -inf before the softmax: "
        "attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf).",
        _following(CORRECT.but(mask="none")),
    ),
    Mistake(
        "diagonal masked too",
        "Your mask hides the diagonal too, so each token cannot attend to itself, and the first "
        "token, with nothing left to attend to, gets nan. The mask must hide only later "
        "tokens: torch.triu(..., diagonal=1), as the skeleton's self.mask is.",
        _following(CORRECT.but(mask="diagonal too")),
    ),
    Mistake(
        "mask inverted",
        "Your mask is inverted: it hides each token and the tokens before it, and leaves the "
        "later tokens visible, so every token attends only to the future, and the last one, "
        "with nothing left, gets nan. masked_fill(self.mask == 0, ...) is the convention of a "
        "torch.tril mask, where 1 means *may attend*. The skeleton's mask is torch.triu "
        "with True on the later tokens, the ones to hide: use it as it is, "
        "masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf).",
        _following(CORRECT.but(mask="inverted")),
    ),
    Mistake(
        "mask filled with 0",
        "The future positions are filled with 0 instead of -inf. A score of 0 still gets weight "
        "after the softmax (e⁰ = 1); only -inf gives a future token exactly zero weight.",
        _following(CORRECT.but(mask="0 before softmax")),
    ),
    Mistake(
        "mask after softmax",
        "The causal mask is applied after the softmax. Zeroing future weights afterwards leaves "
        "rows that no longer sum to 1, and filling them with -inf gives inf and nan. Mask the "
        "scores with -inf before the softmax, so each row of weights sums to 1 over the "
        "visible tokens.",
        _following(CORRECT.but(mask="0 after softmax"), CORRECT.but(mask="-inf after softmax")),
    ),
    Mistake(
        "softmax over the wrong axis",
        "The softmax runs over the wrong axis. Each query's weights over the keys must sum to 1, "
        "so normalise over the last axis of the scores, (b, num_heads, num_tokens, num_tokens): "
        "torch.softmax(..., dim=-1).",
        _following(*(CORRECT.but(softmax_dim=dim) for dim in (-2, 1, 0))),
    ),
    Mistake(
        "out_proj not applied",
        "Your class defines out_proj, but the forward never applies it. After merging the heads, "
        "return self.out_proj(context): the output projection is part of the forward pass.",
        _following(CORRECT.but(out_proj=False)),
    ),
    unexplained(
        "split into heads; scores of each head's queries and keys; mask the future with -inf; "
        "softmax over the keys after dividing by √head_dim; context, heads merged back in "
        "order; out_proj."
    ),
)


@never_raises
def check_weight_split(cls):
    """Check a weight-split attention class: build it in several configurations and compare
    its output with a reference computed from each instance's own layers."""
    book = book_forward_of(cls) if isinstance(cls, type) else None
    if book is not None:
        return CheckResult(False, book_shortcut_message(cls, book, "the weight-split forward"))
    heads = sorted({c.num_heads for c in WEIGHT_SPLIT_CONFIGS})
    return check_class(
        cls,
        NOT_A_CLASS_MISTAKES,
        SplitTrial,
        WEIGHT_SPLIT_CONFIGS,
        WEIGHT_SPLIT_MISTAKES,
        passed=f"Your forward pass matches the reference, computed from each instance's own "
        f"weights, in all {len(WEIGHT_SPLIT_CONFIGS)} configurations: "
        f"{listed(map(str, heads))} heads, d_in ≠ d_out, inputs shorter than context_length, "
        "biases, and dropout (off in eval mode; in training mode token 0's context is 0 or its "
        "value / (1 - p), the mean of 48 calls is the eval output), written without torch's "
        "own attention (the fused kernel or nn.MultiheadAttention).",
    )


class MyWeightSplit(WeightSplitSkeleton):
    def forward(self, x):
        b, num_tokens, _ = x.shape
        by_head = (b, num_tokens, self.num_heads, self.head_dim)
        # (b, num_tokens, d_out) -> (b, num_heads, num_tokens, head_dim)
        queries = self.W_query(x).view(by_head).transpose(1, 2)
        keys = self.W_key(x).view(by_head).transpose(1, 2)
        values = self.W_value(x).view(by_head).transpose(1, 2)

        # (b, num_heads, num_tokens, num_tokens)
        attn_scores = queries @ keys.transpose(2, 3)
        future = self.mask[:num_tokens, :num_tokens]
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        scaled = attn_scores / self.head_dim**0.5
        attn_weights = self.dropout(torch.softmax(scaled, dim=-1))

        # (b, num_heads, num_tokens, head_dim) -> (b, num_tokens, d_out)
        context = (attn_weights @ values).transpose(1, 2)
        context = context.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)


weight_split = Exercise(
    checker=check_weight_split,
    hints=(
        "The idea: one product per projection computes the queries of every head at once, "
        "and the same goes for keys and values. Each head owns a block of head_dim "
        "consecutive columns of them. Give each head its own axis, and the single-head steps "
        "apply to all heads at once.",
        "The shapes: the projections give (b, num_tokens, d_out). Split the last axis as "
        "(num_heads, head_dim), then move the head axis in front of the tokens: "
        "(b, num_heads, num_tokens, head_dim). The scores are then (b, num_heads, num_tokens, "
        "num_tokens), and the context (b, num_heads, num_tokens, head_dim) must go back to "
        "(b, num_tokens, d_out), head 1's block first.",
        "The code, step by step: .view(b, num_tokens, self.num_heads, self.head_dim) and "
        ".transpose(1, 2) split; keys.transpose(2, 3) lines the keys up for the product; "
        "self.mask[:num_tokens, :num_tokens] and self.head_dim ** 0.5 are the mask and the "
        "scale; self.dropout goes on the weights; .transpose(1, 2).contiguous().view(...) "
        "merges, and self.out_proj finishes.",
    ),
    solution_code=MyWeightSplit,
)
