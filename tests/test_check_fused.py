"""The fused-attention practice of chapter 5: correct forwards in several styles pass, and every
catalogued mistake and shortcut fails with its own message."""

import pytest
import torch
import torch.nn.functional as F

from mha import FusedMultiHeadAttention, MultiHeadAttention
from mha.checks.core import CheckResult
from mha.checks.fused import (
    AFTER_MATCH_MISTAKES,
    FUSED_MISTAKES,
    NOT_A_CLASS_MISTAKES,
    FusedAttentionStart,
    check_fused_attention,
    fused_attention,
)
from test_check_dropout import fused_forward


def reader_class(forward, name=None):
    """A class on the starting point whose forward is ``forward``, as a reader would write it."""
    return type(name or forward.__name__, (FusedAttentionStart,), {"forward": forward})


def heads(self, x, order="3, heads"):
    """Queries, keys and values as 3 × (b, num_heads, num_tokens, head_dim)."""
    b, num_tokens, _ = x.shape
    if order == "3, heads":
        qkv = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim)
        return qkv.permute(2, 0, 3, 1, 4)
    qkv = self.qkv(x).view(b, num_tokens, self.num_heads, 3, self.head_dim)
    return qkv.permute(3, 0, 2, 1, 4)


def dropout(self):
    return self.dropout_p if self.training else 0.0


def merge(self, context):
    b, _, num_tokens, _ = context.shape
    return context.transpose(1, 2).reshape(b, num_tokens, self.d_out)


# --- correct styles ------------------------------------------------------------------------------


def permute_is_causal(self, x):
    q, k, v = heads(self, x)
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    return self.out_proj(merge(self, context))


def chunk_keep_mask(self, x):
    b, num_tokens, _ = x.shape
    q, k, v = (
        t.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        for t in self.qkv(x).chunk(3, dim=-1)
    )
    keep = ~self.mask[:num_tokens, :num_tokens]  # True where attention is allowed
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout(self))
    return self.out_proj(context.permute(0, 2, 1, 3).flatten(2))


def unflatten_movedim(self, x):
    qkv = self.qkv(x).unflatten(-1, (3, self.num_heads, self.head_dim))
    q, k, v = qkv.movedim(-3, 0).movedim(-2, 2)  # 3 × (b, num_heads, num_tokens, head_dim)
    p = self.dropout_p if self.training else 0.0
    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    return self.out_proj(context.movedim(1, 2).flatten(-2))


def float_mask(self, x):
    q, k, v = heads(self, x)
    n = x.shape[1]
    bias = torch.zeros(n, n).masked_fill(self.mask[:n, :n], -torch.inf)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout(self))
    return self.out_proj(merge(self, context))


def split_contiguous_view(self, x):
    b, num_tokens, _ = x.shape
    q, k, v = (
        t.contiguous().view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        for t in self.qkv(x).split(self.d_out, dim=-1)
    )
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    return self.out_proj(context.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out))


@pytest.mark.parametrize(
    "forward",
    [permute_is_causal, chunk_keep_mask, unflatten_movedim, float_mask, split_contiguous_view],
)
def test_correct_forwards_in_several_styles_pass(forward):
    result = check_fused_attention(reader_class(forward))
    assert isinstance(result, CheckResult) and result.passed, result.feedback


def test_the_solution_passes():
    namespace = {
        "FusedAttentionStart": FusedAttentionStart,
        "F": F,
        "torch": torch,
        "fused_attention": fused_attention,
    }
    code = fused_attention.solution().text.replace("fused_attention.check(MyFusedAttention)", "")
    exec(code, namespace)
    assert check_fused_attention(namespace["MyFusedAttention"]).passed


# --- mistakes ------------------------------------------------------------------------------------


def no_mask(self, x):
    q, k, v = heads(self, x)
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self))
    return self.out_proj(merge(self, context))


def inverted_mask(self, x):
    q, k, v = heads(self, x)
    n = x.shape[1]
    context = F.scaled_dot_product_attention(
        q, k, v, attn_mask=self.mask[:n, :n], dropout_p=dropout(self)
    )
    return self.out_proj(merge(self, context))


def unsliced_mask(self, x):
    q, k, v = heads(self, x)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=~self.mask, dropout_p=dropout(self))
    return self.out_proj(merge(self, context))


def tokens_before_heads(self, x):
    b, num_tokens, _ = x.shape
    q, k, v = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim).unbind(2)
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    return self.out_proj(context.reshape(b, num_tokens, self.d_out))


def viewed_straight(self, x):
    b, num_tokens, _ = x.shape
    q, k, v = (
        t.reshape(b, self.num_heads, num_tokens, self.head_dim)
        for t in self.qkv(x).chunk(3, dim=-1)
    )
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    return self.out_proj(merge(self, context))


def chunk_then_view(self, x):
    b, num_tokens, _ = x.shape
    q, k, v = (
        t.view(b, self.num_heads, num_tokens, self.head_dim) for t in self.qkv(x).chunk(3, dim=-1)
    )
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    return self.out_proj(merge(self, context))


def decoy_kernel_call(self, x):
    q, k, v = heads(self, x)
    F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    n = x.shape[1]
    scores = (q @ k.transpose(2, 3)).masked_fill(self.mask[:n, :n], -torch.inf)
    weights = torch.dropout(torch.softmax(scores / self.head_dim**0.5, dim=-1), dropout(self), True)
    return self.out_proj(merge(self, weights @ v))


def decoy_kept_in_a_variable(self, x):
    q, k, v = heads(self, x)
    unused = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: F841
    return step_by_step(self, x)


def merged_without_transpose(self, x):
    q, k, v = heads(self, x)
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    return self.out_proj(context.reshape(x.shape[0], x.shape[1], self.d_out))


def interleaved_qkv(self, x):
    q, k, v = heads(self, x, order="heads, 3")
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    return self.out_proj(merge(self, context))


def scaled_twice(self, x):
    q, k, v = heads(self, x)
    context = F.scaled_dot_product_attention(
        q / self.head_dim**0.5, k, v, dropout_p=dropout(self), is_causal=True
    )
    return self.out_proj(merge(self, context))


def no_out_proj(self, x):
    q, k, v = heads(self, x)
    return merge(
        self, F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)
    )


def dropout_always(self, x):
    q, k, v = heads(self, x)
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout_p, is_causal=True)
    return self.out_proj(merge(self, context))


def dropout_never(self, x):
    q, k, v = heads(self, x)
    return self.out_proj(merge(self, F.scaled_dot_product_attention(q, k, v, is_causal=True)))


def step_by_step(self, x):
    q, k, v = heads(self, x)
    n = x.shape[1]
    scores = (q @ k.transpose(2, 3)).masked_fill(self.mask[:n, :n], -torch.inf)
    weights = torch.softmax(scores / self.head_dim**0.5, dim=-1)
    return self.out_proj(merge(self, weights @ v))


def returns_tuple(self, x):
    return permute_is_causal(self, x), None


def heads_unmerged(self, x):
    q, k, v = heads(self, x)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout(self), is_causal=True)


def delegates(self, x):
    book = FusedMultiHeadAttention(
        self.d_in,
        self.d_out,
        self.mask.shape[0],
        self.dropout_p,
        self.num_heads,
        qkv_bias=self.qkv.bias is not None,
    )
    book.load_state_dict(self.state_dict(), strict=False)
    return book.train(self.training)(x)


def calls_the_books_forward(self, x):
    return FusedMultiHeadAttention.forward(self, x)


def starting_code(self, x):
    """The practice cell as the chapter gives it, run without a change."""
    b, num_tokens, _ = x.shape
    raise NotImplementedError("write the forward pass of MyFusedAttention")


def torch_layer(self, x, need_weights=False):
    """torch's own attention layer on self.qkv's three parts, its own projections identities."""
    num_tokens, E = x.shape[1], self.d_out
    queries, keys, values = self.qkv(x).split(E, dim=-1)
    layer = torch.nn.MultiheadAttention(
        E, self.num_heads, dropout=self.dropout_p, bias=False, batch_first=True
    )
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
        layer.out_proj.weight.copy_(torch.eye(E))
    layer.train(self.training)
    future = self.mask[:num_tokens, :num_tokens]
    context = layer(queries, keys, values, attn_mask=future, need_weights=need_weights)[0]
    return self.out_proj(context)


def torch_layer_with_weights(self, x):
    return torch_layer(self, x, need_weights=True)


MISTAKES = {
    "the starting code": starting_code,
    "torch's attention layer": torch_layer,
    "no causal mask": no_mask,
    "mask inverted": inverted_mask,
    "mask not sliced": unsliced_mask,
    "heads not before tokens": tokens_before_heads,
    "view straight to heads": viewed_straight,
    "merge without transpose": merged_without_transpose,
    "queries, keys and values interleaved": interleaved_qkv,
    "scaled twice": scaled_twice,
    "out_proj not applied": no_out_proj,
    "dropout in evaluation mode": dropout_always,
    "no dropout in training": dropout_never,
    "dropout in the wrong place": fused_forward("output").forward,
    "no fused kernel": step_by_step,
    "not a tensor": returns_tuple,
    "wrong shape": heads_unmerged,
    "delegates to the book": delegates,
    "chunk, then view": chunk_then_view,
    "kernel result unused": decoy_kernel_call,
}


def test_a_decoy_kernel_call_kept_in_a_variable_is_caught_too():
    result = check_fused_attention(reader_class(decoy_kept_in_a_variable))
    assert not result.passed and "does not use what it returns" in result.feedback


def message(catalogue, name):
    return next(m.message for m in catalogue if m.name == name)


def opening(text):
    """The fixed opening words of a catalogue message, before its first placeholder."""
    return text.split("{")[0][:40]


@pytest.mark.parametrize("name", list(MISTAKES))
def test_each_mistake_fails_with_its_own_message(name):
    result = check_fused_attention(reader_class(MISTAKES[name]))
    catalogue = FUSED_MISTAKES + AFTER_MATCH_MISTAKES
    assert not result.passed
    assert opening(message(catalogue, name)) in result.feedback, result.feedback


def test_every_catalogued_mistake_is_tested():
    named = {m.name for m in FUSED_MISTAKES + AFTER_MATCH_MISTAKES}
    untested = named - set(MISTAKES) - {"constructor raises", "forward raises", "unexplained"}
    assert not untested


def test_the_untouched_starting_code_is_named_and_points_to_the_first_hint():
    feedback = check_fused_attention(reader_class(starting_code)).feedback
    assert "this is the starting code" in feedback and "hint(1)" in feedback
    assert "Seen with" not in feedback and "scaled_dot_product_attention" not in feedback


@pytest.mark.parametrize("forward", [torch_layer, torch_layer_with_weights])
def test_torch_attention_layer_is_refused_with_what_it_does(forward):
    """Finding 10: nn.MultiheadAttention (its fast path, or its Python path) is not told that
    it throws the kernel's result away: it is named, with what it does for the reader."""
    feedback = check_fused_attention(reader_class(forward)).feedback
    assert "torch.nn.MultiheadAttention" in feedback, feedback
    assert "does not use what it returns" not in feedback


def test_calling_the_books_forward_on_ones_own_module_is_a_delegation():
    result = check_fused_attention(reader_class(calls_the_books_forward))
    assert not result.passed and "FusedMultiHeadAttention" in result.feedback


class Subclass(FusedMultiHeadAttention):
    pass


class EmptySubclass(FusedAttentionStart):
    pass


class AssignsTheBooksForward(FusedAttentionStart):
    forward = FusedMultiHeadAttention.forward


_SAVED_BOOK_FORWARD = FusedMultiHeadAttention.forward


class CallsASavedBookForward(FusedAttentionStart):
    def forward(self, x):
        return _SAVED_BOOK_FORWARD(self, x)


def test_a_saved_reference_to_the_books_forward_is_a_delegation():
    result = check_fused_attention(CallsASavedBookForward)
    assert not result.passed and "FusedMultiHeadAttention" in result.feedback


@pytest.mark.parametrize(
    "answer, name",
    [
        (None, "nothing passed"),
        (FusedAttentionStart(4, 4, 4, 0.0, 2), "an instance instead of the class"),
        (print, "not a class"),
        (int, "not an nn.Module"),
        (FusedMultiHeadAttention, "the book's module"),
        (Subclass, "the book's module"),
        (MultiHeadAttention, "the book's module"),
        (torch.nn.Linear, "not from the starting point"),
        (FusedAttentionStart, "the starting code"),
        (EmptySubclass, "the starting code"),
        (AssignsTheBooksForward, "a book forward assigned"),
    ],
)
def test_shortcuts_and_wrong_objects_fail_with_their_own_message(answer, name):
    result = check_fused_attention(answer)
    assert not result.passed
    assert opening(message(NOT_A_CLASS_MISTAKES, name)) in result.feedback, result.feedback


def test_the_feedback_on_the_untouched_start_asks_rather_than_tells():
    feedback = check_fused_attention(EmptySubclass).feedback
    assert "?" in feedback and "hint(1)" in feedback
    assert "scaled_dot_product_attention" not in feedback and "is_causal" not in feedback


def test_a_constructor_or_forward_that_raises_is_named_without_a_traceback():
    def broken(self, x):
        raise RuntimeError("boom")

    result = check_fused_attention(reader_class(broken))
    assert not result.passed and "RuntimeError: boom" in result.feedback

    bad_init = type(
        "BadInit",
        (FusedAttentionStart,),
        {"__init__": lambda self, *args, **kwargs: 1 / 0, "forward": permute_is_causal},
    )
    result = check_fused_attention(bad_init)
    assert not result.passed and "ZeroDivisionError" in result.feedback


def test_the_check_leaves_the_readers_random_state_and_the_book_alone():
    forward = FusedMultiHeadAttention.forward
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    check_fused_attention(reader_class(permute_is_causal))
    assert torch.equal(torch.rand(3), expected)
    assert FusedMultiHeadAttention.forward is forward
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention


def test_hints_go_from_the_idea_to_code_without_giving_the_whole_solution():
    hints = [fused_attention.hint(n).text for n in (1, 2, 3)]
    assert "is_causal=True" not in hints[-1] and "return self.out_proj" not in hints[-1]
    assert "There are 3 hints" in fused_attention.hint(4).text
