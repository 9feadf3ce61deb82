"""Chapter 2's check: it accepts every correct wrapper and names each catalogued mistake."""

import copy
import re
from collections import Counter
from functools import partial

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import mha
from mha import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper, example_batch
from mha.checks import (
    TWO_DIM_MISTAKES,
    TwoDimAttempt,
    check_twelve_wide_output,
    check_two_dim_output,
    first_mistake,
    twelve_wide_output,
    two_dim_output,
)
from mha.checks.two_dim import TWELVE_WIDE, TWO_DIM


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


def diagnosis(answer, target=TWO_DIM):
    mistake = first_mistake(TWO_DIM_MISTAKES, TwoDimAttempt(answer, target))
    return mistake.name if mistake else None


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


MISTAKES = [
    # (expected mistake, reader's answer, a phrase the feedback must contain)
    (
        "passed the class",
        lambda: MultiHeadAttentionWrapper,
        "class MultiHeadAttentionWrapper itself",
    ),
    ("passed the class", lambda: CausalAttention, "class CausalAttention itself"),
    (
        "passed a tensor",
        lambda: build(d_out=2)(example_batch()),
        "check_two_dim_output(my_wrapper(batch))",
    ),
    ("passed a tensor", lambda: torch.zeros(2, 6, 2), "shape (2, 6, 2)"),
    ("not a module", lambda: None, "given None"),
    ("not a module", lambda: "d_out=1", "given a str"),
    ("not a module", lambda: torch.Size([2, 6, 2]), "given a torch.Size"),
    ("not a module", lambda: list(build().heads), "given a list"),
    ("the weight-split class", lambda: build(d_out=2, cls=MultiHeadAttention), "weight splits"),
    (
        "the weight-split class",
        lambda: build(d_out=4, cls=MultiHeadAttention, qkv_bias=True),
        "its d_out is the width",
    ),
    (
        "a single head",
        lambda: CausalAttention(3, 2, 6, 0.0),
        "single attention head (a CausalAttention)",
    ),
    ("a single head", lambda: CausalAttention(3, 1, 6, 0.0, qkv_bias=True), "with 2 heads"),
    ("not the wrapper", lambda: nn.Linear(3, 2), "A Linear has no list of heads"),
    ("not the wrapper", lambda: NotAWrapper(), "Keep the class as it is"),
    (
        "a head that is not an attention head",
        lambda: heads_replaced_by(partial(nn.Linear, 3, 1)),
        "Head 1 is a Linear",
    ),
    (
        "a head that is not an attention head",
        lambda: heads_replaced_by(nn.Identity),
        "Each head's role must stay",
    ),
    (
        "num_heads changed",
        lambda: build(d_out=2, num_heads=1),
        "has 1 head, but the exercise asks for 2",
    ),
    ("num_heads changed", lambda: build(d_out=1, num_heads=3), "has 3 heads"),
    (
        "one head object repeated",
        lambda: build(cls=OneHeadTwice),
        "same object, as [head] * num_heads makes",
    ),
    ("one head object repeated", lambda: build(cls=CopiedHead), "one is a copy of the other"),
    (
        "one head object repeated",
        lambda: build(cls=SharedWeights, qkv_bias=True),
        "very same weight tensors",
    ),
    ("context_length too short", lambda: build(d_out=2, context_length=2), "context_length=2"),
    ("context_length too short", lambda: build(d_out=1, context_length=5), "keep it at 6"),
    (
        "heads not given the same x",
        lambda: build(cls=Pipeline),
        "Head 2 was not given the wrapper's input x: it received head 1's",
    ),
    (
        "heads not given the same x",
        lambda: build(cls=SecondHeadReadsReversedTokens),
        "not as a pipeline",
    ),
    (
        "heads not given the same x",
        lambda: build(cls=SecondHeadReadsResidual),
        "another tensor, of shape (2, 6, 3)",
    ),
    ("a head attends to later tokens", lambda: zero_masks(build()), "causal mask was removed"),
    (
        "a head attends to later tokens",
        lambda: with_heads(UNMASKED),
        "Each head's role must stay as it was",
    ),
    (
        "a head attends to later tokens",
        lambda: with_heads(PEEKS_ONE_AHEAD),
        "Head 1 lets tokens attend to later",
    ),
    (
        "columns thrown away",
        lambda: joining(lambda outs: torch.cat([o[..., :1] for o in outs], -1), d_out=2),
        "each head computes 2",
    ),
    (
        "columns thrown away",
        lambda: with_heads(FIRST_COLUMN_ONLY, d_out=2),
        "d_out is each head's width",
    ),
    (
        "columns thrown away",
        lambda: joining(lambda outs: torch.cat(outs, -1)[..., 2:4], d_out=3),
        "3 values",
    ),
    (
        "a head's computation changed",
        lambda: with_heads(SCALED_BY_D_IN),
        "divided by √d_in = √3",
    ),
    (
        "a head's computation changed",
        lambda: with_heads(QUERIES_AND_KEYS_SLICED, d_out=2),
        "cuts its queries and keys to their first 1 of 2 columns",
    ),
    (
        "a head's computation changed",
        lambda: with_heads(KEYS_AND_QUERIES_CUT_TO_LAST, d_out=3),
        "to their last 2 of 3 columns",
    ),
    (
        "a head's computation changed",
        lambda: with_heads(SCALED_BY_TOTAL_WIDTH),
        "divided by √2, the square root of the whole output's width",
    ),
    (
        "a head's computation changed",
        lambda: with_heads(DIVIDED_BY_D_OUT, d_out=2),
        "divided by d_out = 2, where causal attention divides them by √d_out = √2",
    ),
    (
        "a head's computation changed",
        lambda: with_heads(UNSCALED),
        "Each head's role must stay as it was",
    ),
    ("a head's computation changed", lambda: with_heads(BrokenHead), "it raised AttributeError"),
    (
        "a projection reshaped after the call",
        lambda: with_projections(build(d_out=2), W_value=1),
        "W_query, W_key and W_value are 2, 2 and 1 values wide",
    ),
    (
        "a projection reshaped after the call",
        lambda: with_projections(build(d_out=4), W_value=1),
        "the heads were changed after the call",
    ),
    (
        "a projection reshaped after the call",
        lambda: heads_of_widths(1, 2),
        "heads 1 and 2 are 1 and 2 values wide",
    ),
    (
        "a projection reshaped after the call",
        lambda: weights_cut_to_one_row(build(d_out=2)),
        "says out_features=2, but its weight has 1 row",
    ),
    ("passed a Python module", lambda: mha, "the Python module mha"),
    ("passed a Python module", lambda: np, "import numpy binds that name"),
    (
        "forward raises",
        lambda: joining(partial(torch.cat, dim=3)),
        "raised IndexError: Dimension out of range",
    ),
    ("forward raises", lambda: build(cls=Raises), "raised ValueError: <b>no</b> & done"),
    ("forward raises", lambda: build(cls=TypoInForward), "raised AttributeError"),
    ("returns None", lambda: build(cls=NoReturn), "forget to return"),
    ("returns None", lambda: build(cls=PrintsInsteadOfReturning), "returned None"),
    ("returns a list", lambda: joining(list), "a list of 2 tensors"),
    ("returns a list", lambda: joining(tuple), "a tuple of 2 tensors"),
    ("returns something else", lambda: build(cls=ReturnsDict), "returned a dict"),
    ("returns something else", lambda: build(cls=ReturnsNumpy), "returned a numpy.ndarray"),
    (
        "stacked instead of concatenated",
        lambda: joining(partial(torch.stack, dim=-1)),
        "shape (2, 6, 1, 2)",
    ),
    ("stacked instead of concatenated", lambda: joining(torch.stack), "torch.stack"),
    (
        "stacked instead of concatenated",
        lambda: joining(partial(torch.stack, dim=2), d_out=2),
        "(2, 6, 2, 2)",
    ),
    (
        "concatenated on the wrong axis",
        lambda: joining(partial(torch.cat, dim=1)),
        "token axis (dim=1)",
    ),
    ("concatenated on the wrong axis", lambda: joining(torch.cat), "batch axis (dim=0)"),
    (
        "concatenated on the wrong axis",
        lambda: joining(partial(torch.cat, dim=-2), d_out=2),
        "shape (2, 12, 2)",
    ),
    ("heads added instead of concatenated", lambda: joining(sum, d_out=2), "You added"),
    (
        "heads added instead of concatenated",
        lambda: joining(lambda outs: torch.stack(outs).mean(0), d_out=2),
        "You averaged",
    ),
    (
        "heads mixed by a projection",
        lambda: build(d_out=2, cls=WithProjection),
        "learned mix of heads",
    ),
    (
        "heads mixed by a projection",
        lambda: build(d_out=1, cls=WithProjection, qkv_bias=True),
        "choose each head's width with d_out",
    ),
    ("heads mixed by a projection", lambda: build(d_out=2, cls=FixedMix), "weighted mix"),
    ("the starting wrapper", lambda: build(d_out=2), "This is the starting wrapper, unchanged"),
    (
        "the starting wrapper",
        lambda: build(d_out=2, qkv_bias=True, seed=5),
        "two_dim_output.hint(1)",
    ),
    ("d_in changed", lambda: build(d_out=1, d_in=2), "tokens 2 values wide (d_in=2)"),
    ("d_in changed", lambda: build(d_out=2, d_in=4, context_length=8), "keep d_in=3"),
    (
        "heads' columns reordered",
        lambda: joining(lambda outs: torch.cat(outs[::-1], -1)),
        "but reversed",
    ),
    (
        "heads' columns reordered",
        lambda: joining(lambda outs: torch.stack(outs, -1).flatten(-2), d_out=2),
        "but interleaved",
    ),
    (
        "d_out taken as the total width",
        lambda: build(d_out=2, context_length=7),
        "the total width you want",
    ),
    (
        "d_out taken as the total width",
        lambda: build(d_out=2, qkv_bias=True, context_length=9),
        "2 × 2 = 4",
    ),
    ("wrong width", lambda: build(d_out=3, qkv_bias=True, seed=5), "2 × 3 = 6"),
    ("wrong width", lambda: build(d_out=4), "how many values must each head give?"),
]


@pytest.mark.parametrize(
    "expected, answer, phrase", MISTAKES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MISTAKES)]
)
def test_each_mistake_is_rejected_and_named(expected, answer, phrase):
    answer = answer()
    result = check_two_dim_output(answer)
    assert not result.passed
    assert diagnosis(answer) == expected
    assert phrase in result.feedback


#: Mistakes only the second exercise (four heads, twelve values wide) can make: an answer copied
#: from a configuration the book builds before it.
TWELVE_WIDE_MISTAKES = [
    (
        "an answer from earlier in the book",
        lambda: build(d_out=2, num_heads=3),
        "This is chapter 1's running example: 3 heads of width 2",
    ),
    (
        "an answer from earlier in the book",
        lambda: build(d_out=1),
        "This is the first practice's answer: 2 heads of width 1",
    ),
    (
        "an answer from earlier in the book",
        lambda: build(d_out=4, num_heads=3, qkv_bias=True, seed=5),
        "the answer to chapter 1's question about d_out: 3 heads of width 4",
    ),
]


@pytest.mark.parametrize(
    "expected, answer, phrase",
    TWELVE_WIDE_MISTAKES,
    ids=[f"{m[0]}-{i}" for i, m in enumerate(TWELVE_WIDE_MISTAKES)],
)
def test_each_mistake_of_the_second_exercise_is_rejected_and_named(expected, answer, phrase):
    answer = answer()
    result = check_twelve_wide_output(answer)
    assert not result.passed
    assert diagnosis(answer, TWELVE_WIDE) == expected
    assert phrase in result.feedback, result.feedback


@pytest.mark.parametrize("answer", [lambda: build(d_out=2, num_heads=3), lambda: build(d_out=1)])
def test_an_earlier_answer_handed_in_again_is_named_and_the_reader_asked_not_told(answer):
    """Chapter 1's running example and the first practice's answer fail the second practice,
    with feedback that says where the wrapper comes from, why its width is what it is, and asks
    for the step the reader has to take, without taking it."""
    feedback = check_twelve_wide_output(answer()).feedback
    assert "num_heads × d_out" in feedback and "12 values from 4 heads" in feedback
    assert "?" in feedback and "twelve_wide_output.hint(1)" in feedback
    assert "12 / 4" not in feedback
    assert not re.search(r"d_out\s*=\s*3(?!\s*×)", feedback)  # d_out=3, but not "d_out = 3 × 2"


@pytest.mark.parametrize("d_out", [2, 3, 4, 5])
def test_a_wrong_width_is_asked_about_not_answered_in_the_first_exercise(d_out):
    """Any wrong d_out must not earn the answer: the feedback asks and points to the hints."""
    feedback = check_two_dim_output(build(d_out=d_out)).feedback
    assert "?" in feedback and "two_dim_output.hint(1)" in feedback, feedback
    assert "2 / 2" not in feedback and not re.search(r"d_out\s*=\s*1\b", feedback)


@pytest.mark.parametrize("d_out", [1, 2, 4, 6, 12])
def test_a_wrong_width_is_asked_about_not_answered_in_the_second_exercise(d_out):
    feedback = check_twelve_wide_output(build(d_out=d_out, num_heads=4)).feedback
    assert "?" in feedback and "twelve_wide_output.hint(1)" in feedback, feedback
    assert "12 / 4" not in feedback
    assert not re.search(r"d_out\s*=\s*3(?!\s*×)", feedback)  # d_out=3, but not "3 × 4"


def test_the_first_exercise_names_no_earlier_answer():
    """Chapter 1's configurations come before the first practice too, but only the second one
    lists them: the first exercise's feedback for them is unchanged."""
    assert TWO_DIM.earlier == ()
    assert diagnosis(build(d_out=2, num_heads=3)) == "num_heads changed"


def test_an_earlier_configuration_with_a_changed_forward_is_not_called_a_copy():
    answer = build(d_out=2, num_heads=3, cls=joined_with(lambda outs: torch.cat(outs[::-1], -1)))
    assert diagnosis(answer, TWELVE_WIDE) != "an answer from earlier in the book"
    assert not check_twelve_wide_output(answer).passed


def test_every_catalogued_mistake_is_tested_with_at_least_two_implementations():
    tested = Counter(expected for expected, _, _ in MISTAKES + TWELVE_WIDE_MISTAKES)
    assert {m.name for m in TWO_DIM_MISTAKES} == set(tested)
    assert min(tested.values()) >= 2


def test_the_issues_required_mistakes_name_the_heads_role_and_the_width_rule():
    feedback = {name: check_two_dim_output(answer()).feedback for name, answer, _ in MISTAKES}
    for name in ("a head attends to later tokens", "a head's computation changed"):
        assert "Each head's role must stay as it was" in feedback[name]
    assert "num_heads × d_out" in feedback["wrong width"]
    assert "Traceback" not in feedback["forward raises"]


@pytest.mark.parametrize("seed", [0, 1, 123, 2024])
@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("context_length", [6, 7, 1024])
def test_every_correct_wrapper_passes(seed, qkv_bias, context_length):
    result = check_two_dim_output(
        build(d_out=1, seed=seed, qkv_bias=qkv_bias, context_length=context_length)
    )
    assert result.passed, result.feedback


@pytest.mark.parametrize("d_in", [1, 2, 4, 8])
def test_the_wrapper_must_run_on_the_chapters_batch(d_in):
    result = check_two_dim_output(build(d_in=d_in))
    assert not result.passed and "batch shape (2, 6, 3)" in result.feedback


def test_dropout_and_a_rewritten_but_equivalent_forward_still_pass():
    class Rewritten(MultiHeadAttentionWrapper):
        def forward(self, x):
            outputs = []
            for head in self.heads:
                outputs.append(head(x.clone()))
            return torch.concat(outputs, dim=2)

    torch.manual_seed(0)
    assert check_two_dim_output(MultiHeadAttentionWrapper(3, 1, 6, 0.5, num_heads=2)).passed
    assert check_two_dim_output(build(cls=Rewritten)).passed


def test_the_check_restores_every_submodules_mode_and_removes_its_hooks():
    for answer in (build(), build(d_out=2), build(cls=Raises), build(cls=Pipeline)):
        answer.train()
        answer.heads[0].eval()
        check_two_dim_output(answer)
        assert answer.training and answer.heads[1].training and not answer.heads[0].training
        assert all(not head._forward_pre_hooks for head in answer.heads)


def test_the_check_leaves_the_readers_random_numbers_alone():
    wrapper = build()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    check_two_dim_output(wrapper)
    assert torch.equal(torch.get_rng_state(), state)


def test_html_feedback_escapes_the_readers_text():
    html = check_two_dim_output(build(cls=Raises))._repr_html_()
    assert "&lt;b&gt;no&lt;/b&gt; &amp; done" in html
    assert "<b>no</b>" not in html


def test_exercise_gives_hints_in_order_and_the_solution():
    assert two_dim_output.check(build()).passed
    assert not two_dim_output.check(build(d_out=2)).passed
    assert "num_heads × d_out" in two_dim_output.hint(1).text
    assert "d_out is the width of each head" in two_dim_output.hint(3).text
    assert "There are 3 hints" in two_dim_output.hint(4).text
    assert "d_out=1" in two_dim_output.solution().text


@pytest.mark.parametrize(
    "exercise, variable, first_row",
    [
        (two_dim_output, "my_wrapper", [-0.5740, 0.2216]),
        (twelve_wide_output, "my_wrapper12", None),
    ],
)
def test_each_solution_builds_the_wrapper_and_passes_its_check(exercise, variable, first_row):
    namespace = {
        "torch": torch,
        "MultiHeadAttentionWrapper": MultiHeadAttentionWrapper,
        "check_two_dim_output": check_two_dim_output,
        "check_twelve_wide_output": check_twelve_wide_output,
    }
    *body, last = exercise.solution_code.splitlines()
    exec("\n".join(body), namespace)
    assert eval(last, namespace).passed
    if first_row:
        with torch.no_grad():
            row = namespace[variable](example_batch())[0, 0]
        assert [round(v, 4) for v in row.tolist()] == first_row
    assert all(len(line) <= 75 for line in exercise.solution_text.splitlines())


@pytest.mark.parametrize("check", [check_two_dim_output, check_twelve_wide_output])
def test_feedback_on_the_starting_code_asks_instead_of_telling(check):
    feedback = check(build(d_out=2)).feedback
    assert "?" in feedback and ".hint(1)" in feedback
    for fix in ("d_out=1", "d_out=2", "d_out=3", "num_heads=4", "change d_out", "d_out to"):
        assert fix not in feedback


class EmptySubclass(MultiHeadAttentionWrapper):
    pass


TWELVE_WIDE_CASES = [
    (lambda: build(d_out=3, num_heads=4), True, "Four heads, each with W_query, W_key and"),
    (lambda: build(d_out=3, num_heads=4, qkv_bias=True, seed=4), True, "12-dimensional"),
    (lambda: build(d_out=3, num_heads=4, cls=EmptySubclass), True, "4 × 3"),
    # Every head's W_query, W_key and W_value must have the width the arguments give.
    (
        lambda: heads_of_widths(1, 2, 4, 5),
        False,
        "heads 1, 2, 3 and 4 are 1, 2, 4 and 5 values wide",
    ),
    (
        lambda: with_projections(build(d_out=4, num_heads=4), W_value=3),
        False,
        "are 4, 4 and 3 values wide",
    ),
    (
        lambda: with_projections(build(d_out=3, num_heads=4), W_query=1, W_key=1),
        False,
        "are 1, 1 and 3 values wide",
    ),
    (
        lambda: weights_cut_to_one_row(build(d_out=3, num_heads=4)),
        False,
        "says out_features=3, but its weight has 1 row",
    ),
    # The book's classes, an empty subclass and the untouched starting code.
    (lambda: MultiHeadAttentionWrapper, False, "the class MultiHeadAttentionWrapper itself"),
    (lambda: EmptySubclass, False, "the class EmptySubclass itself"),
    (lambda: build(d_out=12, num_heads=4, cls=MultiHeadAttention), False, "weight splits"),
    (lambda: build(d_out=2), False, "This is the starting wrapper"),
    (lambda: build(d_out=2, cls=EmptySubclass), False, "This is the starting wrapper"),
    # Answers copied from earlier in the book.
    (lambda: build(d_out=2, num_heads=3), False, "chapter 1's running example"),
    (lambda: build(d_out=1), False, "the first practice's answer"),
    (lambda: build(d_out=4, num_heads=3), False, "chapter 1's question about d_out"),
    # Wrong arguments and wrong joins.
    (lambda: build(d_out=12, num_heads=4), False, "the total width you want"),
    (lambda: build(d_out=6, num_heads=2), False, "asks for 4"),
    (lambda: build(d_out=4, num_heads=4), False, "not 12"),
    (
        lambda: build(
            d_out=3, num_heads=4, cls=joined_with(lambda outs: torch.cat(outs[::-1], -1))
        ),
        False,
        "but reversed",
    ),
]


@pytest.mark.parametrize("answer, passed, phrase", TWELVE_WIDE_CASES)
def test_the_second_exercise_asks_for_four_heads_twelve_values_wide(answer, passed, phrase):
    result = check_twelve_wide_output(answer())
    assert result.passed == passed and phrase in result.feedback, result.feedback


# --- the check never raises ------------------------------------------------------------------

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
def test_the_check_never_raises_on_arbitrary_objects(answer):
    result = check_two_dim_output.__wrapped__(answer)  # without the safety net
    assert not result.passed and result.feedback


@settings(max_examples=25, deadline=None)
@given(
    d_in=st.integers(2, 4),
    d_out=st.integers(1, 3),
    context_length=st.integers(1, 8),
    num_heads=st.integers(1, 3),
    qkv_bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_check_passes_exactly_the_wrappers_with_two_one_wide_heads(
    d_in, d_out, context_length, num_heads, qkv_bias, seed
):
    wrapper = build(d_out, num_heads, context_length, qkv_bias, seed, d_in=d_in)
    result = check_two_dim_output.__wrapped__(wrapper)
    expected = d_out == 1 and num_heads == 2 and context_length >= 6 and d_in == 3
    assert result.passed == expected
    assert "could not run" not in result.feedback


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


@pytest.mark.parametrize(
    "answer",
    [
        lambda: build(),
        lambda: build(cls=DstackWrapper, qkv_bias=True),
        lambda: with_heads(SdpaHead),
    ],
    ids=["the book's forward", "dstack", "heads with scaled_dot_product_attention"],
)
def test_correct_wrappers_written_in_three_styles_pass(answer):
    result = check_two_dim_output(answer())
    assert result.passed, result.feedback


def test_a_change_to_a_head_the_check_cannot_name_is_described_without_a_guess():
    feedback = check_two_dim_output(with_heads(UNSCALED)).feedback
    assert "differs from the softmax of its own queries and keys" in feedback
    assert "perhaps" not in feedback and "scaling" not in feedback


@pytest.mark.parametrize("check", [check_two_dim_output, check_twelve_wide_output])
def test_the_success_message_says_what_was_checked(check):
    answer = build(d_out=1) if check is check_two_dim_output else build(d_out=3, num_heads=4)
    result = check(answer)
    assert result.passed
    assert "each with W_query, W_key and W_value" in result.feedback
    assert "exactly as before" not in result.feedback
