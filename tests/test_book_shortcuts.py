"""A forward that hands its work to a module of the book is caught, in chapters 3, 5 and 6,
including a module added after the check was written.

Issue 18: chapter 3's check accepted a forward that builds ``mha.gqa.GroupedQueryAttention``
with ``num_kv_groups=num_heads``, loads its own state dict into it and returns its output.
"""

import inspect
import sys
import textwrap
import types

import pytest
import torch
import torch.nn.functional as F

from mha import MultiHeadAttention
from mha.checks.fused import check_fused_attention
from mha.checks.gqa import check_gqa_forward
from mha.checks.weight_split import check_weight_split
from mha.gqa import GroupedQueryAttention
from mha.starting import FusedAttentionStart, WeightSplitSkeleton
from mha.weight_split_exercise import weight_split


class ThroughGroupedQueryAttention(WeightSplitSkeleton):
    """Issue 18's shortcut in chapter 3: the book's GQA with one group per head does the work."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.arguments = (d_in, d_out, context_length, dropout, num_heads)
        self.qkv_bias = qkv_bias

    def forward(self, x):
        num_heads = self.arguments[-1]
        inner = GroupedQueryAttention(
            *self.arguments, num_kv_groups=num_heads, qkv_bias=self.qkv_bias
        )
        inner.load_state_dict(self.state_dict(), strict=False)
        return inner.train(self.training)(x)


def fused_through_grouped_query_attention(self, x):
    """The same shortcut in chapter 5: the fused layer's weights copied into the book's GQA."""
    inner = GroupedQueryAttention(
        self.d_in,
        self.d_out,
        self.mask.shape[0],
        self.dropout_p,
        self.num_heads,
        num_kv_groups=self.num_heads,
        qkv_bias=self.qkv.bias is not None,
    )
    with torch.no_grad():
        layers = (inner.W_query, inner.W_key, inner.W_value)
        for layer, weight in zip(layers, self.qkv.weight.chunk(3), strict=True):
            layer.weight.copy_(weight)
        if self.qkv.bias is not None:
            for layer, bias in zip(layers, self.qkv.bias.chunk(3), strict=True):
                layer.bias.copy_(bias)
        inner.out_proj.load_state_dict(self.out_proj.state_dict())
    return inner.train(self.training)(x)


FusedThroughGroupedQueryAttention = type(
    "FusedThroughGroupedQueryAttention",
    (FusedAttentionStart,),
    {"forward": fused_through_grouped_query_attention},
)


def test_the_gqa_shortcut_computes_the_right_output_so_only_the_delegation_can_fail_it():
    torch.manual_seed(0)
    shortcut = ThroughGroupedQueryAttention(4, 6, 5, 0.0, 3, qkv_bias=True).eval()
    book = MultiHeadAttention(4, 6, 5, 0.0, 3, qkv_bias=True).eval()
    book.load_state_dict(shortcut.state_dict())
    x = torch.rand(2, 5, 4)  # (b, num_tokens, d_in)
    with torch.no_grad():
        torch.testing.assert_close(shortcut(x), book(x), rtol=0, atol=1e-6)


def test_chapter_3_rejects_a_forward_that_hands_its_work_to_grouped_query_attention():
    result = check_weight_split(ThroughGroupedQueryAttention)
    assert not result.passed
    assert "hands its work to the book's GroupedQueryAttention.forward" in result.feedback


def test_chapter_5_rejects_a_forward_that_hands_its_work_to_grouped_query_attention():
    result = check_fused_attention(FusedThroughGroupedQueryAttention)
    assert not result.passed
    assert "hands its work to the book's GroupedQueryAttention" in result.feedback


FUTURE_MODULE = "mha.future_tiled"


def pasted(name, base):
    """Source of a class ``name`` on ``base`` with a forward of its own: ``base``'s, pasted."""
    body = textwrap.indent(textwrap.dedent(inspect.getsource(base.forward)), "    ")
    return f"class {name}({base.__name__}):\n{body}\n\n"


def a_module_added_later():
    """A book module the checker has never heard of, loaded only when a forward first runs:
    its classes compute attention with forwards of their own (the book's, pasted)."""
    if FUTURE_MODULE not in sys.modules:
        module = types.ModuleType(FUTURE_MODULE)
        for book in ("mha.attention", "mha.gqa"):  # torch, check_input, check_length, ...
            vars(module).update(vars(sys.modules[book]))
        vars(module).update(MultiHeadAttention=MultiHeadAttention, __name__=FUTURE_MODULE)
        code = pasted("TiledAttention", MultiHeadAttention) + pasted(
            "TiledGroupedAttention", GroupedQueryAttention
        )
        exec(compile(code, f"<{FUTURE_MODULE}>", "exec"), vars(module))
        sys.modules[FUTURE_MODULE] = module
    return sys.modules[FUTURE_MODULE]


@pytest.fixture
def future_module():
    yield
    sys.modules.pop(FUTURE_MODULE, None)


class ThroughAModuleAddedLater(ThroughGroupedQueryAttention):
    def forward(self, x):
        inner = a_module_added_later().TiledAttention(*self.arguments, qkv_bias=self.qkv_bias)
        inner.load_state_dict(self.state_dict(), strict=False)
        return inner.train(self.training)(x)


def test_a_module_added_to_the_package_later_counts_even_if_loaded_during_the_check(
    future_module,
):
    assert FUTURE_MODULE not in sys.modules
    result = check_weight_split(ThroughAModuleAddedLater)
    assert not result.passed
    assert "hands its work to the book's" in result.feedback


class GroupsThroughAModuleAddedLater(GroupedQueryAttention):
    """Chapter 6's exercise handed to the module added later."""

    def forward(self, x):
        inner = a_module_added_later().TiledGroupedAttention(
            x.shape[-1],
            self.d_out,
            self.context_length,
            self.dropout.p,
            self.num_heads,
            self.num_kv_groups,
            qkv_bias=self.W_query.bias is not None,
        )
        inner.load_state_dict(self.state_dict())
        return inner.train(self.training)(x)


def test_chapter_6_refuses_a_forward_of_a_module_added_later(future_module):
    result = check_gqa_forward(GroupsThroughAModuleAddedLater)
    assert not result.passed
    assert "hands its work to the book's TiledGroupedAttention.forward" in result.feedback


def test_a_forward_taken_from_any_book_module_is_named_before_anything_runs(future_module):
    taken = type("Taken", (WeightSplitSkeleton,), {"forward": GroupedQueryAttention.forward})
    feedback = check_weight_split(taken).feedback
    assert "Taken.forward is GroupedQueryAttention.forward, the book's own" in feedback


def test_the_solutions_the_checker_shows_are_the_readers_to_use():
    assert check_weight_split(weight_split.solution_code).passed


def sdpa_forward(self, x):
    """A correct forward of chapter 5."""
    b, num_tokens, _ = x.shape
    qkv = self.qkv(x).view(b, num_tokens, 3, self.num_heads, self.head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    p = self.dropout_p if self.training else 0.0
    context = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    return self.out_proj(context.transpose(1, 2).reshape(b, num_tokens, self.d_out))


def test_correct_answers_still_pass_under_the_watcher():
    assert check_fused_attention(
        type("Mine", (FusedAttentionStart,), {"forward": sdpa_forward})
    ).passed
    assert check_weight_split(weight_split.solution_code).passed
