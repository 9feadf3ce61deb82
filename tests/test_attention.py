"""The attention modules: shapes, the reference book's seeded numbers, and clear errors."""

import pytest
import torch

from mha import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper, example_batch

CLASSES_WITH_HEADS = (MultiHeadAttentionWrapper, MultiHeadAttention)


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
        (lambda: MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2), (2, 6, 4), [-0.4519, 0.2216, 0.4772, 0.1063]),
        (lambda: MultiHeadAttentionWrapper(3, 1, 6, 0.0, num_heads=2), (2, 6, 2), [-0.5740, 0.2216]),
        (lambda: MultiHeadAttention(3, 2, 6, 0.0, num_heads=2), (2, 6, 2), [0.3190, 0.4858]),
    ],
    ids=["CausalAttention", "wrapper d_out=2", "wrapper d_out=1", "MultiHeadAttention"],
)
def test_seeded_runs_print_the_reference_books_numbers(build, shape, row):
    assert first_row(build) == (shape, row)


def test_gpt2_sized_multi_head_attention_has_the_reference_parameter_count():
    module = MultiHeadAttention(768, 768, 1024, 0.0, num_heads=12)
    assert sum(p.numel() for p in module.parameters()) == 2_360_064


def test_attribute_names_follow_the_reference_book():
    mha = MultiHeadAttention(4, 6, 8, 0.0, num_heads=3)
    for name in ("W_query", "W_key", "W_value", "out_proj", "mask", "dropout", "num_heads", "head_dim"):
        assert hasattr(mha, name)
    wrapper = MultiHeadAttentionWrapper(4, 6, 8, 0.0, num_heads=3)
    assert len(wrapper.heads) == 3 and all(isinstance(h, CausalAttention) for h in wrapper.heads)


@pytest.mark.parametrize("d_in, d_out, num_heads, num_tokens", [(3, 2, 2, 6), (5, 12, 3, 4), (16, 4, 4, 1), (7, 9, 1, 7)])
def test_output_shapes_when_d_in_differs_from_d_out(d_in, d_out, num_heads, num_tokens):
    x = torch.randn(3, num_tokens, d_in)
    assert CausalAttention(d_in, d_out, 8, 0.0)(x).shape == (3, num_tokens, d_out)
    assert MultiHeadAttentionWrapper(d_in, d_out, 8, 0.0, num_heads)(x).shape == (3, num_tokens, num_heads * d_out)
    assert MultiHeadAttention(d_in, d_out, 8, 0.0, num_heads)(x).shape == (3, num_tokens, d_out)


def test_every_head_receives_the_same_input_and_heads_run_in_list_order():
    from mha.trace import trace_heads

    x = example_batch()
    calls = trace_heads(MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=4), x)
    assert [c.head for c in calls] == [1, 2, 3, 4]
    assert all(c.same_object for c in calls)


def test_causal_mask_hides_future_tokens():
    torch.manual_seed(0)
    mha = MultiHeadAttention(3, 4, 6, 0.0, num_heads=2)
    x = torch.randn(1, 6, 3)
    changed_future = x.clone()
    changed_future[0, 3:] = torch.randn(3, 3)
    with torch.no_grad():
        assert torch.allclose(mha(x)[0, :3], mha(changed_future)[0, :3])
        assert not torch.allclose(mha(x)[0, 3:], mha(changed_future)[0, 3:])


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda: MultiHeadAttention(3, 5, 6, 0.0, num_heads=2), ["d_out=5", "num_heads=2", "divisible"]),
        (lambda: MultiHeadAttention(3, 4, 6, 0.0, num_heads=0), ["num_heads", "positive"]),
        (lambda: MultiHeadAttentionWrapper(3, 4, 6, 0.0, num_heads=-1), ["num_heads", "positive"]),
        (lambda: CausalAttention(0, 4, 6, 0.0), ["d_in", "positive"]),
        (lambda: CausalAttention(3, 4, 6, 1.5), ["dropout", "[0, 1)"]),
        (lambda: CausalAttention(3, 4, 6, "0.1"), ["dropout", "number"]),
        (lambda: MultiHeadAttention(3, 4, 6, None, num_heads=2), ["dropout", "number"]),
    ],
)
def test_bad_constructor_arguments_raise_a_value_error_naming_the_problem(build, words):
    with pytest.raises(ValueError) as error:
        build()
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize("cls", (CausalAttention, *CLASSES_WITH_HEADS))
@pytest.mark.parametrize(
    "x, words",
    [
        (torch.rand(6, 3), ["(batch, num_tokens, d_in)", "2-D", "unsqueeze(0)"]),
        (torch.rand(1, 2, 6, 3), ["(batch, num_tokens, d_in)", "4-D"]),
        (torch.rand(2, 6, 5), ["last dimension", "5", "d_in=3"]),
        (torch.rand(2, 7, 3), ["7 tokens", "context_length=6"]),
        ([[0.1, 0.2, 0.3]], ["torch.Tensor", "list"]),
    ],
    ids=["2-D", "4-D", "wrong width", "too many tokens", "not a tensor"],
)
def test_bad_input_raises_a_value_error_naming_the_problem(cls, x, words):
    kwargs = {} if cls is CausalAttention else {"num_heads": 2}
    module = cls(3, 4, 6, 0.0, **kwargs)
    with pytest.raises(ValueError) as error:
        module(x)
    for word in words:
        assert word in str(error.value)
