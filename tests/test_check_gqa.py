"""check_gqa_forward accepts every correct way of writing grouped-query attention, names each
known mistake, and refuses answers that do not need the skill.

Each buggy forward differs from a correct one in one step. Most mistakes have two
implementations in different styles, so the check has to recognise what a mistake computes, not
how it is spelled.
"""

import importlib.util
import inspect
import json
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import CHAPTERS, multi_head_attention_forward
from mha import GroupedQueryAttention, MultiHeadAttention
from mha.checks.core import CheckResult
from mha.checks.gqa import (
    GQA_CONFIGS,
    GQA_FORWARD_MISTAKES,
    TRAINING_MISTAKES,
    GroupRecipe,
    check_gqa_forward,
    gqa_forward,
)
from mha.gqa import KVCache, generate
from test_check_dropout import grouped_forward

# --- the steps of a correct pass, for the buggy forwards to reuse around the step they get wrong


def split(self, x):
    """Queries (b, H, T, hd); keys and values (b, G, T, hd)."""
    b, num_tokens, _ = x.shape
    queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim)
    keys = self.W_key(x).view(b, num_tokens, self.num_kv_groups, self.head_dim)
    values = self.W_value(x).view(b, num_tokens, self.num_kv_groups, self.head_dim)
    return queries.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)


def interleave(self, t):
    return t.repeat_interleave(self.group_size, dim=1)  # (b, H, T, hd)


def cycle(self, t):
    return t.repeat(1, self.group_size, 1, 1)  # (b, H, T, hd): the mixing bug


def causal_softmax(self, attn_scores, scale=None):
    num_tokens = attn_scores.shape[-1]
    attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
    return torch.softmax(attn_scores / (scale or self.head_dim**0.5), dim=-1)


def causal_dropout_softmax(self, attn_scores):
    """The attention weights as a correct pass uses them: masked, scaled, softmax, dropout."""
    return self.dropout(causal_softmax(self, attn_scores))


def merge(self, context):
    b, _, num_tokens, _ = context.shape
    return context.transpose(1, 2).reshape(b, num_tokens, self.d_out)  # (b, T, d_out)


def with_forward(forward):
    """A GroupedQueryAttention whose forward is ``forward``, named after it."""
    return type(forward.__name__, (GroupedQueryAttention,), {"forward": forward})


# --- correct styles -----------------------------------------------------------------------------


def repeat_interleave_both(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    attn_weights = self.dropout(causal_softmax(self, queries @ keys.transpose(2, 3)))
    return self.out_proj(merge(self, attn_weights @ values))


def expand_and_reshape(self, x):
    queries, keys, values = split(self, x)
    b, G, num_tokens, hd = keys.shape
    n = self.group_size
    keys = keys[:, :, None].expand(b, G, n, num_tokens, hd).reshape(b, G * n, num_tokens, hd)
    values = values.unsqueeze(2).expand(-1, -1, n, -1, -1).flatten(1, 2)
    return self.out_proj(merge(self, causal_dropout_softmax(self, queries @ keys.mT) @ values))


def sdpa_enable_gqa(self, x):
    queries, keys, values = split(self, x)
    context = F.scaled_dot_product_attention(
        queries,
        keys,
        values,
        is_causal=True,
        enable_gqa=True,
        dropout_p=self.dropout.p if self.training else 0.0,
    )
    return self.out_proj(merge(self, context))


def sdpa_with_expanded_keys_and_a_mask(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = split(self, x)
    visible = ~self.mask[:num_tokens, :num_tokens]
    context = F.scaled_dot_product_attention(
        queries,
        interleave(self, keys),
        interleave(self, values),
        attn_mask=visible,
        dropout_p=self.dropout.p if self.training else 0.0,
    )
    return self.out_proj(merge(self, context))


def queries_grouped_instead(self, x):
    """No key is copied: each group's heads become rows of one query matrix per group."""
    queries, keys, values = split(self, x)
    b, H, num_tokens, hd = queries.shape
    G, n = self.num_kv_groups, self.group_size
    queries = queries.view(b, G, n, num_tokens, hd)
    scores = queries @ keys.unsqueeze(2).transpose(-1, -2)  # (b, G, n, T, T)
    weights = causal_dropout_softmax(self, scores)
    context = (weights @ values.unsqueeze(2)).view(b, H, num_tokens, hd)
    return self.out_proj(merge(self, context))


def einsum_groups(self, x):
    b, num_tokens, _ = x.shape
    G, n, hd = self.num_kv_groups, self.group_size, self.head_dim
    queries = self.W_query(x).view(b, num_tokens, G, n, hd)
    keys = self.W_key(x).view(b, num_tokens, G, hd)
    values = self.W_value(x).view(b, num_tokens, G, hd)
    scores = torch.einsum("bqgnd,bkgd->bgnqk", queries, keys)  # (b, G, n, T, T)
    weights = causal_dropout_softmax(self, scores)
    context = torch.einsum("bgnqk,bkgd->bqgnd", weights, values)  # (b, T, G, n, hd)
    return self.out_proj(context.reshape(b, num_tokens, self.d_out))


def repeated_before_the_transpose(self, x):
    """dim=2 of (b, T, G, hd) is the group axis: repeating there is right."""
    b, num_tokens, _ = x.shape
    G, n, hd = self.num_kv_groups, self.group_size, self.head_dim
    queries = self.W_query(x).view(b, num_tokens, self.num_heads, hd).transpose(1, 2)
    keys = self.W_key(x).view(b, num_tokens, G, hd).repeat_interleave(n, dim=2)
    values = self.W_value(x).view(b, num_tokens, G, hd).repeat_interleave(n, dim=2)
    keys, values = keys.transpose(1, 2), values.transpose(1, 2)  # (b, H, T, hd)
    return self.out_proj(merge(self, causal_dropout_softmax(self, queries @ keys.mT) @ values))


def functional_dropout(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    weights = F.dropout(causal_softmax(self, queries @ keys.mT), self.dropout.p, self.training)
    return self.out_proj(merge(self, weights @ values))


class FromScratch(nn.Module):
    """Written without the book's class: its own constructor with the same layer names."""

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, num_kv_groups, qkv_bias=False
    ):
        super().__init__()
        self.H, self.G, self.hd = num_heads, num_kv_groups, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_groups * self.hd, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.hd, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, num_tokens, d_out = x.shape[0], x.shape[1], self.H * self.hd
        q = self.W_query(x).view(b, num_tokens, self.H, self.hd).transpose(1, 2)
        k = self.W_key(x).view(b, num_tokens, self.G, self.hd).transpose(1, 2)
        v = self.W_value(x).view(b, num_tokens, self.G, self.hd).transpose(1, 2)
        k, v = (t.repeat_interleave(self.H // self.G, dim=1) for t in (k, v))
        future = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1)
        w = torch.softmax(
            (q @ k.transpose(-1, -2)).masked_fill(future, float("-inf")) / self.hd**0.5, dim=-1
        )
        return self.out_proj((self.drop(w) @ v).transpose(1, 2).reshape(b, num_tokens, d_out))


def solution_class():
    namespace = {
        "GroupedQueryAttention": GroupedQueryAttention,
        "torch": torch,
        "check_gqa_forward": check_gqa_forward,
    }
    exec(gqa_forward.solution_code, namespace)
    return namespace["MyGroupedQueryAttention"]


CORRECT = [FromScratch, solution_class()] + [
    with_forward(f)
    for f in (
        repeat_interleave_both,
        expand_and_reshape,
        queries_grouped_instead,
        einsum_groups,
        repeated_before_the_transpose,
        functional_dropout,
    )
]


@pytest.mark.parametrize("cls", CORRECT, ids=lambda cls: cls.__name__)
def test_every_correct_style_of_grouped_query_attention_passes(cls):
    result = check_gqa_forward(cls)
    assert isinstance(result, CheckResult)
    assert result.passed, result.feedback


def test_the_solution_ends_by_checking_itself():
    assert gqa_forward.solution_code.rstrip().endswith("check_gqa_forward(MyGroupedQueryAttention)")


def test_the_chapters_practice_cell_checks_the_untouched_skeleton_and_fails():
    nb = json.loads((CHAPTERS / "06_sharing_keys_values.ipynb").read_text())
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    skeleton = next(c for c in cells if "raise NotImplementedError" in "".join(c["source"]))
    after = cells[cells.index(skeleton) + 1]
    assert "".join(after["source"]).strip() == "check_gqa_forward(MyGroupedQueryAttention)"
    shown = json.dumps(after["outputs"], ensure_ascii=False)
    assert "✗ Not yet." in shown and "NotImplementedError" in shown


# --- mistakes -----------------------------------------------------------------------------------


def cycled_groups(self, x):
    queries, keys, values = split(self, x)
    keys, values = cycle(self, keys), cycle(self, values)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def cycled_by_expanding_the_wrong_axis(self, x):
    queries, keys, values = split(self, x)
    b, G, num_tokens, hd = keys.shape
    n = self.group_size
    keys = keys[:, None].expand(b, n, G, num_tokens, hd).reshape(b, n * G, num_tokens, hd)
    values = values[:, None].expand(b, n, G, num_tokens, hd).reshape(b, n * G, num_tokens, hd)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.mT) @ values))


def values_cycled_keys_interleaved(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), cycle(self, values)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def keys_cycled_values_interleaved(self, x):
    queries, keys, values = split(self, x)
    keys, values = cycle(self, keys), interleave(self, values)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def values_not_expanded(self, x):
    queries, keys, values = split(self, x)
    keys = interleave(self, keys)
    attn_weights = causal_softmax(self, queries @ keys.transpose(2, 3))
    return self.out_proj(merge(self, attn_weights @ values))


def values_not_expanded_with_matmul(self, x):
    queries, keys, values = split(self, x)
    keys = keys.repeat_interleave(self.group_size, 1)
    attn_weights = causal_softmax(self, torch.matmul(queries, keys.transpose(-2, -1)))
    context = torch.matmul(attn_weights, values)
    return self.out_proj(merge(self, context))


def values_not_expanded_short_names(self, x):
    """Named q, k, v: the check recognises the tensors by value, not by name."""
    q, k, v = split(self, x)
    k_all = k.repeat_interleave(self.group_size, dim=1)
    w = causal_softmax(self, q @ k_all.mT)
    return self.out_proj(merge(self, w @ v))


def keys_not_expanded_short_names(self, x):
    q, k, v = split(self, x)
    v = v.repeat_interleave(self.group_size, dim=1)
    return self.out_proj(merge(self, causal_softmax(self, q @ k.mT) @ v))


def keys_not_expanded(self, x):
    queries, keys, values = split(self, x)
    values = interleave(self, values)
    attn_weights = causal_softmax(self, queries @ keys.transpose(2, 3))
    return self.out_proj(merge(self, attn_weights @ values))


def nothing_expanded(self, x):
    queries, keys, values = split(self, x)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.mT) @ values))


def expanded_by_the_group_count(self, x):
    queries, keys, values = split(self, x)
    keys, values = (t.repeat_interleave(self.num_kv_groups, dim=1) for t in (keys, values))
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.mT) @ values))


def scaled_by_the_key_width(self, x):
    queries, keys, values = split(self, x)
    width = self.W_key(x).shape[-1]  # the projection's width, before the split
    keys, values = interleave(self, keys), interleave(self, values)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.mT, width**0.5) @ values))


def scaled_by_the_key_width_in_sdpa(self, x):
    queries, keys, values = split(self, x)
    context = F.scaled_dot_product_attention(
        queries,
        keys,
        values,
        is_causal=True,
        enable_gqa=True,
        scale=1 / (self.num_kv_groups * self.head_dim) ** 0.5,
    )
    return self.out_proj(merge(self, context))


def scaled_by_d_out(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    return self.out_proj(
        merge(self, causal_softmax(self, queries @ keys.mT, self.d_out**0.5) @ values)
    )


def scaled_by_the_group_size(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    scale = self.group_size**0.5
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.mT, scale) @ values))


def not_scaled(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.mT, 1.0) @ values))


def no_causal_mask(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    attn_weights = torch.softmax(queries @ keys.mT / self.head_dim**0.5, dim=-1)
    return self.out_proj(merge(self, attn_weights @ values))


def sdpa_without_is_causal(self, x):
    queries, keys, values = split(self, x)
    context = F.scaled_dot_product_attention(queries, keys, values, enable_gqa=True)
    return self.out_proj(merge(self, context))


def mask_filled_with_zero(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    num_tokens = x.shape[1]
    scores = (queries @ keys.mT).masked_fill(self.mask[:num_tokens, :num_tokens], 0.0)
    return self.out_proj(merge(self, torch.softmax(scores / self.head_dim**0.5, dim=-1) @ values))


def mask_after_softmax(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    num_tokens = x.shape[1]
    weights = torch.softmax(queries @ keys.mT / self.head_dim**0.5, dim=-1)
    weights = weights.masked_fill(self.mask[:num_tokens, :num_tokens], 0.0)
    return self.out_proj(merge(self, weights @ values))


def mask_not_sliced(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    scores = (queries @ keys.mT).masked_fill(self.mask, -torch.inf)
    return self.out_proj(merge(self, torch.softmax(scores / self.head_dim**0.5, dim=-1) @ values))


def softmax_over_queries(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    num_tokens = x.shape[1]
    scores = (queries @ keys.mT).masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
    return self.out_proj(merge(self, torch.softmax(scores / self.head_dim**0.5, dim=-2) @ values))


def out_proj_forgotten(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    return merge(self, causal_softmax(self, queries @ keys.mT) @ values)


def merged_without_transposing_back(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    context = causal_softmax(self, queries @ keys.mT) @ values  # (b, H, T, hd)
    return self.out_proj(context.reshape(x.shape[0], x.shape[1], -1))


def sdpa_without_out_proj(self, x):
    queries, keys, values = split(self, x)
    return merge(
        self, F.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=True)
    )


def dropout_on_in_eval_mode(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    attn_weights = F.dropout(causal_softmax(self, queries @ keys.mT), self.dropout.p)
    return self.out_proj(merge(self, attn_weights @ values))


def sdpa_dropout_always(self, x):
    queries, keys, values = split(self, x)
    context = F.scaled_dot_product_attention(
        queries, keys, values, is_causal=True, enable_gqa=True, dropout_p=self.dropout.p
    )
    return self.out_proj(merge(self, context))


def no_dropout(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.mT) @ values))


def sdpa_without_dropout_p(self, x):
    queries, keys, values = split(self, x)
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=True)
    return self.out_proj(merge(self, context))


def keys_viewed_with_num_heads(self, x):
    b, num_tokens, _ = x.shape
    queries, _, _ = split(self, x)
    keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
    values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.mT) @ values))


def dropout_reseeded_every_call(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    torch.manual_seed(0)  # "reproducible" dropout: the same mask on every call
    return self.out_proj(merge(self, causal_dropout_softmax(self, queries @ keys.mT) @ values))


def dropout_given_the_layer_as_p(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    weights = causal_softmax(self, queries @ keys.mT)
    if self.training:
        weights = F.dropout(weights, self.dropout)  # the layer, not its probability
    return self.out_proj(merge(self, weights @ values))


def repeated_on_the_token_axis(self, x):
    queries, keys, values = split(self, x)
    keys = keys.repeat_interleave(self.group_size, dim=2)  # (b, G, n * T, hd)
    values = values.repeat_interleave(self.group_size, dim=2)
    return self.out_proj(merge(self, causal_dropout_softmax(self, queries @ keys.mT) @ values))


def repeated_on_the_token_axis_before_the_transpose(self, x):
    b, num_tokens, _ = x.shape
    G, n, hd = self.num_kv_groups, self.group_size, self.head_dim
    queries = self.W_query(x).view(b, num_tokens, self.num_heads, hd).transpose(1, 2)
    keys = self.W_key(x).view(b, num_tokens, G, hd).repeat_interleave(n, dim=1)
    values = self.W_value(x).view(b, num_tokens, G, hd).repeat_interleave(n, dim=1)
    keys, values = keys.transpose(1, 2), values.transpose(1, 2)  # (b, G, n * T, hd)
    return self.out_proj(merge(self, causal_dropout_softmax(self, queries @ keys.mT) @ values))


def repeated_on_the_token_axis_inline(self, x):
    queries, keys, values = split(self, x)
    n = self.group_size
    scores = queries @ keys.repeat_interleave(n, dim=-2).transpose(2, 3)
    weights = causal_dropout_softmax(self, scores)
    return self.out_proj(merge(self, weights @ values.repeat_interleave(n, dim=-2)))


def cycled_on_the_token_axis(self, x):
    queries, keys, values = split(self, x)
    keys, values = keys.repeat(1, 1, self.group_size, 1), values.repeat(1, 1, self.group_size, 1)
    return self.out_proj(merge(self, causal_dropout_softmax(self, queries @ keys.mT) @ values))


def heads_not_merged(self, x):
    queries, keys, values = split(self, x)
    keys, values = interleave(self, keys), interleave(self, values)
    return causal_softmax(self, queries @ keys.mT) @ values  # (b, H, T, hd)


def returns_a_list(self, x):
    return repeat_interleave_both(self, x).tolist()


def last_token_only(self, x):
    return repeat_interleave_both(self, x)[:, -1]


#: (buggy forward, the name of the mistake the check must report, a phrase of its message)
MISTAKEN = [
    (cycled_groups, "groups mapped with repeat", "repeat_interleave(group_size, dim=1)"),
    (cycled_by_expanding_the_wrong_axis, "groups mapped with repeat", "h % num_kv_groups"),
    (values_cycled_keys_interleaved, "keys and values mapped differently", "another group's"),
    (keys_cycled_values_interleaved, "keys and values mapped differently", "another group's"),
    (values_not_expanded, "values not expanded", "the values were not"),
    (values_not_expanded_with_matmul, "values not expanded", "the values were not"),
    (keys_not_expanded, "keys not expanded", "the keys only"),
    (values_not_expanded_short_names, "values not expanded", "the values were not"),
    (keys_not_expanded_short_names, "keys not expanded", "the keys only"),
    (nothing_expanded, "head axes disagree", "once per head of its group"),
    (
        expanded_by_the_group_count,
        "repeated num_kv_groups times",
        "group_size = num_heads // num_kv_groups = 3",
    ),
    (scaled_by_the_key_width, "scaled by the key width", "√(num_kv_groups × head_dim) = √4"),
    (scaled_by_d_out, "scaled by √d_out", "√d_out = √12"),
    (scaled_by_the_group_size, "scaled by the group size", "√group_size = √3"),
    (not_scaled, "not scaled", "not scaled"),
    (no_causal_mask, "no causal mask", "no causal mask"),
    (mask_filled_with_zero, "mask filled with 0", "instead of -inf"),
    (mask_after_softmax, "mask after softmax", "after the softmax"),
    (mask_not_sliced, "mask not sliced", "self.mask[:num_tokens, :num_tokens]"),
    (softmax_over_queries, "softmax over the wrong axis", "dim=-1"),
    (merged_without_transposing_back, "heads merged without transposing back", ".transpose(1, 2)"),
    (out_proj_forgotten, "out_proj not applied", "self.out_proj(context)"),
    (dropout_on_in_eval_mode, "dropout in eval mode", "self.dropout(attn_weights)"),
    (no_dropout, "no dropout in training", "dropout=0.25"),
    (dropout_reseeded_every_call, "the same dropout every call", "do not reseed"),
    (grouped_forward("values").forward, "dropout in the wrong place", "on the values"),
    (keys_viewed_with_num_heads, "keys viewed with num_heads", "view the keys and values with"),
    (dropout_given_the_layer_as_p, "raises in training mode", "TypeError"),
    (repeated_on_the_token_axis, "repeated on the token axis", "3 × 6 tokens"),
    (repeated_on_the_token_axis_before_the_transpose, "repeated on the token axis", "dim=1"),
    (repeated_on_the_token_axis_inline, "repeated on the token axis", "token axis"),
    (cycled_on_the_token_axis, "repeated on the token axis", "token axis"),
    (heads_not_merged, "heads not merged", "still separate"),
    (returns_a_list, "not a tensor", "returned a list, not a tensor"),
    (last_token_only, "wrong shape", "should be (b, num_tokens, d_out)"),
]

MESSAGES = {m.name: m.message for m in GQA_FORWARD_MISTAKES + TRAINING_MISTAKES}


@pytest.mark.parametrize("forward, name, phrase", MISTAKEN, ids=[m[0].__name__ for m in MISTAKEN])
def test_each_mistake_fails_and_is_named(forward, name, phrase):
    result = check_gqa_forward(with_forward(forward))
    assert not result.passed
    assert phrase in result.feedback, result.feedback
    opening = MESSAGES[name].split("{")[0]
    assert result.feedback.startswith(opening), (
        f"expected the {name!r} message, got:\n{result.feedback}"
    )


def repeated_for_torch(self, x):
    """Keys and values repeated for every head, as (b, num_tokens, d_out)."""
    b, num_tokens, _ = x.shape
    shape = (b, num_tokens, self.num_kv_groups, self.head_dim)
    keys, values = self.W_key(x).view(shape), self.W_value(x).view(shape)
    keys = keys.repeat_interleave(self.group_size, dim=2).reshape(b, num_tokens, self.d_out)
    values = values.repeat_interleave(self.group_size, dim=2).reshape(b, num_tokens, self.d_out)
    return keys, values


def torch_layer(self, x, need_weights):
    """torch's own attention layer, its projections made identities, on repeated keys."""
    keys, values = repeated_for_torch(self, x)
    layer = nn.MultiheadAttention(
        self.d_out, self.num_heads, dropout=self.dropout.p, bias=False, batch_first=True
    )
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.eye(self.d_out).repeat(3, 1))
        layer.out_proj.weight.copy_(torch.eye(self.d_out))
    layer.train(self.training)
    future = self.mask[: x.shape[1], : x.shape[1]]
    context = layer(self.W_query(x), keys, values, attn_mask=future, need_weights=need_weights)
    return self.out_proj(context[0])


def torch_layer_after_the_repeat(self, x):
    return torch_layer(self, x, need_weights=True)


def torch_layer_fast_path(self, x):
    """Without the weights, the layer takes its fused fast path in eval mode."""
    return torch_layer(self, x, need_weights=False)


def functional_multi_head_attention(self, x):
    """F.multi_head_attention_forward, the function behind nn.MultiheadAttention."""
    return multi_head_attention_forward(self, self.W_query(x), *repeated_for_torch(self, x))


#: torch's own attention, which does the work the practice teaches: (forward, phrase).
TORCH_ATTENTION = [
    (sdpa_enable_gqa, "enable_gqa=True"),
    (sdpa_with_expanded_keys_and_a_mask, "scaled_dot_product_attention"),
    (scaled_by_the_key_width_in_sdpa, "enable_gqa=True"),
    (sdpa_without_is_causal, "scaled_dot_product_attention"),
    (sdpa_without_out_proj, "scaled_dot_product_attention"),
    (sdpa_dropout_always, "scaled_dot_product_attention"),
    (sdpa_without_dropout_p, "scaled_dot_product_attention"),
    (torch_layer_after_the_repeat, "torch.nn.MultiheadAttention"),
    (torch_layer_fast_path, "torch.nn.MultiheadAttention"),
    (functional_multi_head_attention, "multi_head_attention_forward"),
]


@pytest.mark.parametrize(
    "forward, phrase", TORCH_ATTENTION, ids=[f.__name__ for f, _ in TORCH_ATTENTION]
)
def test_torch_attention_is_refused_and_points_to_chapter_5(forward, phrase):
    """The kernel (with or without enable_gqa) and torch's layer do the steps and the sharing
    the practice teaches: refused, with what they do and where the book uses them."""
    result = check_gqa_forward(with_forward(forward))
    assert not result.passed
    assert phrase in result.feedback, result.feedback
    assert "Chapter 5" in result.feedback and "not yours" in result.feedback, result.feedback


def test_every_catalogued_mistake_has_a_test_here_or_among_the_refusals():
    tested = {name for _, name, _ in MISTAKEN} | {
        "torch's own attention",
        "constructor raises",
        "calls the book's code",
        "the starting code untouched",
        "projections missing",
        "keys at full width",
        "forward raises",
        "unexplained",
    }
    assert {m.name for m in GQA_FORWARD_MISTAKES + TRAINING_MISTAKES} == tested


def test_the_repeat_mistake_shows_only_when_some_groups_hold_several_heads():
    """repeat and repeat_interleave agree for one group and for one head a group, so the check
    needs a configuration with 1 < num_kv_groups < num_heads, and runs it first."""
    first = GQA_CONFIGS[0]
    assert 1 < first.num_kv_groups < first.num_heads
    assert {c.num_kv_groups for c in GQA_CONFIGS} >= {1} and any(
        c.num_kv_groups == c.num_heads for c in GQA_CONFIGS
    )
    blocks = torch.arange(2).view(1, 2, 1, 1)
    assert blocks.repeat_interleave(3, dim=1).flatten().tolist() == [0, 0, 0, 1, 1, 1]
    assert blocks.repeat(1, 3, 1, 1).flatten().tolist() == [0, 1, 0, 1, 0, 1]


def test_the_catalogues_wrong_recipes_all_differ_from_the_right_one_on_the_first_configuration():
    """A wrong recipe that computed the right output there could never be told apart."""
    from mha.checks.gqa import GroupTrial

    trial = GroupTrial(GroupedQueryAttention, GQA_CONFIGS[0])
    recipes = [
        GroupRecipe(key_map="repeat", value_map="repeat"),
        GroupRecipe(key_map="repeat"),
        GroupRecipe(value_map="repeat"),
        GroupRecipe(out_proj=False),
    ]
    recipes += [GroupRecipe(scale_by=s) for s in ("kv_width", "d_out", "group_size", "nothing")]
    recipes += [GroupRecipe(causal_mask=m) for m in ("none", "0 before softmax", "0 after softmax")]
    assert trial.matches()
    assert not any(trial.matches(recipe) for recipe in recipes)


# --- answers that do not need the skill ---------------------------------------------------------


class EmptySubclass(GroupedQueryAttention):
    pass


class CallsSuper(GroupedQueryAttention):
    def forward(self, x):
        return super().forward(x)


class CallsTheBooksForwardByName(GroupedQueryAttention):
    def forward(self, x):
        return GroupedQueryAttention.forward(self, x)


BOOKS_FORWARD = GroupedQueryAttention.forward  # taken before the check could watch the name


class CallsASavedReferenceToTheBooksForward(GroupedQueryAttention):
    def forward(self, x):
        return BOOKS_FORWARD(self, x)


class BuildsTheBooksModuleInside(GroupedQueryAttention):
    def forward(self, x):
        book = GroupedQueryAttention(
            self.W_query.in_features,
            self.d_out,
            self.context_length,
            0.0,
            self.num_heads,
            self.num_kv_groups,
        )
        book.load_state_dict(self.state_dict())
        return book.eval()(x)


class UsesTheBooksCache(GroupedQueryAttention):
    def forward(self, x):
        return generate(self, x, KVCache(self, x.shape[0], x.shape[1]))


class CopiesBlocksIntoMultiHeadAttention(GroupedQueryAttention):
    """Right output, but the attention is computed by the book's MultiHeadAttention."""

    def forward(self, x):
        bias = self.W_key.bias is not None
        mha = MultiHeadAttention(
            x.shape[-1], self.d_out, self.context_length, 0.0, self.num_heads, qkv_bias=bias
        )
        state = self.state_dict()
        for name in [key for key in state if key.startswith(("W_key", "W_value"))]:
            blocks = state[name].unflatten(0, (self.num_kv_groups, self.head_dim))
            state[name] = blocks.repeat_interleave(self.group_size, dim=0).flatten(0, 1)
        mha.load_state_dict(state)
        return mha.eval()(x)


class Skeleton(GroupedQueryAttention):
    def forward(self, x):
        b, num_tokens, _ = x.shape
        raise NotImplementedError("write the forward pass of MyGroupedQueryAttention")


def copy_of_the_books_forward(tmp_path):
    """A class whose forward is the book's, pasted in (from a file, so its source is known)."""
    body = textwrap.indent(
        textwrap.dedent(inspect.getsource(GroupedQueryAttention.forward)), "    "
    )
    path = tmp_path / "pasted.py"
    path.write_text(
        "import torch\nfrom mha import GroupedQueryAttention\n\n\n"
        f"class Pasted(GroupedQueryAttention):\n{body}"
    )
    spec = importlib.util.spec_from_file_location("pasted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.check_length = lambda *args: None  # the book's forward calls a helper of mha.gqa
    return module.Pasted


REFUSED = [
    (GroupedQueryAttention, "This is the book's own GroupedQueryAttention"),
    (EmptySubclass, "EmptySubclass does not define forward"),
    (CallsSuper, "runs the book's own GroupedQueryAttention.forward"),
    (CallsTheBooksForwardByName, "runs the book's own GroupedQueryAttention.forward"),
    (CallsASavedReferenceToTheBooksForward, "runs the book's own GroupedQueryAttention.forward"),
    (BuildsTheBooksModuleInside, "runs the book's own GroupedQueryAttention.forward"),
    (UsesTheBooksCache, "runs the book's own"),
    (CopiesBlocksIntoMultiHeadAttention, "runs the book's own MultiHeadAttention.forward"),
    (Skeleton, "still raises NotImplementedError, as the starting code does"),
]


@pytest.mark.parametrize("cls, phrase", REFUSED, ids=[r[0].__name__ for r in REFUSED])
def test_answers_that_do_not_need_the_skill_are_refused_with_a_reason(cls, phrase):
    result = check_gqa_forward(cls)
    assert not result.passed
    assert phrase in result.feedback, result.feedback


class UsesTheChecksOwnReference(GroupedQueryAttention):
    def forward(self, x):
        from mha.checks.gqa_trial import grouped_attention

        return grouped_attention(self, x, self.num_heads, self.num_kv_groups)


def test_a_forward_that_returns_the_checks_own_reference_is_refused():
    result = check_gqa_forward(UsesTheChecksOwnReference)
    assert not result.passed and "grouped_attention" in result.feedback, result.feedback


def test_a_module_a_later_chapter_adds_to_the_package_is_watched_too(monkeypatch):
    """No hand-kept list: any attention module of an ``mha`` module the reader loaded counts."""
    import types

    extra = types.ModuleType("mha.extra_attention")
    source = (
        "from mha import GroupedQueryAttention\n\n"
        "class NewAttention(GroupedQueryAttention):\n"
        "    def forward(self, x):\n"
        "        return GroupedQueryAttention.forward(self, x)\n"
    )
    exec(compile(source, "extra_attention.py", "exec"), extra.__dict__)
    monkeypatch.setitem(sys.modules, "mha.extra_attention", extra)

    class Delegates(GroupedQueryAttention):
        def forward(self, x):
            return vars(extra.NewAttention)["forward"](self, x)

    feedback = check_gqa_forward(Delegates).feedback
    assert "NewAttention.forward" in feedback, feedback


def test_the_books_own_cache_helpers_are_named_when_an_answer_uses_them():
    feedback = check_gqa_forward(UsesTheBooksCache).feedback
    assert "KVCache.append" in feedback and "attend_to_cache" in feedback


def test_a_pasted_copy_of_the_books_forward_is_refused(tmp_path):
    pasted = copy_of_the_books_forward(tmp_path)
    result = check_gqa_forward(pasted)
    assert not result.passed and "line for line" in result.feedback
    assert (
        "skeleton" not in result.feedback and "subclass of GroupedQueryAttention" in result.feedback
    )


def test_the_solution_is_not_a_copy_of_the_books_forward():
    from mha.checks.gqa import _copies_the_book

    assert not _copies_the_book(with_forward(repeat_interleave_both))


class MultiHeadSubclass(MultiHeadAttention):
    def forward(self, x):
        return super().forward(x)


class FullWidthKeys(FromScratch):
    """Keys and values with one block per head, as in MultiHeadAttention."""

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, num_kv_groups, qkv_bias=False
    ):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, num_heads, qkv_bias)


class NoProjections(nn.Module):
    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, num_kv_groups, qkv_bias=False
    ):
        super().__init__()
        self.qkv = nn.Linear(d_in, 3 * d_out)

    def forward(self, x):
        return self.qkv(x)


class NoForward(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()


class NotAModule:
    pass


OTHER_WRONG_ANSWERS = [
    (None, "got None"),
    (GroupedQueryAttention(4, 4, 4, 0.0, 2, 1), "You passed an instance of GroupedQueryAttention"),
    (repeat_interleave_both, "expects a class, but got the function repeat_interleave_both"),
    (NotAModule, "NotAModule is a class, but not an nn.Module"),
    (NoForward, "NoForward has no forward method at all"),
    (MultiHeadSubclass, "Building your class as MultiHeadSubclass(d_in=5"),
    (FullWidthKeys, "Your W_key maps d_in=5 to 12 columns"),
    (NoProjections, "could not use your instance's W_query, W_key and W_value"),
]


@pytest.mark.parametrize(
    "answer, phrase",
    OTHER_WRONG_ANSWERS,
    ids=[
        type(a).__name__ if not isinstance(a, type) else a.__name__ for a, _ in OTHER_WRONG_ANSWERS
    ],
)
def test_other_wrong_answers_are_named(answer, phrase):
    result = check_gqa_forward(answer)
    assert not result.passed
    assert phrase in result.feedback, result.feedback


# --- the check's manners ------------------------------------------------------------------------


def raises_strangely(self, x):
    raise KeyError("surprise")


def test_an_unexpected_error_in_the_answer_becomes_feedback():
    result = check_gqa_forward(with_forward(raises_strangely))
    assert not result.passed and "KeyError: 'surprise'" in result.feedback


def test_the_check_itself_never_raises_and_says_so_when_it_fails(monkeypatch):
    from mha.checks import gqa as checks

    def broken(*args, **kwargs):
        raise RuntimeError("broken check")

    monkeypatch.setattr(checks, "GroupTrial", broken)
    assert check_gqa_forward.__wrapped__ is not None
    with pytest.raises(RuntimeError):
        check_gqa_forward.__wrapped__(with_forward(repeat_interleave_both))
    result = check_gqa_forward(with_forward(repeat_interleave_both))
    assert not result.passed and "could not run" in result.feedback


def test_the_check_leaves_the_random_state_and_the_profiler_as_it_found_them():
    def profiler(frame, event, arg):
        return None

    torch.manual_seed(7)
    expected = torch.rand(1)
    torch.manual_seed(7)
    previous = sys.getprofile()
    sys.setprofile(profiler)
    try:
        assert check_gqa_forward(with_forward(repeat_interleave_both)).passed
        assert sys.getprofile() is profiler
    finally:
        sys.setprofile(previous)
    assert torch.equal(torch.rand(1), expected)


def test_hints_go_from_the_split_to_out_proj_and_never_name_the_answers_code():
    hints = [gqa_forward.hint(n).text for n in (1, 2, 3)]
    assert "num_kv_groups" in hints[0] and "out_proj" in hints[2]
    assert not any("repeat_interleave" in hint for hint in hints)
    assert "hint(1) to hint(3)" in gqa_forward.hint(4).text
