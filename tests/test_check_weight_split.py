"""check_weight_split accepts every correct way of writing a weight split and names each mistake.

Each buggy forward below differs from a correct one in a single step, and every mistake has at
least two implementations written in different styles, so the check cannot recognise a mistake by
its spelling: it has to recognise what the mistake computes.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import multi_head_attention_forward
from mha.attention import MultiHeadAttention
from mha.checks import CheckResult
from mha.checks.weight_split import check_weight_split, weight_split
from mha.starting import WeightSplitSkeleton
from test_check_dropout import split_forward

# --- the steps of a correct pass, which the buggy forwards reuse around the step they get wrong


def project(self, x):
    return self.W_query(x), self.W_key(x), self.W_value(x)  # each (b, num_tokens, d_out)


def split(self, t):
    b, num_tokens, _ = t.shape
    return t.view(b, num_tokens, self.num_heads, self.head_dim).transpose(
        1, 2
    )  # (b, num_heads, num_tokens, head_dim)


def causal_softmax(self, attn_scores):
    """Mask, scale, softmax, then the module's dropout (on in training mode only)."""
    num_tokens = attn_scores.shape[-1]
    attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
    attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
    return self.dropout(attn_weights)  # (b, num_heads, num_tokens, num_tokens)


def causal_softmax_without_dropout(self, attn_scores):
    num_tokens = attn_scores.shape[-1]
    attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
    return torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)


def merge(self, context):
    b, _, num_tokens, _ = context.shape
    return (
        context.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
    )  # (b, num_tokens, d_out)


def with_forward(forward, base=WeightSplitSkeleton):
    """A subclass of the skeleton whose forward is ``forward``, named after it."""
    return type(forward.__name__, (base,), {"forward": forward})


# --- correct styles -----------------------------------------------------------------------------


def view_transpose(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def reshape_permute(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (
        t.reshape(b, num_tokens, self.num_heads, -1).permute(0, 2, 1, 3) for t in project(self, x)
    )
    attn_weights = causal_softmax(self, queries @ keys.permute(0, 1, 3, 2))
    return self.out_proj((attn_weights @ values).permute(0, 2, 1, 3).reshape(b, num_tokens, -1))


def einsum_heads(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (
        t.reshape(b, num_tokens, self.num_heads, self.head_dim) for t in project(self, x)
    )
    attn_weights = causal_softmax(self, torch.einsum("bqhd,bkhd->bhqk", queries, keys))
    context = torch.einsum(
        "bhqk,bkhd->bqhd", attn_weights, values
    )  # (b, num_tokens, num_heads, head_dim)
    return self.out_proj(context.reshape(b, num_tokens, self.d_out))


def sdpa_is_causal(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return self.out_proj(
        merge(self, F.scaled_dot_product_attention(queries, keys, values, is_causal=True))
    )


def sdpa_with_sliced_mask(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (
        t.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2) for t in project(self, x)
    )
    visible = ~self.mask[:num_tokens, :num_tokens]
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=visible)
    return self.out_proj(context.transpose(1, 2).flatten(2))


def scale_queries_first(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_scores = (queries / math.sqrt(self.head_dim)) @ keys.transpose(2, 3)
    num_tokens = x.shape[1]
    future = torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1)
    attn_weights = torch.softmax(attn_scores.masked_fill(future, float("-inf")), dim=-1)
    return self.out_proj(merge(self, self.dropout(attn_weights) @ values))


class WithoutOutProj(nn.Module):
    """Written from scratch with no out_proj: the reference then leaves out_proj out too."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, num_tokens, d_out = x.shape[0], x.shape[1], self.num_heads * self.head_dim
        queries, keys, values = (
            layer(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
            for layer in (self.W_query, self.W_key, self.W_value)
        )
        future = torch.ones(num_tokens, num_tokens).triu(1).bool()
        attn_scores = (queries @ keys.transpose(-1, -2)).masked_fill(future, -torch.inf)
        attn_weights = self.drop(torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1))
        return (attn_weights @ values).transpose(1, 2).reshape(b, num_tokens, d_out)


def sdpa_with_dropout_in_training(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    p = self.dropout.p if self.training else 0.0
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, dropout_p=p)
    return self.out_proj(merge(self, context))


def functional_dropout_with_mode(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = causal_softmax_without_dropout(self, queries @ keys.transpose(2, 3))
    attn_weights = F.dropout(attn_weights, self.dropout.p, training=self.training)
    return self.out_proj(merge(self, attn_weights @ values))


class OwnForwardOnTheBookClass(MultiHeadAttention):
    """Subclassing the book's class is fine, as long as the forward is the reader's own."""

    forward = view_transpose


CORRECT = [WithoutOutProj, OwnForwardOnTheBookClass, weight_split.solution_code] + [
    with_forward(f)
    for f in (
        view_transpose,
        reshape_permute,
        einsum_heads,
        scale_queries_first,
        functional_dropout_with_mode,
    )
]


@pytest.mark.parametrize("cls", CORRECT, ids=lambda cls: cls.__name__)
def test_every_correct_style_of_weight_split_passes(cls):
    result = check_weight_split(cls)
    assert isinstance(result, CheckResult)
    assert result.passed, result.feedback


def test_the_exercises_solution_is_one_class_shown_as_its_source():
    text = weight_split.solution_text
    assert text.startswith("class MyWeightSplit(WeightSplitSkeleton):")
    assert all(len(line) <= 75 for line in text.splitlines())  # printed indented, <= 79


# --- mistakes: at least two implementations each --------------------------------------------


def view_straight_to_heads(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (
        t.view(b, self.num_heads, num_tokens, self.head_dim) for t in project(self, x)
    )
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def reshape_straight_to_heads_and_back(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (t.reshape(b, self.num_heads, num_tokens, -1) for t in project(self, x))
    context = causal_softmax(self, queries @ keys.transpose(2, 3)) @ values
    return self.out_proj(context.reshape(b, num_tokens, self.d_out))


def merge_with_view_only(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = (
        causal_softmax(self, queries @ keys.transpose(2, 3)) @ values
    )  # (b, num_heads, num_tokens, head_dim)
    return self.out_proj(context.contiguous().view(b, num_tokens, self.d_out))


def einsum_merge_without_transpose(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (
        t.reshape(b, num_tokens, self.num_heads, -1).permute(0, 2, 1, 3) for t in project(self, x)
    )
    attn_weights = causal_softmax(self, torch.einsum("bhqd,bhkd->bhqk", queries, keys))
    context = torch.einsum("bhqk,bhkd->bhqd", attn_weights, values)
    return self.out_proj(context.reshape(b, num_tokens, -1))


def masked_softmax(self, attn_scores, scale, *, dim=-1):
    num_tokens = attn_scores.shape[-1]
    attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
    return torch.softmax(attn_scores / scale, dim=dim)


def scaled_by_d_out(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = masked_softmax(self, queries @ keys.transpose(2, 3), self.d_out**0.5)
    return self.out_proj(merge(self, attn_weights @ values))


def scaled_by_width_before_split(self, x):
    queries, keys, values = project(self, x)
    scale = math.sqrt(keys.shape[-1])  # taken before the split: d_out, not head_dim
    queries, keys, values = (split(self, t) for t in (queries, keys, values))
    attn_weights = masked_softmax(self, queries @ keys.transpose(2, 3), scale)
    return self.out_proj(merge(self, attn_weights @ values))


def not_scaled(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return self.out_proj(
        merge(self, masked_softmax(self, queries @ keys.transpose(2, 3), 1.0) @ values)
    )


def sdpa_scale_one(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, scale=1.0)
    return self.out_proj(merge(self, context))


def no_mask(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = torch.softmax(queries @ keys.transpose(2, 3) / self.head_dim**0.5, dim=-1)
    return self.out_proj(merge(self, attn_weights @ values))


def mask_result_discarded(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_scores = queries @ keys.transpose(2, 3)
    attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)  # result thrown away
    attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
    return self.out_proj(merge(self, attn_weights @ values))


def sdpa_not_causal(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return self.out_proj(merge(self, F.scaled_dot_product_attention(queries, keys, values)))


def mask_filled_with_zero(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_scores = (queries @ keys.transpose(2, 3)).masked_fill(
        self.mask[:num_tokens, :num_tokens], 0.0
    )
    attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
    return self.out_proj(merge(self, attn_weights @ values))


def mask_multiplied_into_scores(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    visible = (~self.mask[:num_tokens, :num_tokens]).float()
    attn_weights = torch.softmax(
        (queries @ keys.transpose(2, 3)) * visible / self.head_dim**0.5, dim=-1
    )
    return self.out_proj(merge(self, attn_weights @ values))


def zeros_after_softmax(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = torch.softmax(queries @ keys.transpose(2, 3) / self.head_dim**0.5, dim=-1)
    attn_weights = attn_weights.masked_fill(self.mask[:num_tokens, :num_tokens], 0.0)
    return self.out_proj(merge(self, attn_weights @ values))


def tril_times_weights(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = torch.softmax(queries @ keys.transpose(2, 3) / self.head_dim**0.5, dim=-1)
    attn_weights = attn_weights * torch.tril(torch.ones(num_tokens, num_tokens))
    return self.out_proj(merge(self, attn_weights @ values))


def minus_inf_after_softmax(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = torch.softmax(queries @ keys.transpose(2, 3) / self.head_dim**0.5, dim=-1)
    attn_weights = attn_weights.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
    return self.out_proj(merge(self, attn_weights @ values))


def softmax_over_queries(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = masked_softmax(self, queries @ keys.transpose(2, 3), self.head_dim**0.5, dim=-2)
    return self.out_proj(merge(self, attn_weights @ values))


def softmax_over_heads(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = masked_softmax(self, queries @ keys.transpose(2, 3), self.head_dim**0.5, dim=1)
    return self.out_proj(merge(self, attn_weights @ values))


def einsum_softmax_over_queries(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (
        t.reshape(b, num_tokens, self.num_heads, self.head_dim) for t in project(self, x)
    )
    attn_scores = torch.einsum("bqhd,bkhd->bhqk", queries, keys) / self.head_dim**0.5
    attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
    attn_weights = attn_scores.softmax(dim=2)
    return self.out_proj(
        torch.einsum("bhqk,bkhd->bqhd", attn_weights, values).reshape(b, num_tokens, -1)
    )


def returns_merged_context(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values)


def projects_then_returns_the_unprojected(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values)
    output = self.out_proj(context)  # noqa: F841 (computed, then forgotten)
    return context


def two_heads_in_view(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (t.view(b, num_tokens, 2, -1).transpose(1, 2) for t in project(self, x))
    context = (
        masked_softmax(self, queries @ keys.transpose(2, 3), queries.shape[-1] ** 0.5) @ values
    )
    return self.out_proj(context.transpose(1, 2).reshape(b, num_tokens, self.d_out))


def three_heads_with_head_dim(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (
        t.view(b, num_tokens, 3, self.head_dim).transpose(1, 2) for t in project(self, x)
    )
    context = causal_softmax(self, queries @ keys.transpose(2, 3)) @ values
    return self.out_proj(context.transpose(1, 2).reshape(b, num_tokens, self.d_out))


class FourHeadsInConstructor(WeightSplitSkeleton):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads=4, qkv_bias=qkv_bias)

    forward = view_transpose


def mask_not_sliced(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_scores = (queries @ keys.transpose(2, 3)).masked_fill(self.mask, -torch.inf)
    return self.out_proj(
        merge(self, torch.softmax(attn_scores / self.head_dim**0.5, dim=-1) @ values)
    )


def mask_rows_sliced_only(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_scores = (queries @ keys.transpose(2, 3)).masked_fill(self.mask[:num_tokens], -torch.inf)
    return self.out_proj(
        merge(self, torch.softmax(attn_scores / self.head_dim**0.5, dim=-1) @ values)
    )


def sdpa_with_whole_mask(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=~self.mask)
    return self.out_proj(merge(self, context))


def not_written_yet(self, x):
    raise NotImplementedError("write the forward pass here")


def raises_value_error(self, x):
    raise ValueError("the scores are not ready")


class EmptySubclass(WeightSplitSkeleton):
    pass


def functional_dropout_always(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = causal_softmax_without_dropout(self, queries @ keys.transpose(2, 3))
    attn_weights = F.dropout(attn_weights, self.dropout.p)
    return self.out_proj(merge(self, attn_weights @ values))


def torch_dropout_train_true(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = causal_softmax_without_dropout(self, queries @ keys.transpose(2, 3))
    attn_weights = torch.dropout(attn_weights, self.dropout.p, train=True)
    return self.out_proj(merge(self, attn_weights @ values))


def dropout_left_out(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = causal_softmax_without_dropout(self, queries @ keys.transpose(2, 3))
    return self.out_proj(merge(self, attn_weights @ values))


def dropout_with_p_zero(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = causal_softmax_without_dropout(self, queries @ keys.transpose(2, 3))
    attn_weights = F.dropout(attn_weights, p=0.0, training=self.training)
    return self.out_proj(merge(self, attn_weights @ values))


def raises_in_training(self, x):
    if self.training:
        raise RuntimeError("training is not supported yet")
    return view_transpose(self, x)


def dropout_on_flattened_weights(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = causal_softmax_without_dropout(self, queries @ keys.transpose(2, 3))
    if self.training:
        attn_weights = self.dropout(attn_weights.flatten())
    return self.out_proj(merge(self, attn_weights @ values))


def mask_compared_with_zero(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    future = self.mask[:num_tokens, :num_tokens]
    attn_scores = (queries @ keys.transpose(2, 3)).masked_fill(future == 0, -torch.inf)
    attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
    return self.out_proj(merge(self, self.dropout(attn_weights) @ values))


def mask_negated(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    visible = ~self.mask.bool()[:num_tokens, :num_tokens]
    attn_scores = (queries @ keys.transpose(2, 3)).masked_fill(visible, float("-inf"))
    attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
    return self.out_proj(merge(self, self.dropout(attn_weights) @ values))


def not_scaled_in_einsum(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_scores = torch.einsum("bhqd,bhkd->bhqk", queries, keys)
    attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
    return self.out_proj(merge(self, torch.softmax(attn_scores, dim=-1) @ values))


def divided_by_the_keys_width(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = masked_softmax(self, queries @ keys.transpose(2, 3), keys.shape[-1])
    return self.out_proj(merge(self, attn_weights @ values))


def sdpa_dropout_always(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = F.scaled_dot_product_attention(
        queries, keys, values, is_causal=True, dropout_p=self.dropout.p
    )
    return self.out_proj(merge(self, context))


def merge_view_without_contiguous(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = (causal_softmax(self, queries @ keys.transpose(2, 3)) @ values).transpose(1, 2)
    return self.out_proj(context.view(b, num_tokens, self.d_out))


def einsum_merge_view_without_contiguous(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = causal_softmax(self, queries @ keys.transpose(2, 3))
    context = torch.einsum("bhqk,bhkd->bhqd", attn_weights, values)
    return self.out_proj(context.transpose(1, 2).view(b, num_tokens, -1))


def keys_transposed_as_in_one_head(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(1, 2)) @ values))


def matmul_keys_transposed_as_in_one_head(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    scores = torch.matmul(queries, keys.transpose(-3, -2))
    return self.out_proj(merge(self, causal_softmax(self, scores) @ values))


def weights_without_bias(self, x):
    queries, keys, values = (
        split(self, x @ layer.weight.T) for layer in (self.W_query, self.W_key, self.W_value)
    )
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def functional_linear_without_bias(self, x):
    layers = (self.W_query, self.W_key, self.W_value)
    queries, keys, values = (split(self, F.linear(x, layer.weight)) for layer in layers)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def keys_from_w_query(self, x):
    queries, keys, values = (
        split(self, t) for t in (self.W_query(x), self.W_query(x), self.W_value(x))
    )
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def values_from_w_key(self, x):
    queries, keys, values = (
        split(self, t) for t in (self.W_query(x), self.W_key(x), self.W_key(x))
    )
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def strided(self, t):
    b, num_tokens, _ = t.shape
    return t.view(b, num_tokens, self.head_dim, self.num_heads).permute(0, 3, 1, 2)


def strided_split_and_merge(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (strided(self, t) for t in project(self, x))
    context = causal_softmax(self, queries @ keys.transpose(2, 3)) @ values  # (b, h, t, d)
    return self.out_proj(context.permute(0, 2, 3, 1).reshape(b, num_tokens, self.d_out))


def strided_by_slicing(self, x):
    heads = [[t[..., h :: self.num_heads] for h in range(self.num_heads)] for t in project(self, x)]
    queries, keys, values = (torch.stack(parts, dim=1) for parts in heads)
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values))


def heads_flipped_before_merge(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = causal_softmax(self, queries @ keys.transpose(2, 3)) @ values
    return self.out_proj(merge(self, context.flip(1)))


def heads_concatenated_last_first(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = causal_softmax(self, queries @ keys.transpose(2, 3)) @ values
    return self.out_proj(torch.cat(list(context.unbind(1))[::-1], dim=-1))


def merge_through_head_dim_last(self, x):
    b, num_tokens, _ = x.shape
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = causal_softmax(self, queries @ keys.transpose(2, 3)) @ values
    return self.out_proj(context.permute(0, 2, 3, 1).reshape(b, num_tokens, self.d_out))


def heads_stacked_last(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = causal_softmax(self, queries @ keys.transpose(2, 3)) @ values
    return self.out_proj(torch.stack(list(context.unbind(1)), dim=-1).flatten(-2))


def divided_by_head_dim(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    attn_weights = masked_softmax(self, queries @ keys.transpose(2, 3), self.head_dim)
    return self.out_proj(merge(self, attn_weights @ values))


def sdpa_scale_one_over_head_dim(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = F.scaled_dot_product_attention(
        queries, keys, values, is_causal=True, scale=1 / self.head_dim
    )
    return self.out_proj(merge(self, context))


def diagonal_in_the_mask(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    hidden = torch.triu(torch.ones(num_tokens, num_tokens), diagonal=0).bool()
    attn_scores = (queries @ keys.transpose(2, 3)).masked_fill(hidden, -torch.inf)
    return self.out_proj(
        merge(self, torch.softmax(attn_scores / self.head_dim**0.5, dim=-1) @ values)
    )


def strict_lower_triangle_visible(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    visible = torch.tril(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=-1)
    attn_scores = (queries @ keys.transpose(2, 3)).masked_fill(~visible, float("-inf"))
    return self.out_proj(
        merge(self, torch.softmax(attn_scores / self.head_dim**0.5, dim=-1) @ values)
    )


def sdpa_given_the_mask(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    context = F.scaled_dot_product_attention(
        queries, keys, values, attn_mask=self.mask[:num_tokens, :num_tokens]
    )
    return self.out_proj(merge(self, context))


def sdpa_given_the_bool_mask(self, x):
    num_tokens = x.shape[1]
    queries, keys, values = (split(self, t) for t in project(self, x))
    future = self.mask[:num_tokens, :num_tokens]
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=future)
    return self.out_proj(merge(self, context))


def keys_not_transposed(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return self.out_proj(merge(self, causal_softmax(self, queries @ keys) @ values))


def heads_left_separate(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return causal_softmax(self, queries @ keys.transpose(2, 3)) @ values


def heads_transposed_back_not_merged(self, x):
    queries, keys, values = (split(self, t) for t in project(self, x))
    return (causal_softmax(self, queries @ keys.transpose(2, 3)) @ values).transpose(1, 2)


def last_token_only(self, x):
    return view_transpose(self, x)[:, -1]  # (b, d_out)


def first_sequence_only(self, x):
    return view_transpose(self, x)[0]  # (num_tokens, d_out)


def returns_nothing(self, x):
    view_transpose(self, x)


def returns_a_list(self, x):
    return view_transpose(self, x).tolist()


class RenamedArguments(WeightSplitSkeleton):
    def __init__(self, d_in, d_out, context_len, dropout, n_heads):
        super().__init__(d_in, d_out, context_len, dropout, n_heads)


class RefusesToBuild(WeightSplitSkeleton):
    def __init__(self, **kwargs):
        raise ValueError("this class is still being written")


class ForgetsSuperInit(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        self.W_query = nn.Linear(d_in, d_out)


class RenamedProjections(WeightSplitSkeleton):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.query, self.key, self.value = self.W_query, self.W_key, self.W_value
        del self.W_query, self.W_key, self.W_value

    def forward(self, x):
        queries, keys, values = (
            split(self, layer(x)) for layer in (self.query, self.key, self.value)
        )
        return self.out_proj(
            merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values)
        )


class ProjectionsAsMatrices(WeightSplitSkeleton):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.W_key = nn.Parameter(torch.randn(d_in, d_out))

    def forward(self, x):
        queries, values = split(self, self.W_query(x)), split(self, self.W_value(x))
        keys = split(self, x @ self.W_key)
        return self.out_proj(
            merge(self, causal_softmax(self, queries @ keys.transpose(2, 3)) @ values)
        )


class PerHeadWidth(WeightSplitSkeleton):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out * num_heads, context_length, dropout, num_heads, qkv_bias)

    forward = view_transpose


class HeadDimAsDOut(WeightSplitSkeleton):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out // num_heads, context_length, dropout, 1, qkv_bias)

    forward = view_transpose


MISTAKES = {
    "heads split wrong: viewed without transpose, or strided": (
        [view_straight_to_heads, reshape_straight_to_heads_and_back]
        + [strided_split_and_merge, strided_by_slicing],
        "Your heads are split wrong",
    ),
    "heads merged wrong: without transpose, in reverse order or interleaved": (
        [merge_with_view_only, einsum_merge_without_transpose]
        + [heads_flipped_before_merge, heads_concatenated_last_first]
        + [merge_through_head_dim_last, heads_stacked_last],
        "the merge puts it in the wrong columns",
    ),
    "not scaled, or scaled by √d_out or head_dim": (
        [not_scaled, not_scaled_in_einsum, scaled_by_d_out, scaled_by_width_before_split]
        + [divided_by_head_dim, divided_by_the_keys_width],
        "not scaled by √head_dim",
    ),
    "the fused kernel": (
        [
            sdpa_is_causal,
            sdpa_with_sliced_mask,
            sdpa_with_dropout_in_training,
            sdpa_scale_one,
            sdpa_not_causal,
            sdpa_with_whole_mask,
            sdpa_dropout_always,
            sdpa_scale_one_over_head_dim,
            sdpa_given_the_mask,
            sdpa_given_the_bool_mask,
        ],
        "Your forward calls torch.nn.functional.scaled_dot_product_attention",
    ),
    "no causal mask, filled with 0, or after the softmax": (
        [no_mask, mask_result_discarded, mask_filled_with_zero, mask_multiplied_into_scores]
        + [zeros_after_softmax, tril_times_weights, minus_inf_after_softmax],
        "no causal mask",
    ),
    "mask inverted or hiding the diagonal": (
        [
            mask_compared_with_zero,
            mask_negated,
            diagonal_in_the_mask,
            strict_lower_triangle_visible,
        ],
        "Your mask hides the wrong tokens",
    ),
    "forward raises in training mode": (
        [raises_in_training, dropout_on_flattened_weights],
        "in training mode (after module.train()) it raised",
    ),
    "softmax over the wrong axis": (
        [softmax_over_queries, softmax_over_heads, einsum_softmax_over_queries],
        "softmax runs over the wrong axis",
    ),
    "out_proj not applied": (
        [returns_merged_context, projects_then_returns_the_unprojected],
        "never applies it",
    ),
    "head count hard-coded": (
        [two_heads_in_view, three_heads_with_head_dim, FourHeadsInConstructor],
        "the count is in the code",
    ),
    "mask not sliced": (
        [mask_not_sliced, mask_rows_sliced_only],
        "cut the mask to the input's length",
    ),
    "forward raises": ([raises_value_error, keys_not_transposed], "raised"),
    "the starting code": (
        [not_written_yet, EmptySubclass, WeightSplitSkeleton],
        "this is the starting code",
    ),
    "no dropout in training, or dropout in the wrong place": (
        [dropout_left_out, dropout_with_p_zero, split_forward("values"), split_forward("output")],
        "Dropout belongs on the attention weights",
    ),
    "dropout on in eval mode": (
        [functional_dropout_always, torch_dropout_train_true],
        "even in eval mode",
    ),
    "view of a transposed tensor": (
        [merge_view_without_contiguous, einsum_merge_view_without_contiguous],
        "Call .contiguous() before",
    ),
    "keys transposed on the wrong axes": (
        [keys_transposed_as_in_one_head, matmul_keys_transposed_as_in_one_head],
        "transposed on axes 1 and 2",
    ),
    "projection biases bypassed": (
        [weights_without_bias, functional_linear_without_bias],
        "skip the biases",
    ),
    "a projection used in the wrong place": (
        [keys_from_w_query, values_from_w_key],
        "Queries come from W_query",
    ),
    "wrong shape or not a tensor, heads not merged": (  # d_out per head: the wrong width
        [last_token_only, first_sequence_only, returns_nothing, returns_a_list]
        + [PerHeadWidth, HeadDimAsDOut, heads_left_separate, heads_transposed_back_not_merged],
        "not a tensor of shape (b, num_tokens, d_out)",
    ),
    "constructor raises": (
        [RenamedArguments, RefusesToBuild, ForgetsSuperInit],
        "Building your class as",
    ),
    "projections missing": (
        [RenamedProjections, ProjectionsAsMatrices],
        "could not use your instance's",
    ),
}

BUGGY = [
    pytest.param(
        impl if isinstance(impl, type) else with_forward(impl),
        mistake,
        phrase,
        id=f"{mistake}: {impl.__name__}",
    )
    for mistake, (impls, phrase) in MISTAKES.items()
    for impl in impls
]


@pytest.mark.parametrize("cls, mistake, phrase", BUGGY)
def test_each_known_mistake_is_rejected_and_named_as_itself_and_no_other(cls, mistake, phrase):
    """Distinct mistakes give distinct outputs in the check's configurations: no borrowed name."""
    result = check_weight_split(cls)
    assert not result.passed
    assert phrase in result.feedback, result.feedback
    others = [
        m
        for m, (_, p) in MISTAKES.items()
        if m != mistake and p != "raised" and p in result.feedback
    ]
    assert not others, f"also named as {others}: {result.feedback}"


def test_every_mistake_in_the_catalogue_is_tested():
    from mha.checks.split_mistakes import EARLY
    from mha.checks.split_mistakes import MISTAKES as CATALOGUE

    phrases = [phrase for _, phrase in MISTAKES.values()]
    messages = [message for _, message in EARLY + CATALOGUE[:-1]]
    assert not [m for m in messages if not any(phrase in m for phrase in phrases)]


class MetaclassMischief(type):
    def __getattribute__(cls, name):
        if name == "__name__":
            raise RuntimeError("no name for you")
        return super().__getattribute__(name)


@pytest.mark.parametrize(
    "answer",
    [
        nn.Module,
        nn.Linear,
        with_forward(lambda self, x: torch.zeros(1, dtype=torch.int64)),
        with_forward(
            lambda self, x: torch.full((x.shape[0], x.shape[1], self.d_out), float("nan"))
        ),
        with_forward(lambda self, x: (view_transpose(self, x), None)),
        MetaclassMischief("Odd", (nn.Module,), {}),
        type("Empty", (), {}),
        [MultiHeadAttention],
        object(),
    ],
    ids=[
        "nn.Module",
        "nn.Linear",
        "int tensor",
        "all nan",
        "tuple",
        "metaclass",
        "empty class",
        "list",
        "object",
    ],
)
def test_the_check_never_raises_and_always_explains(answer):
    result = check_weight_split.__wrapped__(answer)  # without the never_raises safety net
    assert isinstance(result, CheckResult) and not result.passed and result.feedback


def test_the_check_leaves_the_readers_random_state_alone():
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    check_weight_split(with_forward(view_transpose))
    check_weight_split(with_forward(no_mask))
    check_weight_split(with_forward(functional_dropout_always))
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize("cls", [with_forward(not_written_yet), EmptySubclass, WeightSplitSkeleton])
def test_feedback_on_the_starting_code_asks_instead_of_telling(cls):
    feedback = check_weight_split(cls).feedback
    assert "starting code" in feedback and "?" in feedback and "first hint" in feedback
    for fix in ("view(", "transpose(", "softmax", "masked_fill", "out_proj("):
        assert fix not in feedback


def book_delegation(self, x):
    return MultiHeadAttention.forward(self, x)


def through_the_wrapper(self, x):
    wrapper = self.to_wrapper()
    return self.out_proj(wrapper(x))


class BookInside(WeightSplitSkeleton):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inner = MultiHeadAttention(*args, **kwargs)

    def forward(self, x):
        self.inner.load_state_dict(self.state_dict(), strict=False)
        return self.inner(x)


class EmptyBookSubclass(MultiHeadAttention):
    pass


class SuperForward(MultiHeadAttention):
    def forward(self, x):
        return super().forward(x)


def test_hints_go_from_the_idea_to_the_shapes_to_code_and_stop_short_of_the_solution():
    idea, shapes, code = weight_split.hints
    assert "(" not in idea  # words only
    assert "(b, num_heads, num_tokens, head_dim)" in shapes and "self." not in shapes
    assert "transpose(1, 2)" in code
    assert "class " not in code and "def forward" not in code and "return" not in code
    assert "There are 3 hints" in str(weight_split.hint(4))
    assert "hint(1)" in str(weight_split.hint("1"))
    assert "class MyWeightSplit(WeightSplitSkeleton)" in str(weight_split.solution())


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_the_skeleton_has_the_books_layers_and_seeded_weights(qkv_bias):
    torch.manual_seed(123)
    skeleton = WeightSplitSkeleton(3, 6, 6, 0.1, num_heads=3, qkv_bias=qkv_bias)
    torch.manual_seed(123)
    book = MultiHeadAttention(3, 6, 6, 0.1, num_heads=3, qkv_bias=qkv_bias)
    pairs = zip(skeleton.named_parameters(), book.named_parameters(), strict=True)
    assert all(n == m and torch.equal(a, b) for (n, a), (m, b) in pairs)
    assert skeleton.mask.dtype == torch.bool
    assert torch.equal(skeleton.mask, book.mask)
    assert (skeleton.num_heads, skeleton.head_dim, skeleton.d_out) == (3, 2, 6)


def torch_layer(self, x, need_weights):
    """torch's own attention layer on the skeleton's projections, its own made identities."""
    num_tokens, E = x.shape[1], self.d_out
    layer = nn.MultiheadAttention(E, self.num_heads, self.dropout.p, bias=False, batch_first=True)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
        layer.out_proj.weight.copy_(torch.eye(E))
    layer.train(self.training)
    future = self.mask[:num_tokens, :num_tokens]
    queries, keys, values = project(self, x)
    context = layer(queries, keys, values, attn_mask=future, need_weights=need_weights)[0]
    return self.out_proj(context)


def torch_layer_with_weights(self, x):
    return torch_layer(self, x, need_weights=True)


def torch_layer_fast_path(self, x):
    return torch_layer(self, x, need_weights=False)


def functional_multi_head_attention(self, x):
    """F.multi_head_attention_forward, the function behind nn.MultiheadAttention."""
    return multi_head_attention_forward(self, *project(self, x))


def test_the_success_message_names_what_was_checked_and_the_training_run_restores_the_mode():
    class Solution(weight_split.solution_code):
        pass

    result = check_weight_split(Solution)
    assert result.passed
    assert "on whole attention weights in training mode" in result.feedback
    assert "without torch's own attention" in result.feedback


#: More answers, each with its verdict and the words its feedback must contain: what the
#: answer is, the book's own class or forward, PyTorch's attention, errors and dropout.
CASES = [
    (None, False, "got None"),
    (MultiHeadAttention(3, 4, 6, 0.0, num_heads=2), False, "instance of MultiHeadAttention, not"),
    (view_transpose, False, "the function view_transpose"),
    ("MultiHeadAttention", False, "got a str"),
    (42, False, "got an int"),
    (dict, False, "not an nn.Module"),
    (RefusesToBuild, False, "ValueError: this class is still being written"),
    (RenamedArguments, False, "unexpected keyword argument"),
    (with_forward(raises_value_error), False, "ValueError: the scores are not ready"),
    (with_forward(two_heads_in_view), False, "as if it had 2 heads"),
    (with_forward(three_heads_with_head_dim), False, "as if it had 3 heads"),
    (FourHeadsInConstructor, False, "as if it had 4 heads"),
    (MultiHeadAttention, False, "the book's own class"),
    (EmptyBookSubclass, False, "is MultiHeadAttention.forward, the book's own"),
    (SuperForward, False, "hands its work to the book's MultiHeadAttention.forward"),
    (with_forward(book_delegation), False, "hands its work to the book's MultiHeadAttention"),
    (with_forward(through_the_wrapper, MultiHeadAttention), False, "CausalAttention"),
    (BookInside, False, "hands its work to the book's"),
    (with_forward(sdpa_given_the_mask), False, "Chapter 5's practice uses it"),
    (with_forward(sdpa_given_the_bool_mask), False, "Chapter 5's practice uses it"),
    (with_forward(torch_layer_with_weights), False, "torch.nn.MultiheadAttention"),
    (with_forward(torch_layer_fast_path), False, "torch.nn.MultiheadAttention"),
    (with_forward(functional_multi_head_attention), False, "torch.nn.MultiheadAttention"),
    (with_forward(sdpa_is_causal), False, "Chapter 5's practice"),
    (with_forward(dropout_left_out), False, "ever dropped"),
    (with_forward(functional_dropout_always), False, "even in eval mode"),
    (with_forward(functional_dropout_with_mode), True, "matches the reference"),
]


@pytest.mark.parametrize(("answer", "passes", "words"), CASES)
def test_each_answer_gets_its_verdict_and_words(answer, passes, words):
    result = check_weight_split(answer)
    assert result.passed == passes and words in result.feedback, result.feedback
    assert MultiHeadAttention.forward.__name__ == "forward"  # the book's forward is restored
    torch_attention = "PyTorch's" in result.feedback
    assert not torch_attention or "not yours" in result.feedback
    assert "attn_mask" not in result.feedback
