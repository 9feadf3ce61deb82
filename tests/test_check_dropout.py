"""Dropout is checked where it acts, in every exercise that has it (chapters 3, 5, 6 and 7).

Each wrong class below is the book's own solution with dropout moved to one wrong place, or
replaced by something that is not dropout; the check must name where it went and where it
belongs, and a right answer must still pass.
"""

import pytest
import torch

from mha.checks import WeightSplitSkeleton, check_weight_split


def noisy(self, t):
    """Zero-mean noise in training mode: not dropout."""
    return t + 0.05 * torch.randn_like(t) if self.training else t


def dropped(self, t):
    return self.dropout(t)


def twice(self, t):
    return self.dropout(self.dropout(t))


def split_forward(where, how=dropped):
    """Chapter 3's forward with ``how`` applied at ``where``."""

    def at(self, place, t):
        return how(self, t) if place == where else t

    def forward(self, x):
        b, num_tokens, _ = x.shape

        def heads(t):  # (b, num_heads, num_tokens, head_dim)
            return t.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        queries, keys = heads(self.W_query(x)), heads(self.W_key(x))
        values = at(self, "values", heads(self.W_value(x)))
        scores = at(self, "raw scores", queries @ keys.transpose(2, 3))
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
        scores = at(self, "scores", scores)
        weights = at(self, "weights", torch.softmax(scores / self.head_dim**0.5, dim=-1))
        context = at(self, "head context", weights @ values)
        context = context.transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return at(self, "output", self.out_proj(at(self, "context", context)))

    return type(f"dropout_{where}_{how.__name__}", (WeightSplitSkeleton,), {"forward": forward})


PLACEMENTS = {  # (where, how): what the feedback must say
    ("scores", dropped): "nan",
    ("raw scores", dropped): "acts before the softmax",
    ("values", dropped): "dropout acts on the values",
    ("context", dropped): "on the merged context",
    ("head context", dropped): "on the merged context",
    ("output", dropped): "after out_proj",
    ("weights", noisy): "That is noise, not dropout",
    ("weights", twice): "applied twice",
}


def test_chapter_3_dropout_on_the_weights_passes():
    assert check_weight_split(split_forward("weights")).passed


@pytest.mark.parametrize("where, how", PLACEMENTS, ids=[f"{w} {h.__name__}" for w, h in PLACEMENTS])
def test_chapter_3_names_where_dropout_went_and_where_it_belongs(where, how):
    result = check_weight_split(split_forward(where, how))
    assert not result.passed
    assert PLACEMENTS[where, how] in result.feedback, result.feedback
    assert "Dropout belongs on the attention weights" in result.feedback, result.feedback
