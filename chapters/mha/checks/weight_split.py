"""Chapter 3's exercise: the forward pass of a weight split, written from a skeleton.

The reader subclasses :class:`WeightSplitSkeleton` (``MultiHeadAttention``'s layers, a ``forward``
that raises) and writes ``forward``. :func:`check_weight_split` builds the class in several
configurations (:mod:`.split_trial`) and compares its output, in eval mode, with the reference
computed from each instance's own layers; most mistakes are buggy references, the same
computation with one ingredient changed (:class:`.reference.Recipe`). With dropout it also runs
training mode, where dropout must drop whole weights. A forward that uses PyTorch's attention or
the book's own class is refused (:mod:`.class_answer`).
"""

import torch
from torch import nn

from .catalogue import Buggy
from .class_answer import Skeleton, class_problem, delegation, watching
from .core import CheckResult, Exercise, Mistake, first_mistake, never_raises
from .reference import CORRECT
from .split_trial import CONFIGS, SplitTrial


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


def buggy(name, message, *changes):
    """The mistake ``name`` as buggy references: the right recipe with each of ``changes``."""
    return tuple(Buggy(name, message, lambda t, c=c: t.expected(CORRECT.but(**c))) for c in changes)


# fmt: off
#: Known mistakes, most specific first: the first one recognised is the one the reader hears.
MISTAKES = (
    Mistake("constructor raises",
            "Building your class as {call} raised {error_text}. Keep the constructor of "
            "WeightSplitSkeleton: subclass it and write only forward.",
            lambda t: t.stage == "constructor"),
    Mistake("the starting code",
            "Your forward still raises NotImplementedError: this is the starting code, and the "
            "forward pass is yours to write. What does each head need from W_query, W_key and "
            "W_value, and in which shape? The first hint, just below the check, starts from there.",
            lambda t: isinstance(t.error, NotImplementedError)),
    Mistake("the fused kernel", "{torch_text}", lambda t: t.torch_attention),
    # Right in eval mode, wrong in training mode:
    Mistake("forward raises in training mode",
            "Your forward works in eval mode, but in training mode (after module.train()) it "
            "raised {training_error_text}: self.dropout(attn_weights) needs no test of "
            "self.training.",
            lambda t: t.passed and t.dropout_place == "raises"),
    Mistake("no dropout in training",
            "In training mode your forward gives the same output on every call, although "
            "dropout={c.dropout}: no attention weight is ever dropped. Apply the skeleton's "
            "self.dropout to the attention weights.",
            lambda t: t.passed and t.dropout_place == "none"),
    Mistake("dropout in the wrong place",
            "{dropout_text}", lambda t: t.passed and t.dropout_place not in (None, "none",
            "raises")),
    Mistake("projections missing",
            "The check could not use your instance's {names}: it computes the expected output from"
            " the instance's own W_query, W_key and W_value, so keep those names.",
            lambda t: t.unusable_projections),
    Mistake("d_out taken per head",
            "Your W_query maps d_in={c.d_in} to width {projection_width}, but d_out={c.d_out} is "
            "the total width of all heads together: each projection is nn.Linear(d_in, d_out).",
            lambda t: t.projection_width != t.c.d_out),
    Mistake("dropout on in eval mode",
            "Your forward gives a different output each time, even in eval mode: its dropout "
            "ignores the module's mode (F.dropout defaults to training=True). Use self.dropout.",
            lambda t: t.random_in_eval),
    Mistake("mask not sliced",
            "Your forward works on {c.context_length} tokens, but on {c.num_tokens} it raised "
            "{error_text}. The mask is context_length × context_length: slice it to the input's "
            "length.",
            lambda t: t.stage == "forward" and t.works_on_full_length_input),
    Mistake("view of a transposed tensor",
            "Your forward raised {error_text}: after transpose(1, 2), view needs numbers in memory"
            " order. Call .contiguous() before .view(...), or use .reshape(...).",
            lambda t: t.stage == "forward" and "view size is not compatible" in str(t.error)),
    Mistake("keys transposed on the wrong axes",
            "Your scores product failed ({error_text}): the keys were transposed on axes 1 and 2, "
            "which swaps heads and tokens here. Swap the last two axes: keys.transpose(2, 3).",
            lambda t: t.keys_transposed_on_heads),
    Mistake("head count hard-coded",
            "Built with num_heads={c.num_heads}, your class computes as if it had "
            "{hard_coded_head_count} heads: the head count seems written into the code. Use "
            "self.num_heads and self.head_dim.",
            lambda t: t.hard_coded_head_count is not None),
    Mistake("forward raises",
            "Calling your class on an input of shape {c.input_shape} raised {error_text}.",
            lambda t: t.stage == "forward"),
    Mistake("not a tensor",
            "Your class returned {kind}, not a tensor of shape (b, num_tokens, d_out), here "
            "{expected_shape}.",
            lambda t: not isinstance(t.output, torch.Tensor)),
    Mistake("heads not merged",
            "Your forward returned shape {output_shape}: the heads are still separate. Merge them "
            "back to (b, num_tokens, d_out), here {expected_shape}.",
            lambda t: t.shows_heads_unmerged),
    Mistake("wrong shape",
            "Your output has shape {output_shape}, but it should be (b, num_tokens, d_out), here "
            "{expected_shape}.",
            lambda t: t.output_shape != t.expected_shape),
    *buggy("projection biases bypassed",
           "Your output is right without biases but wrong with qkv_bias=True: the projections skip"
           " the biases, as x @ W.weight.T does. Call the layers: self.W_query(x).",
           dict(bias=False)),
    Mistake("a projection used in the wrong place",
            "Your output is what attention gives when {wrong_projection}. Queries come from "
            "W_query, keys from W_key and values from W_value.",
            lambda t: t.wrong_projection),
    *buggy("view without transpose",
           "Your heads are split with one view straight to (b, num_heads, num_tokens, head_dim), "
           "which mixes tokens and heads: view to (b, num_tokens, num_heads, head_dim), then "
           ".transpose(1, 2).",
           dict(split="no transpose"), dict(split="no transpose", merge="no transpose")),
    *buggy("strided heads",
           "Your heads take every num_heads-th column, but each head owns a block of head_dim "
           "consecutive columns: view(b, num_tokens, num_heads, head_dim).",
           dict(split="strided"), dict(split="strided", merge="interleaved")),
    *buggy("merge without transpose",
           "Your heads are merged without transposing back: .transpose(1, 2) first, then "
           ".contiguous().view(b, num_tokens, d_out).",
           dict(merge="no transpose")),
    *buggy("heads merged in reverse order",
           "Every head computes the right context, but the merge puts them in reverse order: head "
           "1's block of head_dim columns comes first.",
           dict(merge="reversed")),
    *buggy("heads interleaved",
           "Every head computes the right context, but the merge interleaves the heads: keep each "
           "head's head_dim values together.",
           dict(merge="interleaved")),
    *buggy("scaled by √d_out",
           "The scores are scaled by √d_out = √{c.d_out}, but each head's dot products have "
           "head_dim = {c.head_dim} terms: divide by √head_dim.",
           dict(scale="sqrt d_out")),
    *buggy("divided by head_dim",
           "The scores are divided by head_dim = {c.head_dim} itself, not by its square root.",
           dict(scale="head_dim")),
    *buggy("not scaled",
           "The scores are not scaled: divide them by √head_dim before the softmax.",
           dict(scale="none")),
    *buggy("no causal mask",
           "There is no causal mask: every token attends to later tokens. Fill their scores with "
           "-inf before the softmax.",
           dict(mask="none")),
    *buggy("diagonal masked too",
           "Your mask hides the diagonal too, so a token cannot attend to itself: hide only later "
           "tokens, as the skeleton's self.mask does.",
           dict(mask="diagonal too")),
    *buggy("mask inverted",
           "Your mask is inverted: it hides each token and the ones before it. The skeleton's "
           "self.mask is True on the later tokens, the ones to hide: use it as it is.",
           dict(mask="inverted")),
    *buggy("mask filled with 0",
           "The future positions are filled with 0 instead of -inf: a score of 0 still gets weight"
           " after the softmax.",
           dict(mask="0 before softmax")),
    *buggy("mask after softmax",
           "The causal mask is applied after the softmax, so rows no longer sum to 1: mask the "
           "scores with -inf before it.",
           dict(mask="0 after softmax"), dict(mask="-inf after softmax")),
    *buggy("softmax over the wrong axis",
           "The softmax runs over the wrong axis: each query's weights over the keys sum to 1, "
           "dim=-1.",
           *(dict(softmax_dim=d) for d in (-2, 1, 0))),
    *buggy("out_proj not applied",
           "Your class defines out_proj, but the forward never applies it: return "
           "self.out_proj(context).",
           dict(out_proj=False)),
    Mistake("unexplained",
            "Your output has the right shape, {expected_shape}, but not the right values (largest "
            "difference {largest_difference:.3g}), and no known mistake explains it (perhaps two "
            "together). Check each step: split, scores, mask with -inf, softmax of scores / "
            "√head_dim over the keys, merge in head order, out_proj.",
            lambda t: True),
)
# fmt: on


@never_raises
def check_weight_split(cls):
    """Check a weight-split class: build it in several configurations and compare its output
    with the reference computed from each instance's own layers."""
    problem = class_problem(cls, "check_weight_split", "MyWeightSplit", "the weight split")
    if problem:
        return CheckResult(False, problem)
    with watching() as (book, seen), torch.random.fork_rng(devices=[]):
        for config in CONFIGS:
            seen.clear()
            trial = SplitTrial(cls, config, seen)
            if book:
                return CheckResult(False, delegation(cls, book, "the weight split"))
            if trial.correct:
                continue
            mistake = first_mistake(MISTAKES, trial)
            quiet = trial.stage == "constructor" or mistake.name == "the starting code"
            seen_with = f"\n(Seen with {trial.call}.)" * (not quiet)
            return CheckResult(False, mistake.tell(trial) + seen_with)
    return CheckResult(
        True,
        f"Your forward pass matches the reference, computed from each instance's own weights, "
        f"in all {len(CONFIGS)} configurations: 1, 2, 3, 4 and 6 heads, d_in ≠ d_out, inputs "
        "shorter than context_length, biases, and dropout (off in eval mode; in training mode "
        "token 0's context is 0 or its value / (1 - p), the mean of 48 calls is the eval output), "
        "written without torch's own attention (the fused kernel or nn.MultiheadAttention).",
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
