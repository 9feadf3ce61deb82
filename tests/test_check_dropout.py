"""Dropout is checked where it acts, in chapters 5 and 6 (chapter 3's: test_check_weight_split).

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
