"""Chapter 3's catalogue of mistakes, most specific first: what the answer raised or returned,
then the weight splits that compute the wrong thing, as buggy references (the right
:class:`.reference.Recipe` with one ingredient changed, run on the trial's own layers)."""

import torch

from .catalogue import Buggy
from .core import Mistake
from .reference import CORRECT

# fmt: off
TORCH = ("Your forward calls {torch_what}, which does the scores, the mask, the softmax and the "
         "mix itself: those steps are not yours. Chapter 5's practice uses it; here, write them "
         "with @, masked_fill and torch.softmax.")
KEEP = " (For chapter 5: a bool attn_mask marks the keys to *keep*, not to hide.)"
# fmt: on


def buggy(name, message, *changes):
    """The mistake ``name`` as buggy references: the right recipe with each of ``changes``."""
    return tuple(Buggy(name, message, lambda t, c=c: t.expected(CORRECT.but(**c))) for c in changes)


# fmt: off
#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake("constructor raises", "Building your class as {call} raised {error_text}. Keep "
            "WeightSplitSkeleton's constructor: subclass it and write only forward.",
            lambda t: t.stage == "constructor"),
    Mistake("the starting code", "Your forward still raises NotImplementedError: this is the "
            "starting code, and the forward pass is yours to write. What does each head need from "
            "W_query, W_key and W_value, and in which shape? The first hint, just below the check, "
            "starts from there.",
            lambda t: isinstance(t.error, NotImplementedError)),
    Mistake("the fused kernel", TORCH + KEEP, lambda t: t.torch_attention
            and t.matches(CORRECT.but(mask="keep-mask to sdpa"))),
    Mistake("the fused kernel", TORCH, lambda t: t.torch_attention),
    # Right in eval mode, wrong in training mode:
    Mistake("forward raises in training mode", "Your forward works in eval mode, but in training "
            "mode (after module.train()) it raised {training_error_text}: "
            "self.dropout(attn_weights) needs no test of self.training.",
            lambda t: t.passed and t.dropout_place == "raises"),
    Mistake("no dropout in training", "In training mode your forward gives the same output on "
            "every call, although dropout={c.dropout}: no attention weight is ever dropped. Apply "
            "the skeleton's self.dropout to the attention weights.",
            lambda t: t.passed and t.dropout_place == "none"),
    Mistake("dropout in the wrong place", "{dropout_text}",
            lambda t: t.passed and t.dropout_place not in (None, "none", "raises")),
    Mistake("projections missing", "The check could not use your instance's {names}: it computes "
            "the expected output from the instance's own W_query, W_key and W_value, so keep those "
            "names.",
            lambda t: t.unusable_projections),
    Mistake("d_out taken per head", "Your W_query maps d_in={c.d_in} to width {projection_width}, "
            "but d_out={c.d_out} is the total width of all heads together: each projection is "
            "nn.Linear(d_in, d_out).",
            lambda t: t.projection_width != t.c.d_out),
    Mistake("dropout on in eval mode", "Your forward gives a different output each time, even in "
            "eval mode: its dropout ignores the module's mode (F.dropout defaults to "
            "training=True). Use self.dropout.",
            lambda t: t.random_in_eval),
    Mistake("mask not sliced", "Your forward works on {c.context_length} tokens, but on "
            "{c.num_tokens} it raised {error_text}. The mask is context_length wide: slice it to "
            "the input's length.",
            lambda t: t.stage == "forward" and t.works_on_full_length_input),
    Mistake("view of a transposed tensor", "Your forward raised {error_text}: after transpose(1, "
            "2), view needs numbers in memory order. Call .contiguous() before .view(...), or use "
            ".reshape(...).",
            lambda t: t.stage == "forward" and "view size is not compatible" in str(t.error)),
    Mistake("keys transposed on the wrong axes", "Your scores product failed ({error_text}): the "
            "keys were transposed on axes 1 and 2, which swaps heads and tokens here. Swap the "
            "last two axes: keys.transpose(2, 3).",
            lambda t: t.keys_transposed_on_heads),
    Mistake("head count hard-coded", "Built with num_heads={c.num_heads}, your class computes as "
            "if it had {hard_coded_head_count} heads: the count is in the code. Use num_heads.",
            lambda t: t.hard_coded_head_count is not None),
    Mistake("forward raises", "Calling your class on an input of shape {c.input_shape} raised "
            "{error_text}.",
            lambda t: t.stage == "forward"),
    Mistake("not a tensor", "Your class returned {kind}, not a tensor of shape (b, num_tokens, "
            "d_out), here {expected_shape}.",
            lambda t: not isinstance(t.output, torch.Tensor)),
    Mistake("heads not merged", "Your forward returned shape {output_shape}: the heads are still "
            "separate. Merge them back to (b, num_tokens, d_out), here {expected_shape}.",
            lambda t: t.shows_heads_unmerged),
    Mistake("wrong shape", "Your output has shape {output_shape}, but it should be (b, num_tokens, "
            "d_out), here {expected_shape}.",
            lambda t: t.output_shape != t.expected_shape),
    *buggy("projection biases bypassed", "Your output is right without biases but wrong with "
           "qkv_bias=True: the projections skip the biases, as x @ W.weight.T does. Call the "
           "layers: self.W_query(x).",
           dict(bias=False)),
    Mistake("a projection used in the wrong place", "Your output is what attention gives when "
            "{wrong_projection}. Queries come from W_query, keys from W_key and values from "
            "W_value.",
            lambda t: t.wrong_projection),
    *buggy("view without transpose", "Your heads are split with one view straight to (b, "
           "num_heads, num_tokens, head_dim), mixing tokens and heads: view by token first, then "
           ".transpose(1, 2).",
           dict(split="no transpose"), dict(split="no transpose", merge="no transpose")),
    *buggy("strided heads", "Your heads take every num_heads-th column, but each head owns a block "
           "of head_dim consecutive columns: view(b, num_tokens, num_heads, head_dim).",
           dict(split="strided"), dict(split="strided", merge="interleaved")),
    *buggy("merge without transpose", "Your heads are merged without transposing back: "
           ".transpose(1, 2) first, then .contiguous().view(b, num_tokens, d_out).",
           dict(merge="no transpose")),
    *buggy("heads merged in reverse order", "Every head computes the right context, but the merge "
           "puts them in reverse order: head 1's block of head_dim columns comes first.",
           dict(merge="reversed")),
    *buggy("heads interleaved", "Every head computes the right context, but the merge interleaves "
           "the heads: keep each head's head_dim values together.",
           dict(merge="interleaved")),
    *buggy("scaled by √d_out", "The scores are scaled by √d_out = √{c.d_out}, but each head's dot "
           "products have head_dim = {c.head_dim} terms: divide by √head_dim.",
           dict(scale="sqrt d_out")),
    *buggy("divided by head_dim", "The scores are divided by head_dim = {c.head_dim} itself, "
           "not by its square root.",
           dict(scale="head_dim")),
    *buggy("not scaled", "The scores are not scaled: divide them by √head_dim first.",
           dict(scale="none")),
    *buggy("no causal mask", "There is no causal mask: every token attends to later tokens. Fill "
           "their scores with -inf before the softmax.",
           dict(mask="none")),
    *buggy("diagonal masked too", "Your mask hides the diagonal too, so a token cannot attend to "
           "itself: hide only later tokens, as the skeleton's self.mask does.",
           dict(mask="diagonal too")),
    *buggy("mask inverted", "Your mask is inverted: it hides each token and the ones before it. "
           "The skeleton's self.mask is True on the later tokens, the ones to hide: use it as is.",
           dict(mask="inverted")),
    *buggy("mask filled with 0", "The future positions are filled with 0 instead of -inf: a score "
           "of 0 still gets weight after the softmax.",
           dict(mask="0 before softmax")),
    *buggy("mask after softmax", "The causal mask is applied after the softmax: mask the scores "
           "with -inf before it.",
           dict(mask="0 after softmax"), dict(mask="-inf after softmax")),
    *buggy("softmax over the wrong axis", "The softmax runs over the wrong axis: a query's weights "
           "over the keys sum to 1, dim=-1.",
           *(dict(softmax_dim=d) for d in (-2, 1, 0))),
    *buggy("out_proj not applied", "Your class defines out_proj, but the forward never applies it "
           "to the context.",
           dict(out_proj=False)),
    Mistake("unexplained", "Your output has the right shape, {expected_shape}, but not the right "
            "values (largest difference {largest_difference:.3g}), and no known mistake explains "
            "it (perhaps two together). Check each step: split, scores, mask with -inf, softmax of "
            "scores / √head_dim over the keys, merge in head order, out_proj.",
            lambda t: True),
)
# fmt: on
