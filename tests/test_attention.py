"""Every attention module: the reference book's numbers, shapes, the causal mask, training
(dropout and gradients), and errors that name the class and say what to change.

"All five" are the implementations chapter 5 times (``IMPLEMENTATIONS``); ``CausalAttention``,
the single head, joins where it can.
"""

import pytest
import torch

from mha import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper, example_batch
from mha.variants import IMPLEMENTATIONS, build, copy_weights, equivalent_modules

ALL_FIVE = list(IMPLEMENTATIONS)
CLASSES = [CausalAttention, *IMPLEMENTATIONS.values()]


def make(cls, d_in, d_out, context_length, dropout=0.0, num_heads=2):
    """``cls`` with the book's signature; a single head takes no ``num_heads``."""
    if cls is CausalAttention:
        return cls(d_in, d_out, context_length, dropout)
    return cls(d_in, d_out, context_length, dropout, num_heads)


def first_row(build):
    torch.manual_seed(123)
    module = build()
    with torch.no_grad():
        out = module(example_batch())
    return tuple(out.shape), [round(v, 4) for v in out[0, 0].tolist()]


@pytest.mark.parametrize(
    "build, shape, row",
    [
        (lambda: CausalAttention(3, 2, 6, 0.0), (2, 6, 2), [-0.4519, 0.2216]),
        (
            lambda: MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2),
            (2, 6, 4),
            [-0.4519, 0.2216, 0.4772, 0.1063],
        ),
        (
            lambda: MultiHeadAttentionWrapper(3, 1, 6, 0.0, num_heads=2),
            (2, 6, 2),
            [-0.5740, 0.2216],
        ),
        (lambda: MultiHeadAttention(3, 2, 6, 0.0, num_heads=2), (2, 6, 2), [0.3190, 0.4858]),
    ],
    ids=["CausalAttention", "wrapper d_out=2", "wrapper d_out=1", "MultiHeadAttention"],
)
def test_seeded_runs_print_the_reference_books_numbers(build, shape, row):
    assert first_row(build) == (shape, row)


def test_gpt2_sized_multi_head_attention_has_the_reference_parameter_count():
    module = MultiHeadAttention(768, 768, 1024, 0.0, num_heads=12)
    assert sum(p.numel() for p in module.parameters()) == 2_360_064


def test_attribute_names_and_state_dict_keys_follow_the_reference_book():
    mha = MultiHeadAttention(4, 6, 8, 0.0, num_heads=3)
    assert (mha.d_out, mha.num_heads, mha.head_dim, mha.dropout.p) == (6, 3, 2, 0.0)
    assert list(mha.state_dict()) == [
        "mask",
        "W_query.weight",
        "W_key.weight",
        "W_value.weight",
        "out_proj.weight",
        "out_proj.bias",
    ]
    wrapper = MultiHeadAttentionWrapper(4, 6, 8, 0.0, num_heads=3)
    assert len(wrapper.heads) == 3 and all(isinstance(h, CausalAttention) for h in wrapper.heads)
    assert list(wrapper.heads[0].state_dict()) == [
        "mask",
        "W_query.weight",
        "W_key.weight",
        "W_value.weight",
    ]


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if c.__name__ != "FusedMultiHeadAttention"], ids=lambda c: c.__name__
)
def test_the_mask_is_one_bool_buffer_true_above_the_diagonal(cls):
    module = make(cls, 4, 4, 5)
    masks = [buffer for name, buffer in module.named_buffers() if name.endswith("mask")]
    expected = torch.triu(torch.ones(5, 5), diagonal=1).bool()
    assert masks and all(m.dtype == torch.bool and torch.equal(m, expected) for m in masks)


def test_a_state_dict_saved_with_the_old_float_mask_still_loads():
    torch.manual_seed(0)
    module = MultiHeadAttention(4, 4, 5, 0.0, num_heads=2)
    old = {**module.state_dict(), "mask": torch.triu(torch.ones(5, 5), diagonal=1)}
    fresh = MultiHeadAttention(4, 4, 5, 0.0, num_heads=2)
    fresh.load_state_dict(old)
    assert fresh.mask.dtype == torch.bool and torch.equal(fresh.mask, module.mask)


@pytest.mark.parametrize(
    "d_in, d_out, num_heads, num_tokens", [(3, 2, 2, 6), (5, 12, 3, 4), (16, 4, 4, 1), (7, 9, 1, 7)]
)
def test_output_shapes_when_d_in_differs_from_d_out(d_in, d_out, num_heads, num_tokens):
    x = torch.randn(3, num_tokens, d_in)
    assert CausalAttention(d_in, d_out, 8, 0.0)(x).shape == (3, num_tokens, d_out)
    assert MultiHeadAttentionWrapper(d_in, d_out, 8, 0.0, num_heads)(x).shape == (
        3,
        num_tokens,
        num_heads * d_out,
    )
    assert MultiHeadAttention(d_in, d_out, 8, 0.0, num_heads)(x).shape == (3, num_tokens, d_out)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_no_token_attends_to_a_later_token(cls):
    torch.manual_seed(0)
    module = make(cls, 8, 8, 10).eval()
    x = torch.randn(1, 7, 8)
    changed = x.clone()
    changed[:, 4:] += 1.0  # only tokens 5, 6, 7 change
    with torch.no_grad():
        torch.testing.assert_close(module(x)[:, :4], module(changed)[:, :4])
        assert not torch.allclose(module(x)[:, 4:], module(changed)[:, 4:])


# -- training: dropout, and the backward pass ---------------------------------------------------


@pytest.mark.parametrize("name", ALL_FIVE)
def test_with_dropout_zero_training_mode_computes_what_evaluation_mode_does(name):
    module = equivalent_modules([name], 8, 8, 6, 2, qkv_bias=True)[name]
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        expected = module.eval()(x)
        torch.testing.assert_close(module.train()(x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ALL_FIVE)
def test_dropout_acts_in_training_mode_only(name):
    torch.manual_seed(0)
    with_dropout = build(name, 8, 8, 10, 0.5, num_heads=2)
    without = copy_weights(with_dropout, build(name, 8, 8, 10, 0.0, num_heads=2)).eval()
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        torch.testing.assert_close(with_dropout.eval()(x), without(x), rtol=1e-5, atol=1e-6)
        with_dropout.train()
        torch.manual_seed(1)
        first = with_dropout(x)
        torch.manual_seed(2)
        second = with_dropout(x)
    assert not torch.allclose(first, without(x).detach()) and not torch.allclose(first, second)


@pytest.mark.parametrize("name", ALL_FIVE)
def test_the_backward_pass_reaches_every_trainable_weight(name):
    module = build(name, 8, 8, 6, 0.0, num_heads=2, qkv_bias=True).train()
    module(torch.randn(2, 6, 8)).square().sum().backward()
    for parameter_name, parameter in module.named_parameters():
        if parameter.requires_grad:
            assert parameter.grad is not None, parameter_name
            assert torch.isfinite(parameter.grad).all(), parameter_name
            # Weights, not biases: a key bias shifts all of a query's scores alike, which the
            # softmax ignores, so its gradient is zero up to rounding.
            if parameter.dim() == 2:
                assert parameter.grad.abs().max() > 1e-3, parameter_name


def test_the_backward_pass_agrees_across_all_five_and_never_reaches_back_in_time():
    modules = equivalent_modules(ALL_FIVE, 8, 8, 6, 2)
    torch.manual_seed(0)
    x = torch.randn(2, 6, 8)
    gradients = {}
    for name, module in modules.items():
        inputs = x.clone().requires_grad_()
        module.train()(inputs)[:, :3].square().sum().backward()  # the first three tokens' outputs
        gradients[name] = inputs.grad
    for name, gradient in gradients.items():
        assert torch.count_nonzero(gradient[:, 3:]) == 0, name  # later tokens cannot matter
        torch.testing.assert_close(gradient, gradients["wrapper"], rtol=1e-4, atol=1e-6, msg=name)


def test_the_torch_adapter_without_qkv_bias_trains_no_input_bias():
    module = IMPLEMENTATIONS["torch_mha"](8, 8, 6, 0.0, num_heads=2).train()
    module(torch.randn(2, 6, 8)).sum().backward()
    bias = module.attention.in_proj_bias
    assert torch.count_nonzero(bias) == 0 and not bias.requires_grad and bias.grad is None


# -- errors: ValueError, naming the class and what to change --------------------------------------


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "args, words",
    [
        ((0, 4, 6, 0.0), ["d_in must be a positive integer, got 0"]),
        ((4, 4.0, 6, 0.0), ["d_out must be a positive integer, got 4.0"]),
        ((4, 4, True, 0.0), ["context_length must be a positive integer, got True"]),
        ((4, 4, 6, 1.5), ["dropout must be a number in [0, 1), got 1.5"]),
        ((4, 4, 6, "0.1"), ["dropout must be a number in [0, 1), got '0.1'"]),
        ((4, 4, 6, None), ["dropout must be a number", "None"]),
    ],
    ids=[
        "d_in",
        "d_out",
        "context_length",
        "dropout too large",
        "dropout a string",
        "dropout None",
    ],
)
def test_bad_constructor_arguments_raise_a_value_error_naming_the_class_and_the_fix(
    cls, args, words
):
    with pytest.raises(ValueError) as error:
        make(cls, *args)
    assert str(error.value).startswith(f"{cls.__name__}: ")
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize("cls", IMPLEMENTATIONS.values(), ids=lambda c: c.__name__)
@pytest.mark.parametrize("num_heads", [0, -1, 2.0])
def test_a_head_count_that_is_not_a_positive_integer_is_refused(cls, num_heads):
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: num_heads must be a positive integer"):
        cls(4, 4, 6, 0.0, num_heads)


@pytest.mark.parametrize(
    "cls",
    [c for c in IMPLEMENTATIONS.values() if c is not MultiHeadAttentionWrapper],
    ids=lambda c: c.__name__,
)
def test_heads_that_do_not_divide_d_out_are_refused_with_head_counts_and_widths_that_work(cls):
    with pytest.raises(ValueError) as error:
        cls(6, 6, 8, 0.0, num_heads=4)
    assert str(error.value) == (
        f"{cls.__name__}: d_out=6 is not divisible by num_heads=4, so the heads cannot split it "
        "evenly. Choose num_heads among 1, 2, 3, 6, or d_out as a multiple of num_heads "
        "(e.g. 4)."
    )


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "x, words",
    [
        (torch.rand(6, 4), ["(batch, num_tokens, d_in)", "2-D", "unsqueeze(0)"]),
        (torch.rand(1, 2, 6, 4), ["(batch, num_tokens, d_in)", "4-D"]),
        (
            torch.rand(2, 6, 5),
            ["last dimension of the input is 5", "d_in=4", "Build it with d_in=5"],
        ),
        ([[0.1, 0.2, 0.3, 0.4]], ["expected a torch.Tensor, got list"]),
    ],
    ids=["2-D", "4-D", "wrong width", "not a tensor"],
)
def test_bad_input_raises_a_value_error_naming_the_class_and_the_fix(cls, x, words):
    with pytest.raises(ValueError) as error:
        make(cls, 4, 4, 6)(x)
    # The wrapper has no weights of its own: its heads, each a CausalAttention, check the input.
    named = CausalAttention if cls is MultiHeadAttentionWrapper else cls
    assert str(error.value).startswith(f"{named.__name__}: ")
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if c.__name__ != "FusedMultiHeadAttention"], ids=lambda c: c.__name__
)
def test_inputs_longer_than_the_mask_are_refused_with_the_length_to_build(cls):
    with pytest.raises(
        ValueError, match=r"7 tokens, more than context_length=6.*context_length >= 7"
    ):
        make(cls, 4, 4, 6)(torch.rand(2, 7, 4))


def test_the_fused_module_needs_no_mask_so_any_length_works():
    module = IMPLEMENTATIONS["fused"](4, 4, 6, 0.0, num_heads=2)
    assert not list(module.buffers())
    assert module(torch.rand(2, 9, 4)).shape == (2, 9, 4)


def test_the_torch_adapter_refuses_d_in_different_from_d_out():
    with pytest.raises(
        ValueError,
        match=r"^TorchMultiheadAttentionAdapter: .*d_in=3 and d_out=4\. Use d_in == d_out",
    ):
        IMPLEMENTATIONS["torch_mha"](3, 4, 8, 0.0, num_heads=2)
