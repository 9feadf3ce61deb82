"""Chapter 1's check: a wrapper's forward written from the skeleton.

Correct forwards in several styles pass; each catalogued mistake is rejected with its own
message; the shortcuts (the book's class, an empty subclass, the untouched skeleton, a forward
that hands the work to a book module) fail with feedback that says so.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper
from mha.checks import CheckResult
from mha.checks.wrapper import check_wrapper, sequential_wrapper
from mha.starting import WrapperSkeleton


def with_forward(forward, base=WrapperSkeleton):
    """A subclass of ``base`` whose forward is ``forward``, named after it."""
    return type(forward.__name__, (base,), {"forward": forward})


# --- correct styles -----------------------------------------------------------------------------


def comprehension(self, x):
    return torch.cat([head(x) for head in self.heads], dim=-1)


def loop_on_axis_two(self, x):
    outputs = []
    for head in self.heads:
        outputs.append(head(x))
    return torch.cat(outputs, dim=2)


def dstack(self, x):
    return torch.dstack(tuple(map(lambda head: head(x), self.heads)))


def filled_slices(self, x):
    first = self.heads[0](x)
    width = first.shape[-1]
    out = x.new_zeros(*first.shape[:2], width * len(self.heads))
    out[..., :width] = first
    for h, head in enumerate(self.heads[1:], start=1):
        out[..., h * width : (h + 1) * width] = head(x)
    return out


@pytest.mark.parametrize("forward", [comprehension, loop_on_axis_two, dstack, filled_slices])
def test_every_correct_style_passes(forward):
    result = check_wrapper(with_forward(forward))
    assert isinstance(result, CheckResult) and result.passed, result.feedback


def test_the_exercises_solution_passes_and_is_shown_as_code():
    solution = sequential_wrapper.solution_code
    assert check_wrapper(solution).passed
    assert sequential_wrapper.solution_text.startswith("class MyWrapper(WrapperSkeleton):")
    assert all(len(line) <= 75 for line in sequential_wrapper.solution_text.splitlines())


# --- mistakes -----------------------------------------------------------------------------------


def chain(self, x):
    outputs = []
    for head in self.heads:
        x = head(x)
        outputs.append(x)
    return torch.cat(outputs, dim=-1)


def chain_from_the_first(self, x):
    out = self.heads[0](x)
    outputs = [out]
    for head in self.heads[1:]:
        out = head(out)  # the previous head's result
        outputs.append(out)
    return torch.cat(outputs, dim=-1)


def reversed_tokens(self, x):
    return torch.cat([head(x.flip(1)) for head in self.heads], dim=-1)


def first_head_for_all(self, x):
    return torch.cat([self.heads[0](x) for _ in self.heads], dim=-1)


class SharedHead(WrapperSkeleton):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        head = CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
        self.heads = nn.ModuleList([head] * num_heads)

    forward = comprehension


def last_head_left_out(self, x):
    return torch.cat([head(x) for head in self.heads[:-1]], dim=-1)


def reversed_heads(self, x):
    return torch.cat([head(x) for head in reversed(self.heads)], dim=-1)


def reversed_output(self, x):
    return torch.cat([head(x) for head in self.heads][::-1], dim=-1)


def interleaved_output(self, x):
    return torch.stack([head(x) for head in self.heads], dim=-1).flatten(-2)


def stacked(self, x):
    return torch.stack([head(x) for head in self.heads], dim=-1)


def token_axis(self, x):
    return torch.cat([head(x) for head in self.heads], dim=1)


def batch_axis(self, x):
    return torch.cat([head(x) for head in self.heads], dim=0)


def returns_list(self, x):
    return [head(x) for head in self.heads]


def returns_none(self, x):
    torch.cat([head(x) for head in self.heads], dim=-1)


def returns_number(self, x):
    return len(self.heads)


def added(self, x):
    return sum(head(x) for head in self.heads)


def axis_three(self, x):
    return torch.cat([head(x) for head in self.heads], dim=3)


def head_forward_methods(self, x):
    return torch.cat([head.forward(x) for head in self.heads], dim=-1)


def own_attention_per_head(self, x):
    """Each head's attention computed from its layers, right, but without calling a head."""
    num_tokens = x.shape[1]
    outputs = []
    for head in self.heads:
        queries, keys, values = head.W_query(x), head.W_key(x), head.W_value(x)
        scores = (queries @ keys.mT).masked_fill(head.mask[:num_tokens, :num_tokens], -torch.inf)
        weights = head.dropout(torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1))
        outputs.append(weights @ values)
    return torch.cat(outputs, dim=-1)


def sdpa_per_head(self, x):
    outputs = []
    for head in self.heads:
        queries, keys, values = head.W_query(x), head.W_key(x), head.W_value(x)
        outputs.append(F.scaled_dot_product_attention(queries, keys, values, is_causal=True))
    return torch.cat(outputs, dim=-1)


def zeros_of_the_right_shape(self, x):
    width = sum(head.W_value.out_features for head in self.heads)
    return x.new_zeros(*x.shape[:2], width)


def list_called(self, x):
    return torch.cat(self.heads(x), dim=-1)


class BuildsNoHeads(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.single = CausalAttention(d_in, d_out * num_heads, context_length, dropout)

    def forward(self, x):
        return self.single(x)


class RenamedArguments(WrapperSkeleton):
    def __init__(self, d_in, d_out, context_len, dropout, n_heads):
        super().__init__(d_in, d_out, context_len, dropout, n_heads)


# --- shortcuts ----------------------------------------------------------------------------------


class Empty(WrapperSkeleton):
    pass


class BookSubclass(MultiHeadAttentionWrapper):
    pass


def calls_super(self, x):
    return super(type(self), self).forward(x)


def builds_a_book_wrapper(self, x):
    book = MultiHeadAttentionWrapper(x.shape[-1], 2, 6, 0.0, len(self.heads))
    book.heads = self.heads
    return book(x)


def through_the_weight_split(self, x):
    wrapper = MultiHeadAttentionWrapper(
        x.shape[-1], self.heads[0].W_value.out_features, 6, 0.0, len(self.heads)
    )
    wrapper.heads = self.heads
    split = MultiHeadAttention.from_wrapper(wrapper)
    return split.out_proj(split(x)) * 0 + split(x)


def named(forward):
    return forward if isinstance(forward, type) else with_forward(forward)


#: (answer, words the feedback must contain): every answer here fails.
CASES = [
    (RenamedArguments, "Building your class as"),
    (BuildsNoHeads, "no list of heads"),
    (chain, "as in a pipeline"),  # was "your heads form a chain": one message for both
    (chain_from_the_first, "a previous head's output"),
    (reversed_tokens, "was not given the wrapper's input x"),  # was "not the wrapper's..."
    (first_head_for_all, "one head did the work of all"),
    (head_forward_methods, "head.forward(x)"),
    # These three were told how the output was made (one message now: not every head ran once).
    (own_attention_per_head, "ran once as head(x)"),
    (sdpa_per_head, "with PyTorch's, is not the wrapper's job"),
    (zeros_of_the_right_shape, "ran once as head(x)"),
    (SharedHead, "share one set of weights"),
    (last_head_left_out, "one was left out"),  # one entry with "no head called"
    (reversed_heads, "not in head order"),  # was "not in list order": one entry with reversed
    (axis_three, "raised IndexError"),
    (returns_none, "did it forget to return"),
    (returns_list, "returned a list, not a tensor"),
    (returns_number, "an int, not a tensor"),
    (stacked, "torch.stack"),
    (token_axis, "wrong axis"),  # was "token axis (dim=1)": one entry with stack
    (batch_axis, "wrong axis"),  # was "batch axis (dim=0)"
    (added, "You added"),
    (reversed_output, "not in head order"),
    (interleaved_output, "not in head order"),
    (list_called, "calls the list of heads itself"),
    (WrapperSkeleton, "NotImplementedError"),
    (Empty, "NotImplementedError"),
    (MultiHeadAttentionWrapper, "the book's own class"),
    (BookSubclass, "MultiHeadAttentionWrapper.forward, the book's own"),
    (with_forward(calls_super, MultiHeadAttentionWrapper), "hands its work to the book's"),
    (builds_a_book_wrapper, "hands its work to the book's"),
    (through_the_weight_split, "MultiHeadAttention"),
]


@pytest.mark.parametrize("answer, words", CASES, ids=[c[0].__name__ for c in CASES])
def test_each_mistake_and_shortcut_fails_with_words_that_name_it(answer, words):
    result = check_wrapper(named(answer))
    assert not result.passed
    assert words in " ".join(result.feedback.split()), result.feedback
    no_head = answer in (own_attention_per_head, sdpa_per_head, zeros_of_the_right_shape)
    assert not no_head or "call head(x) for each head" in result.feedback


def test_feedback_on_the_starting_code_asks_instead_of_telling():
    feedback = check_wrapper(WrapperSkeleton).feedback
    assert "?" in feedback and "first hint" in feedback
    for fix in ("torch.cat", "dim=-1", "head(x)", "for head in"):
        assert fix not in feedback


def test_the_check_restores_the_book_classes_and_the_readers_random_state():
    forward = MultiHeadAttentionWrapper.forward
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    check_wrapper(with_forward(calls_super, MultiHeadAttentionWrapper))
    check_wrapper(with_forward(comprehension))
    assert MultiHeadAttentionWrapper.forward is forward
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize(
    "answer",
    [
        None,
        3,
        "MyWrapper",
        WrapperSkeleton(3, 2, 6, 0.0, 2),
        nn.Linear,
        dict,
        with_forward(returns_number),
    ],
    ids=["None", "int", "str", "instance", "nn.Linear", "dict", "odd forward"],
)
def test_the_unwrapped_check_never_raises_and_always_explains(answer):
    result = check_wrapper.__wrapped__(answer)
    assert isinstance(result, CheckResult) and not result.passed and result.feedback


def test_the_skeleton_draws_the_same_seeded_weights_as_the_books_wrapper():
    torch.manual_seed(123)
    skeleton = WrapperSkeleton(3, 2, 6, 0.0, num_heads=3)
    torch.manual_seed(123)
    book = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)
    pairs = zip(skeleton.parameters(), book.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
