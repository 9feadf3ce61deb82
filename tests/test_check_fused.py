"""check_fused_attention, as one table of cases: correct forwards in several styles pass, and
every catalogued mistake and shortcut fails with a message that names it."""

import pytest
import torch
import torch.nn.functional as F

from mha import FusedMultiHeadAttention, GroupedQueryAttention, MultiHeadAttention
from mha.checks.fused import check_fused_attention, fused_attention
from mha.starting import FusedAttentionStart


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


def dropout_at(where, how=lambda self, t: F.dropout(t, self.dropout_p, self.training)):
    """The solution's forward with ``how`` (dropout) at ``where`` instead of the kernel's."""

    def forward(self, x):
        at = lambda place, t: how(self, t) if place == where else t  # noqa: E731
        q, k, v = heads(self, x)
        context = F.scaled_dot_product_attention(q, k, at("values", v), is_causal=True)
        return at("output", self.out_proj(merge(self, at("kernel output", context))))

    return forward


def noise(self, t):
    return t + 0.05 * torch.randn_like(t) if self.training else t


def broken(self, x):
    raise RuntimeError("boom")


BadInit = type(
    "BadInit",
    (FusedAttentionStart,),
    {"__init__": lambda self, *args, **kwargs: 1 / 0, "forward": permute_is_causal},
)


def through_grouped_query_attention(self, x):
    """The fused layer's weights copied into the book's GroupedQueryAttention, which works."""
    inner = GroupedQueryAttention(
        self.d_in,
        self.d_out,
        self.mask.shape[0],
        self.dropout_p,
        self.num_heads,
        self.num_heads,
        qkv_bias=self.qkv.bias is not None,
    )
    with torch.no_grad():
        layers = (inner.W_query, inner.W_key, inner.W_value)
        for layer, weight in zip(layers, self.qkv.weight.chunk(3), strict=True):
            layer.weight.copy_(weight)
        for layer, bias in zip(layers, self.qkv.bias.chunk(3) if self.qkv.bias is not None else ()):
            layer.bias.copy_(bias)
        inner.out_proj.load_state_dict(self.out_proj.state_dict())
    return inner.train(self.training)(x)


def solution_class():
    namespace = {"FusedAttentionStart": FusedAttentionStart, "F": F, "torch": torch}
    code = fused_attention.solution().text.replace("fused_attention.check(MyFusedAttention)", "")
    exec(code, namespace)
    return namespace["MyFusedAttention"]


R = reader_class
#: (answer, passes, words its message must contain); a forward is made a subclass of the start.
CASES = [
    # correct styles
    (solution_class(), True, "matches the book's modules"),
    *(
        (R(f), True, "matches the book's modules")
        for f in (
            permute_is_causal,
            chunk_keep_mask,
            unflatten_movedim,
            float_mask,
            split_contiguous_view,
        )
    ),
    # what a mistake computes
    (R(no_mask), False, "no causal mask"),
    (R(inverted_mask), False, "the wrong way round"),
    (R(tokens_before_heads), False, "heads and tokens are mixed up"),
    (R(viewed_straight), False, "heads and tokens are mixed up"),
    (R(merged_without_transpose), False, "heads and tokens are mixed up"),
    (R(interleaved_qkv), False, "all queries, then all keys"),
    (R(scaled_twice), False, "scaled twice"),
    (R(no_out_proj), False, "never applies self.out_proj"),
    (R(returns_tuple), False, "returned a tuple, not a tensor"),
    (R(heads_unmerged), False, "the heads are still separate"),
    # a forward that raises
    (R(starting_code), False, "fused_attention.hint(1), just below the check"),
    (R(unsliced_mask), False, "cut the mask to the input's length"),
    (R(chunk_then_view), False, "which transpose(1, 2) and chunk break. Call"),
    (R(broken), False, "RuntimeError: boom"),
    (BadInit, False, "ZeroDivisionError"),
    # the kernel: used, and its result used
    (R(step_by_step), False, "computes the attention step by step"),
    (R(decoy_kernel_call), False, "does not use what it returns"),
    (R(decoy_kept_in_a_variable), False, "does not use what it returns"),
    (R(torch_layer), False, "torch.nn.MultiheadAttention"),
    (R(torch_layer_with_weights), False, "torch.nn.MultiheadAttention"),
    # dropout: inside the kernel, only in training
    (R(dropout_always), False, "only while self.training"),
    (R(dropout_never), False, "no dropout"),
    (R(dropout_at("kernel output")), False, "not what dropout of whole attention weights gives"),
    (R(dropout_at("values")), False, "not what dropout of whole attention weights gives"),
    (R(dropout_at("output")), False, "not what dropout of whole attention weights gives"),
    (R(dropout_at("kernel output", noise)), False, "noise, not dropout"),
    # the book's own work
    (R(delegates), False, "hands its work to the book's FusedMultiHeadAttention"),
    (R(calls_the_books_forward), False, "FusedMultiHeadAttention"),
    (CallsASavedBookForward, False, "FusedMultiHeadAttention"),
    (R(through_grouped_query_attention), False, "hands its work to the book's GroupedQueryAtt"),
    (FusedMultiHeadAttention, False, "one of the book's own modules"),
    (Subclass, False, "one of the book's own modules"),
    (MultiHeadAttention, False, "one of the book's own modules"),
    (AssignsTheBooksForward, False, "is the book's FusedMultiHeadAttention.forward"),
    (FusedAttentionStart, False, "What are the steps from x to the output?"),
    (EmptySubclass, False, "fused_attention.hint(1) gives a first nudge"),
    # not a class of the reader's own
    (None, False, "got None"),
    (FusedAttentionStart(4, 4, 4, 0.0, 2), False, "an instance of FusedAttentionStart"),
    (print, False, "expects a class, but got the function print"),
    ("MyFusedAttention", False, "expects a class, but got a str"),
    (int, False, "is a class, but not an nn.Module"),
    (torch.nn.Linear, False, "does not start from FusedAttentionStart"),
]


@pytest.mark.parametrize("answer, passes, words", CASES, ids=lambda v: getattr(v, "__name__", None))
def test_the_check(answer, passes, words):
    result = check_fused_attention(answer)
    assert result.passed == passes and words in result.feedback, result.feedback
    assert all(len(line) <= 79 for line in str(result).split("\n"))


def test_the_starting_code_is_told_without_the_configuration_or_the_kernels_name():
    feedback = check_fused_attention(reader_class(starting_code)).feedback
    assert "Seen with" not in feedback and "scaled_dot_product_attention" not in feedback
    feedback = check_fused_attention(EmptySubclass).feedback
    assert "?" in feedback and "is_causal" not in feedback


def test_the_check_leaves_the_readers_random_state_and_the_book_alone():
    forward = FusedMultiHeadAttention.forward
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    assert check_fused_attention(reader_class(permute_is_causal)).passed
    assert torch.equal(torch.rand(3), expected)
    assert FusedMultiHeadAttention.forward is forward
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention


def test_hints_go_from_the_idea_to_code_without_giving_the_whole_solution():
    hints = [fused_attention.hint(n).text for n in (1, 2, 3)]
    assert "is_causal=True" not in hints[-1] and "return self.out_proj" not in hints[-1]
    assert "There are 3 hints" in fused_attention.hint(4).text
