"""Chapter 1's check, as one table: each answer, whether it passes, the words its feedback needs.

The wrong answers were written as a learner would, before reading the check: every way of giving
the heads their input and of joining their outputs, the shortcuts, and what is not a tensor."""

import pytest
import torch
import torch.nn.functional as F

from mha import CausalAttention, MultiHeadAttentionWrapper
from mha.checks import wrapper
from mha.checks.wrapper import check_wrapper
from mha.starting import WrapperSkeleton
from mha.wrapper_exercise import sequential_wrapper

BOOK_FORWARD = MultiHeadAttentionWrapper.forward  # saved at module level, before the check


def answer(forward, base=WrapperSkeleton, **attributes):
    return type("MyWrapper", (base,), {"forward": forward, **attributes})


def outs(self, x):
    return [head(x) for head in self.heads]


def filled(self, x):
    out = x.new_empty(*x.shape[:2], 0)
    for head in self.heads:
        out = torch.cat((out, head(x)), dim=2)
    return out


def chained(self, x):
    for head in self.heads:
        x = head(x)
    return x


def shared(self, *args, **kwargs):  # one head object, num_heads times
    WrapperSkeleton.__init__(self, *args, **kwargs)
    self.heads = torch.nn.ModuleList([self.heads[0]] * self.num_heads)


def sdpa(self, x):  # PyTorch's attention from the heads' weights, no head called
    q, k, v = ([getattr(h, n)(x) for h in self.heads] for n in ("W_query", "W_key", "W_value"))
    att = [F.scaled_dot_product_attention(*t, is_causal=True) for t in zip(q, k, v)]
    return torch.cat(att, -1)


class SavedInClass(WrapperSkeleton):
    book = MultiHeadAttentionWrapper.forward

    def forward(self, x):
        return self.book(x)


FEW = "one vector per token"
# fmt: off
CASES = [  # (answer, passes, words)
    (sequential_wrapper.solution_code, True, "in list order"),
    (answer(lambda self, x: torch.cat(outs(self, x), dim=2)), True, "side by side"),
    (answer(lambda self, x: torch.dstack(outs(self, x))), True, "side by side"),
    (answer(lambda self, x: torch.stack(outs(self, x), dim=2).flatten(2)), True, "side by side"),
    (answer(filled), True, "side by side"),
    (answer(lambda self, x: torch.cat([h.forward(x) for h in self.heads], -1)), True, "side by"),
    (WrapperSkeleton, False, "What should each head be given"),  # the starting code
    (answer(lambda self, x: super(type(self), self).forward(x)), False, "starting code"),
    (MultiHeadAttentionWrapper, False, "one of the book's own modules"),
    (answer(lambda self, x: BOOK_FORWARD(self, x)), False, "MultiHeadAttentionWrapper.forward"),
    (SavedInClass, False, "the book's MultiHeadAttentionWrapper.forward"),
    (answer(MultiHeadAttentionWrapper.forward), False, "the book's own"),
    (answer(sdpa), False, "Not every head in self.heads ran once"),  # torch's attention
    (answer(lambda self, x: self.heads[0](x)), False, "head 1's alone"),
    (answer(lambda self, x: torch.cat(outs(self, x)[:-1], -1)), False, "every head but the last"),
    (answer(lambda self, x: [head(x) for head in self.heads][-1]), False, "last head's alone"),
    (answer(lambda self, x: torch.cat([self.heads[0](x)] * self.num_heads, -1)), False,
     "head 1's, repeated"),
    (answer(lambda self, x: torch.cat(outs(self, x)[::-1], -1)), False, "reverse order"),
    (answer(lambda self, x: torch.stack(outs(self, x), -1)), False, "new last axis"),
    (answer(lambda self, x: torch.stack(outs(self, x))), False, "new first axis"),
    (answer(lambda self, x: torch.cat(outs(self, x), dim=1)), False, "as extra tokens"),
    (answer(lambda self, x: torch.hstack(outs(self, x))), False, "as extra tokens"),
    (answer(lambda self, x: torch.cat(outs(self, x), dim=0)), False, "as extra sequences"),
    (answer(lambda self, x: torch.stack(outs(self, x), -1).flatten(-2)), False, "interleaved"),
    (answer(lambda self, x: torch.stack(outs(self, x), 1).reshape(*x.shape[:2], -1)), False,
     "mixes tokens and heads"),
    (answer(lambda self, x: sum(outs(self, x))), False, "You added"),
    (answer(lambda self, x: torch.stack(outs(self, x)).mean(0)), False, "You averaged"),
    (answer(lambda self, x: torch.cat([h(x[0]) for h in self.heads], -1)), False, "x[0]"),
    (answer(lambda self, x: torch.cat(outs(self, x[:1]), -1).expand(len(x), -1, -1)), False,
     "x[0], the first sequence alone"),
    (answer(lambda self, x: torch.cat(outs(self, x), -1) / self.num_heads), False, "no average"),
    (answer(lambda self, x: torch.cat([h(c) for h, c in zip(self.heads, x.chunk(self.num_heads,
     -1))], -1)), False, "some of x's columns"),
    (answer(chained), False, "previous head's output"),
    (answer(lambda self, x: torch.cat([self.heads[0](x), *outs(self, x)][1:], -1)), False,
     "called again"),
    (answer(lambda self, x: torch.cat(outs(self, x), -1), __init__=shared), False, "share one"),
    (answer(lambda self, x: torch.cat(outs(self, x), -1)[..., :-1]), False,
     "shape (2, 6, 5); the output is (2, 6, 6)"),  # told by the core
    (answer(lambda self, x: outs(self, x)), False, "returned a list, not a tensor of shape"),
    (answer(lambda self, x: [outs(self, x)] and None), False, "Did it forget to return?"),
    (answer(lambda self, x: torch.cat(outs(self, x), -1).long()), False, "torch.int64"),
    (answer(lambda self, x: torch.cat(outs(self, x), -1) * 2), False, "see hint(3)"),
    (answer(lambda self, x: 1 / 0), False, "ZeroDivisionError"),
    (answer(lambda self, x: self.heads(x)), False, "calls the list of heads itself"),
    (answer(outs, heads=property(lambda self: [])), False, "no list of heads"),
    (answer(outs, __init__=lambda self, *a, **k: 1 / 0), False, "Keep the constructor"),
    (answer(lambda self, x: x, base=torch.nn.Module), False, "Keep the constructor"),
    (CausalAttention(3, 2, 6, 0.0), False, "not the class"),
    ("MyWrapper", False, "expects a class"),
    (lambda x: x, False, "expects a class"),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_the_check(case):
    given, passes, words = case
    result = check_wrapper(given)
    assert result.passed is passes and words in result.feedback, result.feedback


def test_a_row_fails_when_the_check_loses_its_entry(monkeypatch):
    (reversed_heads,) = [given for given, _, words in CASES if "reverse order" in words]
    assert "reverse order" in check_wrapper(reversed_heads).feedback
    kept = tuple(m for m in wrapper.MISTAKES if m.name != "heads reversed")
    monkeypatch.setattr(wrapper, "MISTAKES", kept)
    assert "reverse order" not in check_wrapper(reversed_heads).feedback


def test_the_check_restores_the_book_classes_and_the_readers_random_state():
    forward, state = MultiHeadAttentionWrapper.forward, torch.random.get_rng_state()
    check_wrapper(CASES[0][0])
    assert MultiHeadAttentionWrapper.forward is forward
    assert torch.equal(torch.random.get_rng_state(), state)


def test_the_skeleton_draws_the_same_seeded_weights_as_the_books_wrapper():
    torch.manual_seed(1)
    book = MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)
    torch.manual_seed(1)
    mine = WrapperSkeleton(3, 2, 6, 0.0, 2)
    assert all(map(torch.equal, book.state_dict().values(), mine.state_dict().values()))
