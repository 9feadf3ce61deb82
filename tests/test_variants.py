"""Chapter 4's implementations: given the same weights, all five compute the same function."""

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
from mha.counting import count_matmuls
from mha.variants import IMPLEMENTATIONS, build, equivalent_modules, read_weights

NEW_CLASSES = (MultiHeadAttentionCombinedQKV, FusedMultiHeadAttention, TorchMultiheadAttentionAdapter)
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
def test_all_implementations_agree_when_built_from_one_wrapper(batch, num_tokens, d_in, d_out, num_heads, qkv_bias):
    names = [n for n in IMPLEMENTATIONS if supported(n, d_in, d_out)]
    modules = equivalent_modules(names, d_in, d_out, 12, num_heads, qkv_bias)
    torch.manual_seed(1)
    found = outputs(modules, torch.randn(batch, num_tokens, d_in))
    for name in names:
        assert found[name].shape == (batch, num_tokens, d_out)
        torch.testing.assert_close(found[name], found["wrapper"], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("batch, num_tokens, d_in, d_out, num_heads, qkv_bias", SHAPES)
def test_copying_weights_from_multi_head_attention_reproduces_its_output(batch, num_tokens, d_in, d_out, num_heads,
                                                                          qkv_bias):
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


def test_weights_survive_a_round_trip_through_every_implementation():
    torch.manual_seed(0)
    start = MultiHeadAttention(8, 8, 6, 0.0, num_heads=2, qkv_bias=True)
    module = start
    for cls in (MultiHeadAttentionCombinedQKV, FusedMultiHeadAttention, TorchMultiheadAttentionAdapter, MultiHeadAttention):
        module = copy_weights(module, cls(8, 8, 6, 0.0, 2, qkv_bias=True))
    before, after = read_weights(start), read_weights(module)
    for field in ("query", "key", "value", "query_bias", "key_bias", "value_bias", "out", "out_bias"):
        assert torch.equal(getattr(before, field), getattr(after, field)), field


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


def test_fewer_projections_mean_fewer_matrix_multiplication_calls():
    x = torch.randn(2, 6, 8)
    modules = equivalent_modules(["wrapper", "split", "combined_qkv", "fused"], 8, 8, 6, 4)
    counts = {name: count_matmuls(module, x) for name, module in modules.items()}
    assert counts == {"wrapper": 20, "split": 6, "combined_qkv": 4, "fused": 3}


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


@pytest.mark.parametrize("cls", [MultiHeadAttentionWrapper, MultiHeadAttention, *NEW_CLASSES])
def test_no_token_attends_to_a_later_token(cls):
    torch.manual_seed(0)
    module = cls(8, 8, 10, 0.0, num_heads=2).eval()
    x = torch.randn(1, 7, 8)
    changed = x.clone()
    changed[:, 4:] += 1.0  # only tokens 5, 6, 7 change
    with torch.no_grad():
        torch.testing.assert_close(module(x)[:, :4], module(changed)[:, :4])
        assert not torch.allclose(module(x)[:, 4:], module(changed)[:, 4:])


def test_fused_applies_dropout_only_in_training():
    torch.manual_seed(0)
    with_dropout = FusedMultiHeadAttention(8, 8, 10, 0.5, num_heads=2)
    without = copy_weights(with_dropout, FusedMultiHeadAttention(8, 8, 10, 0.0, num_heads=2)).eval()
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        torch.testing.assert_close(with_dropout.eval()(x), without(x))
        torch.manual_seed(1)
        assert not torch.allclose(with_dropout.train()(x), without(x))


def test_the_torch_adapter_without_qkv_bias_holds_its_input_bias_at_zero():
    module = TorchMultiheadAttentionAdapter(8, 8, 6, 0.0, num_heads=2)
    bias = module.attention.in_proj_bias
    assert torch.count_nonzero(bias) == 0 and not bias.requires_grad
    assert read_weights(module).query_bias is None


@pytest.mark.parametrize("cls", NEW_CLASSES)
def test_heads_that_do_not_divide_d_out_raise_a_value_error(cls):
    with pytest.raises(ValueError, match="not divisible by num_heads=4"):
        cls(6, 6, 8, 0.0, num_heads=4)


@pytest.mark.parametrize("cls", NEW_CLASSES)
@pytest.mark.parametrize("args, message", [
    ((0, 4, 8, 0.0, 2), "d_in must be a positive integer"),
    ((4, 4, 8, 1.5, 2), "dropout must be a number in"),
    ((4, 4, 8, 0.0, 0), "num_heads must be a positive integer"),
])
def test_bad_constructor_arguments_raise_value_errors_that_name_the_argument(cls, args, message):
    with pytest.raises(ValueError, match=message):
        cls(*args)


@pytest.mark.parametrize("cls", NEW_CLASSES)
@pytest.mark.parametrize("x, message", [
    (torch.randn(5, 4), "Add a batch axis"),
    (torch.randn(1, 5, 3), "built with d_in=4"),
    (torch.randn(1, 9, 4), "more than context_length=8"),
])
def test_bad_inputs_raise_value_errors_that_say_what_to_change(cls, x, message):
    with pytest.raises(ValueError, match=message):
        cls(4, 4, 8, 0.0, num_heads=2)(x)


def test_the_torch_adapter_refuses_d_in_different_from_d_out():
    with pytest.raises(ValueError, match="d_in=3 and d_out=4"):
        TorchMultiheadAttentionAdapter(3, 4, 8, 0.0, num_heads=2)


@pytest.mark.parametrize("target, message", [
    (lambda: MultiHeadAttention(8, 8, 6, 0.0, num_heads=4), "source has 2 heads, the target 4"),
    (lambda: MultiHeadAttention(6, 8, 6, 0.0, num_heads=2), "same d_in and total d_out"),
    (lambda: MultiHeadAttention(8, 8, 6, 0.0, num_heads=2, qkv_bias=True), "same qkv_bias"),
    (lambda: MultiHeadAttentionWrapper(8, 4, 6, 0.0, num_heads=2), "no output projection"),
])
def test_copying_weights_that_cannot_fit_raises_a_value_error(target, message):
    torch.manual_seed(0)
    source = FusedMultiHeadAttention(8, 8, 6, 0.0, num_heads=2)
    with pytest.raises(ValueError, match=message):
        copy_weights(source, target())


def test_copying_from_something_else_names_the_supported_implementations():
    with pytest.raises(ValueError, match="not one of the book's implementations"):
        copy_weights(torch.nn.Linear(3, 3), MultiHeadAttention(3, 3, 4, 0.0, 1))


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_building_any_implementation_with_zero_heads_raises_a_value_error(name):
    with pytest.raises(ValueError, match="num_heads must be a positive integer, got 0"):
        build(name, 4, 4, 8, 0.0, num_heads=0)


def test_equivalent_modules_hand_back_the_seeded_wrapper_itself():
    modules = equivalent_modules(["wrapper", "split"], 4, 4, 6, 2)
    assert isinstance(modules["wrapper"], MultiHeadAttentionWrapper) and not modules["wrapper"].training


def test_unknown_implementation_names_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="choose one of wrapper, split"):
        build("loop", 4, 4, 8, 0.0, 2)
