"""Chapter 2's two checks, specified by one table of cases: every catalogued mistake is named
with words the reader needs, every correct style passes, and nothing a reader hands in raises.

Each row is (check, verdict, answer, words): ``verdict`` is "correct" or the name of the mistake
the check must name first; ``answer`` builds what the reader hands in; ``words`` must appear in
the feedback. Failing feedback never states the answer (d_out=1, or d_out=3 for twelve wide).
"""

import copy
import re
from functools import partial

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import mha
from mha import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper, example_batch
from mha.checks.arguments import MISTAKES, diagnosis
from mha.checks.two_dim import (
    TWELVE_WIDE,
    TWO_DIM,
    check_twelve_wide_output,
    check_two_dim_output,
    twelve_wide_output,
    two_dim_output,
)

TWO, TWELVE = check_two_dim_output, check_twelve_wide_output


def build(
    d_out=1,
    num_heads=2,
    context_length=6,
    qkv_bias=False,
    seed=123,
    cls=MultiHeadAttentionWrapper,
    d_in=3,
):
    torch.manual_seed(seed)
    return cls(d_in, d_out, context_length, 0.0, num_heads, qkv_bias)


def solution(exercise, variable):
    """The wrapper the exercise's one copy of its solution builds."""
    namespace = {"torch": torch, "MultiHeadAttentionWrapper": MultiHeadAttentionWrapper}
    exec(exercise.solution_code.rsplit("\n", 1)[0], namespace)
    return namespace[variable]


# --- buggy wrappers a reader might write -------------------------------------------------------


class Pipeline(MultiHeadAttentionWrapper):
    def forward(self, x):
        outputs = []
        for head in self.heads:
            x = head(x)  # each head reads the previous head's output
            outputs.append(x)
        return torch.cat(outputs, dim=-1)


class SecondHeadReadsReversedTokens(MultiHeadAttentionWrapper):
    def forward(self, x):
        return torch.cat([self.heads[0](x), self.heads[1](x.flip(1))], dim=-1)


class SecondHeadReadsResidual(MultiHeadAttentionWrapper):
    def forward(self, x):
        first = self.heads[0](x)
        return torch.cat([first, self.heads[1](x + first)], dim=-1)


def joined_with(join):
    class Joined(MultiHeadAttentionWrapper):
        def forward(self, x):
            return join([head(x) for head in self.heads])

    return Joined


def joining(join, d_out=1):
    """A wrapper that joins its heads' outputs with ``join``, not ``torch.cat(..., dim=-1)``."""
    return build(d_out=d_out, cls=joined_with(join))


class OneHeadTwice(MultiHeadAttentionWrapper):
    def __init__(self, *args):
        super().__init__(*args)
        self.heads = nn.ModuleList([self.heads[0]] * len(self.heads))


class CopiedHead(MultiHeadAttentionWrapper):
    def __init__(self, *args):
        super().__init__(*args)
        self.heads[1] = copy.deepcopy(self.heads[0])


class SharedWeights(MultiHeadAttentionWrapper):
    def __init__(self, *args):
        super().__init__(*args)
        for name in ("W_query", "W_key", "W_value"):
            setattr(self.heads[1], name, getattr(self.heads[0], name))


def with_heads(head_cls, d_out=1, d_in=3, context_length=6):
    wrapper = build(d_out=d_out, d_in=d_in, context_length=context_length)
    torch.manual_seed(7)
    wrapper.heads = nn.ModuleList([head_cls(d_in, d_out, context_length, 0.0) for _ in range(2)])
    return wrapper


def head_computing(scores_to_weights, *, keep_columns=None, slice_queries_and_keys=None):
    """A head whose forward is CausalAttention's with a different step from scores to weights."""

    class Head(CausalAttention):
        def forward(self, x):
            queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
            if slice_queries_and_keys is not None:
                queries = queries[..., slice_queries_and_keys]
                keys = keys[..., slice_queries_and_keys]
            scores = queries @ keys.transpose(1, 2)
            context = scores_to_weights(self, scores, keys) @ values
            return context if keep_columns is None else context[..., keep_columns]

    return Head


def causal(self, scores):
    n = scores.shape[-1]
    return scores.masked_fill(self.mask[:n, :n], -torch.inf)


UNMASKED = head_computing(lambda self, s, k: torch.softmax(s / k.shape[-1] ** 0.5, dim=-1))
PEEKS_ONE_AHEAD = head_computing(
    lambda self, s, k: torch.softmax(
        s.masked_fill(torch.ones_like(s).triu(2).bool(), -torch.inf) / k.shape[-1] ** 0.5, dim=-1
    )
)
SCALED_BY_D_IN = head_computing(
    lambda self, s, k: torch.softmax(causal(self, s) / self.W_query.in_features**0.5, dim=-1)
)
UNSCALED = head_computing(lambda self, s, k: torch.softmax(causal(self, s) * 4.0, dim=-1))
FIRST_COLUMN_ONLY = head_computing(
    lambda self, s, k: torch.softmax(causal(self, s) / k.shape[-1] ** 0.5, dim=-1),
    keep_columns=slice(0, 1),
)


class BrokenHead(CausalAttention):
    def forward(self, x):
        return self.W_queries(x)  # a typo: AttributeError


QUERIES_AND_KEYS_SLICED = head_computing(
    lambda self, s, k: torch.softmax(causal(self, s) / k.shape[-1] ** 0.5, dim=-1),
    slice_queries_and_keys=slice(0, 1),
)
KEYS_AND_QUERIES_CUT_TO_LAST = head_computing(
    lambda self, s, k: torch.softmax(causal(self, s) / 3**0.5, dim=-1),
    slice_queries_and_keys=slice(1, 3),
)
SCALED_BY_TOTAL_WIDTH = head_computing(
    lambda self, s, k: torch.softmax(causal(self, s) / 2**0.5, dim=-1)
)
DIVIDED_BY_D_OUT = head_computing(
    lambda self, s, k: torch.softmax(causal(self, s) / k.shape[-1], dim=-1)
)


def with_projections(wrapper, **widths):
    """The wrapper with some projections of every head replaced by narrower ones."""
    torch.manual_seed(3)
    for head in wrapper.heads:
        for name, width in widths.items():
            setattr(head, name, nn.Linear(head.W_query.in_features, width, bias=False))
    return wrapper


def heads_of_widths(*widths):
    wrapper = build(d_out=widths[0], num_heads=len(widths))
    torch.manual_seed(7)
    wrapper.heads = nn.ModuleList([CausalAttention(3, w, 6, 0.0) for w in widths])
    return wrapper


def weights_cut_to_one_row(wrapper):
    """Every projection's weight sliced to its first row, its layer left as it was."""
    for head in wrapper.heads:
        for name in ("W_query", "W_key", "W_value"):
            layer = getattr(head, name)
            layer.weight = nn.Parameter(layer.weight.detach()[:1].clone())
    return wrapper


def zero_masks(wrapper):
    for head in wrapper.heads:
        head.mask.zero_()
    return wrapper


class Raises(MultiHeadAttentionWrapper):
    def forward(self, x):
        raise ValueError("<b>no</b> & done")


class TypoInForward(MultiHeadAttentionWrapper):
    def forward(self, x):
        return torch.cat([head(x) for head in self.head], dim=-1)


class NoReturn(MultiHeadAttentionWrapper):
    def forward(self, x):
        torch.cat([head(x) for head in self.heads], dim=-1)


class PrintsInsteadOfReturning(MultiHeadAttentionWrapper):
    def forward(self, x):
        print(end="")  # the reader meant to show the result
        return None


class ReturnsDict(MultiHeadAttentionWrapper):
    def forward(self, x):
        return {f"head {h}": head(x) for h, head in enumerate(self.heads)}


class ReturnsNumpy(MultiHeadAttentionWrapper):
    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1).numpy()


class WithProjection(MultiHeadAttentionWrapper):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.out_proj = nn.Linear(num_heads * d_out, 2)

    def forward(self, x):
        return self.out_proj(super().forward(x))


class FixedMix(MultiHeadAttentionWrapper):
    def forward(self, x):
        joined = super().forward(x)
        return joined @ torch.tensor([[1.0, 0.5], [0.0, 1.0], [0.3, 0.0], [0.0, -1.0]])


class NotAWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.ModuleList([CausalAttention(3, 1, 6, 0.0) for _ in range(2)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.attention], dim=-1)


def heads_replaced_by(make):
    wrapper = build()
    wrapper.heads = nn.ModuleList([make() for _ in range(2)])
    return wrapper


class EmptySubclass(MultiHeadAttentionWrapper):
    pass


class Rewritten(MultiHeadAttentionWrapper):
    def forward(self, x):
        outputs = []
        for head in self.heads:
            outputs.append(head(x.clone()))
        return torch.concat(outputs, dim=2)


class SdpaHead(CausalAttention):
    """A head written with the fused kernel: the same causal attention, computed another way."""

    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        return torch.nn.functional.scaled_dot_product_attention(
            queries, keys, values, is_causal=True
        )


class DstackWrapper(MultiHeadAttentionWrapper):
    def forward(self, x):
        return torch.dstack([head(x) for head in self.heads])


def with_dropout():
    torch.manual_seed(0)
    return MultiHeadAttentionWrapper(3, 1, 6, 0.5, num_heads=2)


PASSES = "Each head reads the same x and computes"
CASES = [
    # Correct wrappers, in every style a reader writes them.
    (TWO, "correct", lambda: solution(two_dim_output, "my_wrapper"), "2 × 1"),
    (TWELVE, "correct", lambda: solution(twelve_wide_output, "my_wrapper12"), "4 × 3"),
    (TWO, "correct", lambda: build(), "each with W_query, W_key and W_value"),
    (TWO, "correct", lambda: build(seed=0, qkv_bias=True, context_length=7), PASSES),
    (TWO, "correct", lambda: build(seed=2024, context_length=1024), PASSES),
    (TWO, "correct", lambda: build(seed=1, qkv_bias=True, context_length=1024), PASSES),
    (TWO, "correct", lambda: build(cls=DstackWrapper, qkv_bias=True), PASSES),
    (TWO, "correct", lambda: with_heads(SdpaHead), PASSES),
    (TWO, "correct", lambda: build(cls=Rewritten), PASSES),
    (TWO, "correct", with_dropout, PASSES),
    (TWELVE, "correct", lambda: build(d_out=3, num_heads=4), "Four heads, each with W_query"),
    (TWELVE, "correct", lambda: build(d_out=3, num_heads=4, qkv_bias=True, seed=4), "12-dim"),
    (TWELVE, "correct", lambda: build(d_out=3, num_heads=4, cls=EmptySubclass), "4 × 3"),
    # Mistakes, each with at least two implementations.
    (
        TWO,
        "not a module",
        lambda: MultiHeadAttentionWrapper,
        "class MultiHeadAttentionWrapper itself",
    ),
    (TWO, "not a module", lambda: CausalAttention, "class CausalAttention itself"),
    (
        TWO,
        "not a module",
        lambda: build(d_out=2)(example_batch()),
        "check_two_dim_output(my_wrapper(batch))",
    ),
    (TWO, "not a module", lambda: torch.zeros(2, 6, 2), "given a torch.Tensor"),
    (TWO, "not a module", lambda: None, "given None"),
    (TWO, "not a module", lambda: "d_out=1", "given a str"),
    (TWO, "not a module", lambda: torch.Size([2, 6, 2]), "given a torch.Size"),
    (TWO, "not a module", lambda: list(build().heads), "given a list"),
    (
        TWO,
        "not the wrapper",
        lambda: build(d_out=2, cls=MultiHeadAttention),
        "Your MultiHeadAttention does not have the heads",
    ),
    (
        TWO,
        "not the wrapper",
        lambda: build(d_out=4, cls=MultiHeadAttention, qkv_bias=True),
        "with 2 heads",
    ),
    (
        TWO,
        "not the wrapper",
        lambda: CausalAttention(3, 2, 6, 0.0),
        "Your CausalAttention does not have",
    ),
    (TWO, "not the wrapper", lambda: CausalAttention(3, 1, 6, 0.0, qkv_bias=True), "with 2 heads"),
    (TWO, "not the wrapper", lambda: nn.Linear(3, 2), "Your Linear does not have the heads"),
    (TWO, "not the wrapper", lambda: NotAWrapper(), "change only the arguments"),
    (
        TWO,
        "not the wrapper",
        lambda: heads_replaced_by(partial(nn.Linear, 3, 1)),
        "a list self.heads of attention heads",
    ),
    (
        TWO,
        "not the wrapper",
        lambda: heads_replaced_by(nn.Identity),
        "each with W_query, W_key and W_value",
    ),
    (
        TWO,
        "num_heads changed",
        lambda: build(d_out=2, num_heads=1),
        "has 1 head, but the exercise asks for 2",
    ),
    (TWO, "num_heads changed", lambda: build(d_out=1, num_heads=3), "has 3 heads"),
    (
        TWO,
        "one head object repeated",
        lambda: build(cls=OneHeadTwice),
        "as [head] * num_heads makes",
    ),
    (TWO, "one head object repeated", lambda: build(cls=CopiedHead), "or a copy"),
    (
        TWO,
        "one head object repeated",
        lambda: build(cls=SharedWeights, qkv_bias=True),
        "shared layers",
    ),
    (
        TWO,
        "the input's arguments changed",
        lambda: build(d_out=2, context_length=2),
        "context_length=2",
    ),
    (
        TWO,
        "the input's arguments changed",
        lambda: build(d_out=1, context_length=5),
        "context_length at 6 (or more)",
    ),
    (
        TWO,
        "heads not given the same x",
        lambda: build(cls=Pipeline),
        "a previous head's output (as in a pipeline)",
    ),
    (
        TWO,
        "heads not given the same x",
        lambda: build(cls=SecondHeadReadsReversedTokens),
        "Head 2 was not given the wrapper's input x",
    ),
    (
        TWO,
        "heads not given the same x",
        lambda: build(cls=SecondHeadReadsResidual),
        "but something else",
    ),
    (TWO, "not the heads side by side", lambda: zero_masks(build()), "a head's mask"),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(UNMASKED),
        "Keep the class and its heads as built",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(PEEKS_ONE_AHEAD),
        "mask, scale or columns changed",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: joining(lambda outs: torch.cat([o[..., :1] for o in outs], -1), d_out=2),
        "values thrown away",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(FIRST_COLUMN_ONLY, d_out=2),
        "d_out is each head's width",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: joining(lambda outs: torch.cat(outs, -1)[..., 2:4], d_out=3),
        "values thrown away",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(SCALED_BY_D_IN),
        "scale or columns",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(QUERIES_AND_KEYS_SLICED, d_out=2),
        "columns changed",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(KEYS_AND_QUERIES_CUT_TO_LAST, d_out=3),
        "columns changed",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(SCALED_BY_TOTAL_WIDTH),
        "a head's mask, scale",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(DIVIDED_BY_D_OUT, d_out=2),
        "scale or columns changed",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: with_heads(UNSCALED),
        "Keep the class and its heads as built",
    ),
    (
        TWO,
        "forward raises",
        lambda: with_heads(BrokenHead),
        "raised AttributeError",
    ),
    (
        TWO,
        "not the wrapper",
        lambda: with_projections(build(d_out=2), W_value=1),
        "of one width",
    ),
    (
        TWO,
        "not the wrapper",
        lambda: with_projections(build(d_out=4), W_value=1),
        "change only the arguments of the call",
    ),
    (
        TWO,
        "not the wrapper",
        lambda: heads_of_widths(1, 2),
        "of one width",
    ),
    (
        TWO,
        "not the wrapper",
        lambda: weights_cut_to_one_row(build(d_out=2)),
        "W_query, W_key and W_value of one width",
    ),
    (TWO, "not a module", lambda: mha, "given a module"),
    (TWO, "not a module", lambda: np, "given a module"),
    (
        TWO,
        "forward raises",
        lambda: joining(partial(torch.cat, dim=3)),
        "raised IndexError: Dimension out of range",
    ),
    (TWO, "forward raises", lambda: build(cls=Raises), "raised ValueError: <b>no</b> & done"),
    (TWO, "forward raises", lambda: build(cls=TypoInForward), "raised AttributeError"),
    (TWO, "returns no tensor", lambda: build(cls=NoReturn), "forget to return"),
    (TWO, "returns no tensor", lambda: build(cls=PrintsInsteadOfReturning), "returned None"),
    (TWO, "returns no tensor", lambda: joining(list), "returned a list, not a tensor"),
    (TWO, "returns no tensor", lambda: joining(tuple), "returned a tuple"),
    (TWO, "returns no tensor", lambda: build(cls=ReturnsDict), "returned a dict"),
    (TWO, "returns no tensor", lambda: build(cls=ReturnsNumpy), "returned a numpy.ndarray"),
    (
        TWO,
        "joined on the wrong axis",
        lambda: joining(partial(torch.stack, dim=-1)),
        "shape (2, 6, 1, 2)",
    ),
    (TWO, "joined on the wrong axis", lambda: joining(torch.stack), "torch.stack"),
    (
        TWO,
        "joined on the wrong axis",
        lambda: joining(partial(torch.stack, dim=2), d_out=2),
        "(2, 6, 2, 2)",
    ),
    (
        TWO,
        "joined on the wrong axis",
        lambda: joining(partial(torch.cat, dim=1)),
        "dim=1 makes them extra",
    ),
    (TWO, "joined on the wrong axis", lambda: joining(torch.cat), "wrong axis"),
    (
        TWO,
        "joined on the wrong axis",
        lambda: joining(partial(torch.cat, dim=-2), d_out=2),
        "shape (2, 12, 2)",
    ),
    (TWO, "heads added instead of concatenated", lambda: joining(sum, d_out=2), "You added"),
    (
        TWO,
        "heads added instead of concatenated",
        lambda: joining(lambda outs: torch.stack(outs).mean(0), d_out=2),
        "You averaged",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: build(d_out=2, cls=WithProjection),
        "chapter 3's learned out_proj",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: build(d_out=1, cls=WithProjection, qkv_bias=True),
        "d_out is each head's width",
    ),
    (
        TWO,
        "not the heads side by side",
        lambda: build(d_out=2, cls=FixedMix),
        "mixed after torch.cat (a weighted mix",
    ),
    (
        TWO,
        "the starting wrapper",
        lambda: build(d_out=2),
        "This is the starting wrapper, unchanged",
    ),
    (
        TWO,
        "the starting wrapper",
        lambda: build(d_out=2, qkv_bias=True, seed=5),
        "two_dim_output.hint(1)",
    ),
    (
        TWO,
        "the input's arguments changed",
        lambda: build(d_out=1, d_in=2),
        "tokens 2 values wide (d_in=2)",
    ),
    (
        TWO,
        "the input's arguments changed",
        lambda: build(d_out=2, d_in=4, context_length=8),
        "Keep d_in=3",
    ),
    (
        TWO,
        "heads' columns reordered",
        lambda: joining(lambda outs: torch.cat(outs[::-1], -1)),
        "not in head order (reversed",
    ),
    (
        TWO,
        "heads' columns reordered",
        lambda: joining(lambda outs: torch.stack(outs, -1).flatten(-2), d_out=2),
        "or interleaved)",
    ),
    (
        TWO,
        "wrong width",
        lambda: build(d_out=2, context_length=7),
        "d_out is each head's width",
    ),
    (
        TWO,
        "wrong width",
        lambda: build(d_out=2, qkv_bias=True, context_length=9),
        "2 × 2 = 4",
    ),
    (TWO, "wrong width", lambda: build(d_out=3, qkv_bias=True, seed=5), "2 × 3 = 6"),
    (TWO, "wrong width", lambda: build(d_out=4), "How many values must each of the 2 heads give?"),
    (
        TWELVE,
        "num_heads changed",
        lambda: build(d_out=2, num_heads=3),
        "has 3 heads, but the exercise asks for 4",
    ),
    (
        TWELVE,
        "num_heads changed",
        lambda: build(d_out=1),
        "has 2 heads, but the exercise asks for 4",
    ),
    (
        TWELVE,
        "num_heads changed",
        lambda: build(d_out=4, num_heads=3, qkv_bias=True, seed=5),
        "set each head's width with d_out",
    ),
    (
        TWELVE,
        "not the wrapper",
        lambda: heads_of_widths(1, 2, 4, 5),
        "of one width",
    ),
    (
        TWELVE,
        "not the wrapper",
        lambda: with_projections(build(d_out=4, num_heads=4), W_value=3),
        "of one width",
    ),
    (
        TWELVE,
        "not the wrapper",
        lambda: with_projections(build(d_out=3, num_heads=4), W_query=1, W_key=1),
        "W_query, W_key and W_value",
    ),
    (
        TWELVE,
        "not the wrapper",
        lambda: weights_cut_to_one_row(build(d_out=3, num_heads=4)),
        "W_query, W_key and W_value of one width",
    ),
    (TWELVE, "not a module", lambda: EmptySubclass, "the class EmptySubclass itself"),
    (TWELVE, "not the wrapper", lambda: build(12, 4, cls=MultiHeadAttention), "4 heads"),
    (TWELVE, "the starting wrapper", lambda: build(d_out=2), ("?", "twelve_wide_output.hint(1)")),
    (TWELVE, "the starting wrapper", lambda: build(d_out=2, cls=EmptySubclass), "unchanged"),
    (TWELVE, "wrong width", lambda: build(12, 4), "d_out is each head's width"),
    (TWELVE, "num_heads changed", lambda: build(d_out=6, num_heads=2), "asks for 4"),
    (
        TWELVE,
        "num_heads changed",
        lambda: build(
            d_out=2, num_heads=3, cls=joined_with(lambda outs: torch.cat(outs[::-1], -1))
        ),
        "asks for 4",
    ),
    (TWELVE, "wrong width", lambda: build(d_out=4, num_heads=4), "not 12"),
    (TWELVE, "wrong width", lambda: build(d_out=6, num_heads=4), "num_heads × d_out"),
    (TWELVE, "wrong width", lambda: build(d_out=1, num_heads=4), "twelve_wide_output.hint(1)"),
    (
        TWELVE,
        "heads' columns reordered",
        lambda: build(3, 4, cls=joined_with(lambda outs: torch.cat(outs[::-1], -1))),
        "not in head order (reversed",
    ),
    (TWO, "wrong width", lambda: build(d_out=5), ("?", "two_dim_output.hint(1)")),
    (TWO, "the input's arguments changed", lambda: build(d_in=8), "batch shape (2, 6, 3)"),
    (TWO, "num_heads changed", lambda: build(d_out=2, num_heads=3), "has 3 heads"),
    (TWO, "not the heads side by side", lambda: with_heads(UNSCALED), "scale or columns"),
]


def named(check, answer):
    """The name of the first catalogued mistake ``check`` finds in ``answer``, or "correct"."""
    mistake, _ = diagnosis(answer, TWO_DIM if check is TWO else TWELVE_WIDE)
    return mistake.name if mistake else "correct"


@pytest.mark.parametrize(
    ("check", "verdict", "answer", "words"),
    CASES,
    ids=[f"{c[0].__name__[6:9]}-{c[1]}-{i}" for i, c in enumerate(CASES)],
)
def test_the_check_gives_each_answer_its_verdict(check, verdict, answer, words):
    answer = answer()
    result = check(answer)
    assert (result.passed, named(check, answer)) == (verdict == "correct", verdict)
    for word in (words,) if isinstance(words, str) else words:
        assert word in result.feedback, result.feedback
    if not result.passed:  # asks, never tells: no failing feedback gives the answer away
        told = r"d_out\s*=\s*1\b" if check is TWO else r"d_out\s*=\s*3(?!\s*×)"
        assert not re.search(told, result.feedback) and " / " not in result.feedback
        assert "change d_out" not in result.feedback and "d_out to" not in result.feedback
        assert "Traceback" not in result.feedback


def test_every_catalogued_mistake_has_two_cases():
    names = [verdict for _, verdict, _, _ in CASES]
    assert {m.name for m in MISTAKES} | {"correct"} == set(names)
    assert min(names.count(name) for name in set(names)) >= 2


def test_the_check_leaves_the_answer_and_the_random_numbers_as_it_found_them():
    for answer in (build(), build(d_out=2), build(cls=Raises), build(cls=Pipeline)):
        answer.train()
        answer.heads[0].eval()
        torch.manual_seed(123)
        state = torch.get_rng_state()
        check_two_dim_output(answer)
        assert torch.equal(torch.get_rng_state(), state)
        assert answer.training and answer.heads[1].training and not answer.heads[0].training
        assert all(not head._forward_pre_hooks for head in answer.heads)


ODD_MODULES = st.sampled_from(
    [
        nn.Linear(3, 2),
        nn.ReLU(),
        nn.Sequential(),
        nn.ModuleList(),
        nn.ModuleDict(),
        nn.LayerNorm(3),
        torch.nn.Embedding(4, 3),
        np.zeros(3),
        MultiHeadAttentionWrapper,
        object(),
    ]
)
ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
    st.builds(torch.zeros, st.integers(0, 3), st.integers(0, 3)),
    ODD_MODULES,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANYTHING)
def test_the_check_never_raises_on_garbage(answer):
    for check in (TWO, TWELVE):
        result = check.__wrapped__(answer)  # without the safety net
        assert not result.passed and result.feedback
