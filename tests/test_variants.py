"""Chapter 5's implementations: given the same weights, all five compute the same function.

Shapes, the causal mask, training and constructor errors of all five are in ``test_attention.py``;
operator counts in ``test_counting_and_trace.py``.
"""

import inspect

import pytest
import torch

from mha import (
    FusedMultiHeadAttention,
    MultiHeadAttention,
    MultiHeadAttentionCombinedQKV,
    MultiHeadAttentionWrapper,
    TorchMultiheadAttentionAdapter,
    copy_weights,
)
from mha.variants import IMPLEMENTATIONS, build, equivalent_modules, head_weights, out_weights

NEW_CLASSES = (
    MultiHeadAttentionCombinedQKV,
    FusedMultiHeadAttention,
    TorchMultiheadAttentionAdapter,
)
# (batch, num_tokens, d_in, d_out, num_heads, qkv_bias): d_in != d_out, one head, bias on and off.
SHAPES = [
    (2, 6, 3, 4, 2, False),
    (3, 5, 7, 12, 3, True),
    (1, 9, 10, 6, 1, False),
    (2, 1, 5, 8, 4, True),
    (2, 7, 16, 16, 4, False),
    (1, 12, 24, 24, 8, True),
    (2, 4, 6, 6, 1, True),
]


def supported(name, d_in, d_out):
    """nn.MultiheadAttention projects queries from inputs as wide as its output."""
    return name != "torch_mha" or d_in == d_out


def outputs(modules, x):
    with torch.no_grad():
        return {name: module(x) for name, module in modules.items()}


@pytest.mark.parametrize("batch, num_tokens, d_in, d_out, num_heads, qkv_bias", SHAPES)
def test_all_implementations_agree_when_built_from_one_wrapper(
    batch, num_tokens, d_in, d_out, num_heads, qkv_bias
):
    names = [n for n in IMPLEMENTATIONS if supported(n, d_in, d_out)]
    modules = equivalent_modules(names, d_in, d_out, 12, num_heads, qkv_bias)
    torch.manual_seed(1)
    found = outputs(modules, torch.randn(batch, num_tokens, d_in))
    for name in names:
        assert found[name].shape == (batch, num_tokens, d_out)
        torch.testing.assert_close(found[name], found["wrapper"], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("batch, num_tokens, d_in, d_out, num_heads, qkv_bias", SHAPES)
def test_copying_weights_from_multi_head_attention_reproduces_its_output(
    batch, num_tokens, d_in, d_out, num_heads, qkv_bias
):
    torch.manual_seed(0)
    reference = MultiHeadAttention(d_in, d_out, 12, 0.0, num_heads, qkv_bias).eval()
    torch.manual_seed(1)
    x = torch.randn(batch, num_tokens, d_in)
    with torch.no_grad():
        expected = reference(x)
    for cls in NEW_CLASSES:
        if cls is TorchMultiheadAttentionAdapter and d_in != d_out:
            continue
        module = copy_weights(reference, cls(d_in, d_out, 12, 0.0, num_heads, qkv_bias)).eval()
        with torch.no_grad():
            torch.testing.assert_close(module(x), expected, rtol=1e-5, atol=1e-6, msg=cls.__name__)


def weights_of(module):
    """Every head's query, key and value weights and biases, then the output projection's."""
    pairs = [pair for head in head_weights(module) for pair in head] + [out_weights(module)]
    return [t for pair in pairs for t in pair]


def same(a, b):
    return a is b is None or a is not None and b is not None and torch.equal(a, b)


def test_weights_survive_a_round_trip_through_every_implementation():
    torch.manual_seed(0)
    start = MultiHeadAttention(8, 8, 6, 0.0, num_heads=2, qkv_bias=True)
    module = start
    for cls in (
        MultiHeadAttentionCombinedQKV,
        FusedMultiHeadAttention,
        TorchMultiheadAttentionAdapter,
        MultiHeadAttention,
    ):
        module = copy_weights(module, cls(8, 8, 6, 0.0, 2, qkv_bias=True))
    assert module is not start
    for before, after in zip(weights_of(start), weights_of(module), strict=True):
        assert same(before, after)


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_head_weights_are_views_in_head_order(name):
    """Writing head h's query block of any implementation changes head h's output only."""
    modules = equivalent_modules([name, "wrapper"], 8, 8, 6, 2)
    module, x = modules[name], torch.randn(1, 6, 8)
    with torch.no_grad():
        before = module(x)
        head_weights(module)[1][0][0].mul_(2.0)  # head 2's query weight
        after = module(x)
    if name == "wrapper":  # no out_proj: head 2 owns output columns 4..7
        assert torch.equal(before[..., :4], after[..., :4]) and not torch.allclose(
            before[..., 4:], after[..., 4:]
        )
    else:  # out_proj is the identity here
        torch.testing.assert_close(before[..., :4], after[..., :4])
        assert not torch.allclose(before[..., 4:], after[..., 4:])


def test_every_implementation_takes_the_same_constructor_arguments():
    expected = ["self", "d_in", "d_out", "context_length", "dropout", "num_heads", "qkv_bias"]
    for cls in IMPLEMENTATIONS.values():
        assert list(inspect.signature(cls.__init__).parameters) == expected, cls.__name__


def test_build_gives_the_wrapper_the_same_total_width_as_the_others():
    x = torch.randn(1, 5, 12)
    for name in IMPLEMENTATIONS:
        assert build(name, 12, 12, 8, 0.0, num_heads=3)(x).shape == (1, 5, 12), name


def test_the_combined_variant_projects_queries_keys_and_values_with_one_linear_layer():
    module = MultiHeadAttentionCombinedQKV(5, 6, 8, 0.0, num_heads=2)
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    assert [tuple(m.weight.shape) for m in linears] == [(18, 5), (6, 6)]


def test_fused_calls_scaled_dot_product_attention_with_is_causal(monkeypatch):
    import mha.variants

    calls = []
    original = mha.variants.F.scaled_dot_product_attention

    def recording(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(mha.variants.F, "scaled_dot_product_attention", recording)
    FusedMultiHeadAttention(4, 4, 6, 0.0, num_heads=2)(torch.randn(1, 3, 4))
    assert len(calls) == 1 and calls[0]["is_causal"] is True


def test_the_torch_adapter_without_qkv_bias_reads_as_having_no_input_bias():
    module = TorchMultiheadAttentionAdapter(8, 8, 6, 0.0, num_heads=2)
    assert all(bias is None for head in head_weights(module) for _, bias in head)


@pytest.mark.parametrize(
    "target, message",
    [
        (lambda: MultiHeadAttention(8, 8, 6, 0.0, num_heads=4), "source has 2 heads, the target 4"),
        (lambda: MultiHeadAttention(6, 8, 6, 0.0, num_heads=2), "same d_in and total d_out"),
        (lambda: MultiHeadAttention(8, 8, 6, 0.0, num_heads=2, qkv_bias=True), "same qkv_bias"),
        (lambda: MultiHeadAttentionWrapper(8, 4, 6, 0.0, num_heads=2), "no output projection"),
    ],
)
def test_copying_weights_that_cannot_fit_raises_a_value_error(target, message):
    torch.manual_seed(0)
    source = FusedMultiHeadAttention(8, 8, 6, 0.0, num_heads=2)
    module = target()
    with pytest.raises(
        ValueError, match=rf"^copy_weights into {type(module).__name__}: .*{message}"
    ):
        copy_weights(source, module)


def test_a_wrapper_takes_weights_whose_out_proj_is_the_identity():
    wrapper = equivalent_modules(["wrapper"], 8, 8, 6, 2)["wrapper"]
    split = MultiHeadAttention.from_wrapper(wrapper)
    copy = copy_weights(split, MultiHeadAttentionWrapper(8, 4, 6, 0.0, num_heads=2))
    for before, after in zip(weights_of(wrapper), weights_of(copy), strict=True):
        assert same(before, after)


def test_copying_from_something_else_names_the_supported_implementations():
    with pytest.raises(ValueError, match="Linear is not one of the book's implementations"):
        copy_weights(torch.nn.Linear(3, 3), MultiHeadAttention(3, 3, 4, 0.0, 1))


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_building_any_implementation_with_zero_heads_raises_a_value_error(name):
    with pytest.raises(ValueError, match="num_heads must be a positive integer, got 0"):
        build(name, 4, 4, 8, 0.0, num_heads=0)


def test_building_a_wrapper_whose_heads_cannot_split_the_total_width_says_so():
    with pytest.raises(
        ValueError, match=r"^build\('wrapper'\): d_out=6 is not divisible by num_heads=4"
    ):
        build("wrapper", 4, 6, 8, 0.0, num_heads=4)


def test_equivalent_modules_hand_back_the_seeded_wrapper_itself():
    modules = equivalent_modules(["wrapper", "split"], 4, 4, 6, 2)
    assert (
        isinstance(modules["wrapper"], MultiHeadAttentionWrapper)
        and not modules["wrapper"].training
    )


def test_unknown_implementation_names_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="choose one of wrapper, split"):
        build("loop", 4, 4, 8, 0.0, 2)
