"""check_gqa_forward, as one table of cases: every correct style of grouped-query attention
passes, every known mistake and shortcut fails with a message that names it.

Each buggy forward differs from a correct one in one step; most mistakes are written in two
styles, so the check must recognise what a mistake computes, not how it is spelled.
"""

import importlib.util
import inspect
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import multi_head_attention_forward
from mha import GroupedQueryAttention, MultiHeadAttention
from mha.checks.gqa import check_gqa_forward, gqa_forward
from mha.gqa import KVCache, generate

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


def dropout_at(where, how=lambda self, t: self.dropout(t)):
    """The solution's pass with ``how`` (dropout) applied at ``where`` instead of the weights."""

    def forward(self, x):
        at = lambda place, t: how(self, t) if place == where else t  # noqa: E731
        queries, keys, values = split(self, x)
        keys, values = interleave(self, keys), at("values", interleave(self, values))
        n = x.shape[1]
        scores = (queries @ keys.mT).masked_fill(self.mask[:n, :n], -torch.inf)
        weights = torch.softmax(at("scores", scores) / self.head_dim**0.5, dim=-1)
        context = merge(self, at("weights", weights) @ values)
        return at("output", self.out_proj(at("context", context)))

    return forward


def hand_drawn_mask(self, t):
    """Dropout written out: a mask drawn with rand_like, the kept weights scaled up."""
    p = self.dropout.p
    return t * (torch.rand_like(t) > p) / (1 - p) if self.training and p else t


def bernoulli_mask(self, t):
    p = self.dropout.p
    return t * torch.bernoulli(torch.full_like(t, 1 - p)) / (1 - p) if self.training and p else t


def noise(self, t):
    return t + 0.05 * torch.randn_like(t) if self.training else t


class BadInit(GroupedQueryAttention):
    def __init__(self, *args, **kwargs):
        raise ZeroDivisionError("division by zero")

    forward = repeat_interleave_both


def raises_strangely(self, x):
    raise KeyError("surprise")


def pasted():
    """A class whose forward is the book's, pasted in (from a file, so its source is known)."""
    import tempfile
    from pathlib import Path

    body = textwrap.indent(
        textwrap.dedent(inspect.getsource(GroupedQueryAttention.forward)), "    "
    )
    path = Path(tempfile.mkdtemp()) / "pasted.py"
    path.write_text(
        "import torch\nfrom mha import GroupedQueryAttention\n\n\n"
        f"class Pasted(GroupedQueryAttention):\n{body}"
    )
    spec = importlib.util.spec_from_file_location("pasted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.check_length = lambda *args: None  # the book's forward calls a helper of mha.gqa
    return module.Pasted


F_ = with_forward
#: (answer, passes, words its message must contain): a forward is made a subclass of the book's.
CASES = [
    # correct styles
    (FromScratch, True, "matches the reference in all 5"),
    (solution_class(), True, "matches the reference in all 5"),
    *(
        (F_(f), True, "matches the reference in all 5")
        for f in (
            repeat_interleave_both,
            expand_and_reshape,
            queries_grouped_instead,
            einsum_groups,
            repeated_before_the_transpose,
            functional_dropout,
            dropout_at("weights"),
            dropout_at("weights", hand_drawn_mask),
            dropout_at("weights", bernoulli_mask),
        )
    ),
    # what a mistake computes
    (F_(cycled_groups), False, "repeat_interleave(group_size, dim=1)"),
    (F_(cycled_by_expanding_the_wrong_axis), False, "h % num_kv_groups"),
    (F_(values_cycled_keys_interleaved), False, "another group's"),
    (F_(keys_cycled_values_interleaved), False, "another group's"),
    (F_(scaled_by_the_key_width), False, "not scaled by √head_dim"),
    (F_(scaled_by_d_out), False, "not scaled by √head_dim"),
    (F_(scaled_by_the_group_size), False, "not scaled by √head_dim"),
    (F_(not_scaled), False, "not scaled"),
    (F_(no_causal_mask), False, "no causal mask"),
    (F_(mask_filled_with_zero), False, "instead of -inf"),
    (F_(mask_after_softmax), False, "after the softmax"),
    (F_(softmax_over_queries), False, "dim=-1"),
    (F_(merged_without_transposing_back), False, ".transpose(1, 2)"),
    (F_(out_proj_forgotten), False, "self.out_proj(context)"),
    (F_(heads_not_merged), False, "still separate"),
    (F_(returns_a_list), False, "returned a list, not a tensor"),
    (F_(last_token_only), False, "not a tensor of shape (b, num_tokens, d_out), here"),
    # a forward that raises, read from the call that failed
    (F_(values_not_expanded), False, "once per head of its group"),
    (F_(values_not_expanded_with_matmul), False, "once per head of its group"),
    (F_(values_not_expanded_short_names), False, "once per head of its group"),
    (F_(keys_not_expanded), False, "once per head of its group"),
    (F_(keys_not_expanded_short_names), False, "once per head of its group"),
    (F_(nothing_expanded), False, "once per head of its group"),
    (F_(expanded_by_the_group_count), False, "group_size = num_heads // num_kv_groups = 3"),
    (F_(keys_viewed_with_num_heads), False, "view the keys and values with"),
    (F_(mask_not_sliced), False, "self.mask[:num_tokens, :num_tokens]"),
    (F_(repeated_on_the_token_axis), False, "token axis"),
    (F_(repeated_on_the_token_axis_before_the_transpose), False, "dim=1"),
    (F_(repeated_on_the_token_axis_inline), False, "token axis"),
    (F_(cycled_on_the_token_axis), False, "token axis"),
    (F_(raises_strangely), False, "KeyError: 'surprise'"),
    # dropout: off in eval mode, on the weights in training, a new mask every call
    (F_(dropout_on_in_eval_mode), False, "self.dropout(attn_weights)"),
    (F_(no_dropout), False, "dropout=0.25"),
    (F_(dropout_reseeded_every_call), False, "do not reseed"),
    (F_(dropout_given_the_layer_as_p), False, "TypeError"),
    (F_(dropout_at("values")), False, "not what dropout of whole attention weights gives"),
    (F_(dropout_at("context")), False, "not what dropout of whole attention weights gives"),
    (F_(dropout_at("output")), False, "not what dropout of whole attention weights gives"),
    (F_(dropout_at("scores")), False, "nan"),
    (F_(dropout_at("weights", noise)), False, "noise, not dropout. Dropout belongs on"),
    # PyTorch's own attention
    (F_(sdpa_enable_gqa), False, "enable_gqa=True"),
    (F_(sdpa_with_expanded_keys_and_a_mask), False, "scaled_dot_product_attention"),
    (F_(scaled_by_the_key_width_in_sdpa), False, "enable_gqa=True"),
    (F_(sdpa_without_is_causal), False, "Chapter 5"),
    (F_(sdpa_without_out_proj), False, "not yours"),
    (F_(sdpa_dropout_always), False, "scaled_dot_product_attention"),
    (F_(sdpa_without_dropout_p), False, "scaled_dot_product_attention"),
    (F_(torch_layer_after_the_repeat), False, "torch.nn.MultiheadAttention"),
    (F_(torch_layer_fast_path), False, "torch.nn.MultiheadAttention"),
    (F_(functional_multi_head_attention), False, "multi_head_attention_forward"),
    # the book's own work, and the starting code
    (GroupedQueryAttention, False, "GroupedQueryAttention is one of the book's own modules"),
    (EmptySubclass, False, "EmptySubclass does not define forward"),
    (CallsSuper, False, "hands its work to the book's GroupedQueryAttention.forward"),
    (
        CallsTheBooksForwardByName,
        False,
        "hands its work to the book's GroupedQueryAttention.forward",
    ),
    (
        CallsASavedReferenceToTheBooksForward,
        False,
        "hands its work to the book's GroupedQueryAttention",
    ),
    (
        BuildsTheBooksModuleInside,
        False,
        "hands its work to the book's GroupedQueryAttention.forward",
    ),
    (UsesTheBooksCache, False, "hands its work to the book's attend_to_cache"),
    (
        CopiesBlocksIntoMultiHeadAttention,
        False,
        "hands its work to the book's MultiHeadAttention.forward",
    ),
    (pasted(), False, "line for line"),
    (Skeleton, False, "still raises NotImplementedError, as the starting code does"),
    # not a grouped-query class
    (None, False, "got None"),
    (GroupedQueryAttention(4, 4, 4, 0.0, 2, 1), False, "an instance of GroupedQueryAttention"),
    (repeat_interleave_both, False, "expects a class, but got the function repeat_interleave"),
    (NotAModule, False, "NotAModule is a class, but not an nn.Module"),
    (NoForward, False, "NoForward has no forward method at all"),
    (MultiHeadSubclass, False, "MultiHeadSubclass is one of the book's own modules"),
    (BadInit, False, "Building your class as BadInit(d_in=5, d_out=12"),
    (FullWidthKeys, False, "no mistake this check knows"),  # an unrealistic constructor
    (NoProjections, False, "could not use your instance's W_query, W_key or W_value"),
]


@pytest.mark.parametrize("answer, passes, words", CASES, ids=lambda v: getattr(v, "__name__", None))
def test_the_check(answer, passes, words):
    result = check_gqa_forward(answer)
    assert result.passed == passes and words in result.feedback, result.feedback
    assert "{" not in result.feedback and all(len(line) <= 79 for line in str(result).split("\n"))
    assert ",," not in result.feedback and " ," not in result.feedback, result.feedback


def test_the_check_leaves_the_readers_random_state_and_the_book_alone():
    torch.manual_seed(7)
    expected = torch.rand(1)
    torch.manual_seed(7)
    assert check_gqa_forward(with_forward(repeat_interleave_both)).passed
    assert torch.equal(torch.rand(1), expected)
    import mha.gqa

    assert mha.gqa.check_length.__module__ == "mha.gqa" and F.dropout.__module__.startswith("torch")


def test_the_hints_lead_to_the_solution_without_its_code():
    hints = [gqa_forward.hint(n).text for n in (1, 2, 3)]
    assert "num_kv_groups" in hints[0] and "out_proj" in hints[2]
    assert not any("repeat_interleave" in hint for hint in hints)
    assert gqa_forward.solution_code.rstrip().endswith("check_gqa_forward(MyGroupedQueryAttention)")
