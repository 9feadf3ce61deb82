"""Chapter 2's two checks on one table: right wrappers pass, each learner's mistake is named."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

import mha
from mha import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper, example_batch
from mha.two_dim_exercise import twelve_wide_output, two_dim_output

TWO, TWELVE, CAT = two_dim_output.check, twelve_wide_output.check, torch.cat
W = MultiHeadAttentionWrapper


def build(d_out=1, num_heads=2, context_length=6, qkv_bias=False, d_in=3, dropout=0.0, cls=W):
    torch.manual_seed(123)
    return cls(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


def solution(exercise):  # the wrapper the exercise's one copy of its solution builds
    namespace = {"torch": torch, "MultiHeadAttentionWrapper": MultiHeadAttentionWrapper}
    exec(exercise.solution_text.rsplit("\n", 1)[0], namespace)
    return namespace[exercise.solution_text.split("\n")[1].split(" ")[0]]


def altered(forward, d_out=1, num_heads=2):
    """A wrapper whose forward is ``forward(wrapper, x)``."""
    mine = type("Mine", (MultiHeadAttentionWrapper,), {"forward": forward})
    return build(d_out, num_heads, cls=mine)


def joining(join, d_out=1, num_heads=2):  # the heads' outputs joined with ``join``
    return altered(lambda s, x: join([head(x) for head in s.heads]), d_out, num_heads)


def heads_scoring(d_out, scale=None, mask=True, cut=None, **kw):  # another scale, mask or cut
    def forward(self, x):
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        q, k = (q, k) if cut is None else (q[..., cut], k[..., cut])
        scores = q @ k.transpose(1, 2)  # (b, tokens, tokens)
        future = self.mask.bool()[: x.shape[1], : x.shape[1]]  # (tokens, tokens)
        scores = scores.masked_fill(future, -torch.inf) if mask else scores
        return torch.softmax(scores / (scale or k.shape[-1] ** 0.5), dim=-1) @ v

    wrapper = build(d_out, **kw)
    head = type("Head", (CausalAttention,), {"forward": forward})
    torch.manual_seed(7)
    wrapper.heads = nn.ModuleList([head(3, d_out, 6, 0.0) for _ in wrapper.heads])
    return wrapper


def edited(edit):
    edit(wrapper := build())
    return wrapper


OUT_PROJ = nn.Linear(4, 2)  # a learned mix after torch.cat, as chapter 3 adds
# fmt: off
KEPT = lambda s, x: (W.forward(s, x) if torch.is_grad_enabled()  # noqa: E731  without gradients,
                     else s.__dict__.setdefault("kept", W.forward(s, x)))  # the first output
CASES = [  # (check, answer, passes?, words its feedback must contain)
    (TWO, lambda: solution(two_dim_output), True, "2 × 1"),
    (TWELVE, lambda: solution(twelve_wide_output), True, "4 × 3"),
    (TWO, lambda: build(qkv_bias=True, context_length=1024), True, "Each head reads the same x"),
    (TWO, lambda: build(dropout=0.5), True, "side by side, in head order"),
    (TWO, lambda: joining(lambda outs: torch.dstack(outs)), True, "2 × 1"),
    (TWO, lambda: joining(lambda outs: torch.concat([o.clone() for o in outs], dim=2)), True, "×"),
    (TWELVE, lambda: build(3, 4, cls=type("Mine", (MultiHeadAttentionWrapper,), {})), True, "12"),
    (TWO, lambda: build(d_out=2), False, "starting wrapper, unchanged"),
    (TWELVE, lambda: build(d_out=2), False, "twelve_wide_output.hint(1)"),
    (TWO, lambda: build(d_out=2, num_heads=1), False, "has 1 head, but the exercise asks for 2"),
    (TWO, lambda: build(num_heads=3), False, "3 heads"), (TWO, lambda: build(d_in=2), False, "=2"),
    (TWELVE, lambda: build(4, 3), False, "has 3 heads, but the exercise asks for 4"),
    (TWELVE, lambda: build(1, 12), False, "asks for 4"), (TWELVE, lambda: build(6, 2), False, "=4"),
    (TWO, lambda: build(context_length=2), False, "context_length=2"),
    (TWO, lambda: MultiHeadAttentionWrapper(3, 6, 1, 0.0, 2), False, "context_length at 6"),
    (TWO, lambda: build(d_out=4), False, "2 × 4 = 8"), (TWELVE, lambda: build(12, 4), False, "48"),
    (TWELVE, lambda: build(2, 4), False, "not 12"), (TWO, lambda: mha, False, "given a module"),
    (TWO, lambda: MultiHeadAttentionWrapper, False, "class MultiHeadAttentionWrapper itself"),
    (TWO, lambda: build()(example_batch()), False, "check_two_dim_output(my_wrapper(batch))"),
    (TWO, lambda: build()(example_batch()).shape, False, "given a torch.Size"),
    (TWO, lambda: None, False, "given None"), (TWO, lambda: "my_wrapper", False, "given a str"),
    (TWO, lambda: list(build().heads), False, "a list"), (TWO, lambda: np.zeros(3), False, "numpy"),
    (TWO, lambda: build(2, cls=MultiHeadAttention), False, "Your MultiHeadAttention does not"),
    (TWO, lambda: CausalAttention(3, 2, 6, 0.0), False, "Your CausalAttention does not have"),
    (TWO, lambda: nn.Linear(3, 2), False, "Your Linear does not have the heads"),
    (TWO, lambda: edited(lambda w: setattr(w.heads[1], "W_value", nn.Linear(3, 2))),
     False, "one width"),
    (TWO, lambda: edited(lambda w: setattr(w, "heads", nn.ModuleList([w.heads[0]] * 2))),
     False, "[head] * num_heads"),
    (TWO, lambda: edited(lambda w: w.heads.__setitem__(1, copy.deepcopy(w.heads[0]))),
     False, "or a copy"),
    (TWO, lambda: edited(lambda w: [setattr(w.heads[1], n, getattr(w.heads[0], n)) for n in
                                  ("W_query", "W_key", "W_value")]), False, "shared layers"),
    (TWO, lambda: altered(lambda s, x: CAT([s.heads[0](x), s.heads[1](s.heads[0](x))], -1)),
     False, "as in a pipeline"),
    (TWO, lambda: altered(lambda s, x: CAT([h(x) for h in s.head], -1)), False, "AttributeError"),
    (TWO, lambda: joining(lambda outs: CAT(outs, dim=3)), False, "raised IndexError"),
    (TWO, lambda: altered(lambda s, x: None), False, "returned None"),
    (TWO, lambda: joining(list), False, "returned a list, not a tensor"),
    (TWO, lambda: joining(lambda outs: dict(enumerate(outs))), False, "returned a dict"),
    (TWO, lambda: joining(lambda outs: CAT(outs, -1).numpy()), False, "a numpy.ndarray"),
    (TWO, lambda: joining(torch.stack), False, "new first axis"),
    (TWO, lambda: joining(lambda outs: torch.stack(outs, -1)), False, "new last axis"),
    (TWO, lambda: joining(lambda outs: CAT(outs, dim=1)), False, "as extra tokens"),
    (TWO, lambda: joining(CAT), False, "sequences"), (TWO, lambda: joining(sum, 2), False, "added"),
    (TWO, lambda: joining(lambda outs: torch.stack(outs).mean(0), d_out=2), False, "You averaged"),
    (TWO, lambda: joining(lambda outs: CAT(outs[::-1], -1)), False, "reverse order"),
    (TWELVE, lambda: joining(lambda o: CAT([o[1], o[0], *o[2:]], -1), 3, 4), False, "head order"),
    (TWELVE, lambda: joining(lambda o: torch.stack(o, -1).flatten(-2), 3, 4), False, "interleav"),
    (TWO, lambda: edited(lambda w: [h.mask.zero_() for h in w.heads]), False,
     "causal mask was removed"),
    (TWO, lambda: heads_scoring(1, mask=False), False, "when a later token does"),
    (TWO, lambda: heads_scoring(2, scale=1.0), False, "another number than √d_out"),
    (TWO, lambda: heads_scoring(3, scale=3.0), False, "nor d_out itself"),
    (TWO, lambda: heads_scoring(1, scale=2**0.5), False, "not the whole output's"),
    (TWELVE, lambda: heads_scoring(3, scale=3**0.5 * 2, num_heads=4), False, "√d_out"),
    (TWO, lambda: heads_scoring(2, scale=3**0.5), False, "nor d_in"),
    (TWO, lambda: joining(lambda outs: CAT([o[..., :1] for o in outs], -1), d_out=2), False,
     "keeps only 2 of the 4 values your 2 heads make"),
    (TWO, lambda: joining(lambda outs: CAT(outs, -1)[..., 2:4], d_out=3), False, "sliced away"),
    (TWO, lambda: altered(lambda s, x: OUT_PROJ(CAT([h(x) for h in s.heads], -1)), 2), False,
     "chapter 3's out_proj"),
    (TWO, lambda: altered(lambda s, x: CAT([h(x) for h in s.heads], -1) @ torch.ones(4, 2), 2),
     False, "mixes the heads' values after torch.cat"),
    (TWO, lambda: heads_scoring(2, cut=slice(0, 1)), False, "Head 1's columns"),
    (TWO, lambda: edited(lambda w: setattr(w.heads[1], "W_query", w.heads[0].W_query)), False,
     "shared layers"), (TWO, lambda: altered(KEPT), False, "x's output again for x + 1"),
    (TWO, lambda: altered(lambda s, x: CAT([h(x[:1]) for h in s.heads], -1).expand(2, -1, -1)),
     False, "x[0], the first sequence"),
    (TWO, lambda: altered(lambda s, x: W.forward(s, x).detach()), False, "carries no gradient"),
]
# fmt: on


@pytest.mark.parametrize("check, answer, passes, words", CASES)
def test_the_check(check, answer, passes, words):
    answer, state = answer(), torch.random.get_rng_state()
    result = check(answer)
    assert result.passed is passes and words in result.feedback, result.feedback
    assert torch.equal(torch.random.get_rng_state(), state)  # the check draws no random number
    assert passes or not any(f"d_out={d}" in result.feedback for d in (1, 3))  # never tells


def test_a_row_can_fail():  # a wrong answer held to another mistake's words
    with pytest.raises(AssertionError):
        test_the_check(TWO, lambda: build(d_out=4), False, "starting wrapper")
