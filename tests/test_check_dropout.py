"""Dropout is checked where it acts, in chapters 5 and 6 (chapter 3's: test_check_weight_split),
and dropout written by hand is read either way round, in chapters 3, 6 and 7.

Each wrong class below is the book's own solution with dropout moved to one wrong place, or
replaced by something that is not dropout; the check must say that it is not dropout of whole
attention weights (or that it makes nan) and where it belongs, and a right answer must still pass.
"""

import pytest
import torch
import torch.nn.functional as F

from mha import GroupedQueryAttention
from mha.checks.fused import check_fused_attention
from mha.checks.gqa import check_gqa_forward
from mha.starting import FusedAttentionStart


def noisy(self, t):
    """Zero-mean noise in training mode: not dropout."""
    return t + 0.05 * torch.randn_like(t) if self.training else t


def dropped(self, t):
    return self.dropout(t)


def twice(self, t):
    return self.dropout(self.dropout(t))


# --- chapter 5: the fused kernel, whose dropout_p is the one place dropout belongs


def fused_forward(where, how=None):
    """Chapter 5's solution, with F.dropout (or ``how``) at ``where`` instead of dropout_p."""

    def at(self, place, t):
        if place != where:
            return t
        return how(self, t) if how else F.dropout(t, self.dropout_p, self.training)

    def forward(self, x):
        b, num_tokens, _ = x.shape
        qkv = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim)
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4)  # (b, num_heads, T, head_dim)
        p = self.dropout_p if self.training and where == "kernel" else 0.0
        values = at(self, "values", values)
        context = F.scaled_dot_product_attention(
            queries, keys, values, dropout_p=p, is_causal=True
        )  # (b, num_heads, T, head_dim)
        context = at(self, "kernel output", context)
        context = context.transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return at(self, "output", self.out_proj(context))

    return type(f"fused_{where}", (FusedAttentionStart,), {"forward": forward})


FUSED_PLACEMENTS = {
    "kernel output": "not what dropout of whole attention weights gives",
    "values": "not what dropout of whole attention weights gives",
    "output": "not what dropout of whole attention weights gives",
}


def test_chapter_5_dropout_p_passes():
    assert check_fused_attention(fused_forward("kernel")).passed


@pytest.mark.parametrize("where", FUSED_PLACEMENTS)
def test_chapter_5_names_where_dropout_went_and_that_it_belongs_in_the_kernel(where):
    result = check_fused_attention(fused_forward(where))
    assert not result.passed
    assert FUSED_PLACEMENTS[where] in result.feedback, result.feedback
    assert "pass dropout_p=self.dropout_p while self.training" in result.feedback


def test_chapter_5_noise_on_the_kernel_output_is_not_dropout():
    result = check_fused_attention(fused_forward("kernel output", noisy))
    assert not result.passed and "noise, not dropout" in result.feedback, result.feedback


# --- chapter 6: grouped-query attention


def grouped_forward(where, how=dropped):
    """Chapter 6's solution, with ``how`` applied at ``where``."""

    def at(self, place, t):
        return how(self, t) if place == where else t

    def forward(self, x):
        b, num_tokens, _ = x.shape
        H, G = self.num_heads, self.num_kv_groups
        queries = self.W_query(x).view(b, num_tokens, H, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, num_tokens, G, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, G, self.head_dim).transpose(1, 2)
        keys = keys.repeat_interleave(self.group_size, dim=1)  # (b, H, T, head_dim)
        values = at(self, "values", values.repeat_interleave(self.group_size, dim=1))
        scores = queries @ keys.transpose(2, 3)  # (b, H, T, T)
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
        scores = at(self, "scores", scores)
        weights = at(self, "weights", torch.softmax(scores / self.head_dim**0.5, dim=-1))
        context = (weights @ values).transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return at(self, "output", self.out_proj(at(self, "context", context)))

    return type(f"grouped_{where}_{how.__name__}", (GroupedQueryAttention,), {"forward": forward})


GROUPED_PLACEMENTS = {
    ("scores", dropped): "nan",
    ("values", dropped): "not what dropout of whole attention weights gives",
    ("context", dropped): "not what dropout of whole attention weights gives",
    ("output", dropped): "not what dropout of whole attention weights gives",
    ("weights", noisy): "is noise, not dropout",
}


def test_chapter_6_dropout_on_the_weights_passes():
    assert check_gqa_forward(grouped_forward("weights")).passed


@pytest.mark.parametrize(
    "where, how", GROUPED_PLACEMENTS, ids=[f"{w} {h.__name__}" for w, h in GROUPED_PLACEMENTS]
)
def test_chapter_6_names_where_dropout_went_and_where_it_belongs(where, how):
    result = check_gqa_forward(grouped_forward(where, how))
    assert not result.passed
    assert GROUPED_PLACEMENTS[where, how] in result.feedback, result.feedback
    assert "Dropout belongs on the attention weights" in result.feedback, result.feedback


# --- dropout by hand: a random draw compared with p, or a Bernoulli mask, in chapters 3, 6, 7


class ByHand(torch.nn.Module):
    """Dropout written by hand: the weights kept where ``keep(p, t)``, scaled, in training (or
    ``always``, in eval mode too)."""

    def __init__(self, p, keep, always=False):
        super().__init__()
        self.p, self.keep, self.always = p, keep, always

    def forward(self, t):
        return t * self.keep(self.p, t) / (1 - self.p) if self.training or self.always else t


def by_hand(cls, keep, always=False):
    """``cls`` (a right answer), its self.dropout replaced by :class:`ByHand`."""

    def __init__(self, *args, **kwargs):
        cls.__init__(self, *args, **kwargs)
        self.dropout = ByHand(self.dropout.p, keep, always)

    return type(f"ByHand{cls.__name__}", (cls,), {"__init__": __init__})


def solution_and_check(chapter):
    """Chapter 3's, 6's or 7's solution, and its check."""
    from mha.checks.tiled import check_online_softmax
    from mha.checks.weight_split import check_weight_split
    from mha.gqa_exercise import gqa_forward
    from mha.starting import TiledAttentionStart
    from mha.tiled_exercise import SOLUTION
    from mha.weight_split_exercise import MyWeightSplit

    names = dict(GroupedQueryAttention=GroupedQueryAttention, torch=torch, check_gqa_forward=id)
    exec(gqa_forward.solution_code, names)  # its call of the check: id
    names["TiledAttentionStart"] = TiledAttentionStart
    exec(SOLUTION.rpartition("\n")[0], names)  # not its call of the check
    return {
        "3": (MyWeightSplit, check_weight_split),
        "6": (names["MyGroupedQueryAttention"], check_gqa_forward),
        "7": (names["MyTiledAttention"], check_online_softmax),
    }[chapter]


KEEPS = {  # keep(p, t), and the words the feedback must contain (None: it passes)
    "rand_like >= p": (lambda p, t: torch.rand_like(t) >= p, None),
    "rand < 1 - p": (lambda p, t: torch.rand(t.shape) < 1 - p, None),
    "p < uniform_(0, 1)": (lambda p, t: p < torch.empty_like(t).uniform_(0, 1), None),
    "floor(rand_like + 1 - p)": (lambda p, t: torch.floor(torch.rand_like(t) + 1 - p), None),
    "bernoulli(1 - p)": (lambda p, t: torch.bernoulli(torch.full_like(t, 1 - p)), None),
    "1 - bernoulli_(p)": (lambda p, t: 1 - torch.empty_like(t).bernoulli_(p), None),
    "keeps with chance p": (lambda p, t: torch.rand_like(t) < p, "with chance p, not 1 - p"),
}


@pytest.mark.parametrize("chapter", ["3", "6", "7"])
@pytest.mark.parametrize("way", KEEPS)
def test_dropout_by_hand_passes_either_way_round_and_a_wrong_chance_is_caught(chapter, way):
    cls, check = solution_and_check(chapter)
    keep, words = KEEPS[way]
    result = check(by_hand(cls, keep))
    assert result.passed == (words is None) and (words or "") in result.feedback, result.feedback


@pytest.mark.parametrize("chapter", ["3", "6", "7"])
def test_dropout_by_hand_on_in_eval_mode_is_named(chapter):
    cls, check = solution_and_check(chapter)
    result = check(by_hand(cls, lambda p, t: torch.rand(t.shape) >= p, always=True))
    assert not result.passed and "eval" in result.feedback.lower(), result.feedback
