"""The decimals chapters 1 to 3 print from float arithmetic reproduce on any CPU.

Another CPU, or another code path of the same CPU (``ATEN_CPU_CAPABILITY=default``), may round
the last bit of a float32 result differently: differences of about 1e-7 were measured (2.4e-7
at most). A printed digit changes only if the value lies that close to a rounding boundary, so
each value the chapters print is checked to lie much further away, at the decimals printed.
"""

import pytest
import torch

from mha import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper, example_batch
from mha.checks.reference import CORRECT, split_attention

#: About 40 times the largest difference measured between two CPU code paths.
MARGIN = 1e-5


def distance_to_rounding_boundary(values, decimals):
    """How far the value nearest to a rounding boundary (…5 in the next digit) lies from it."""
    scaled = values.double().flatten() * 10**decimals
    return float(((scaled - scaled.floor()) - 0.5).abs().min()) / 10**decimals


def seeded(cls, *args, **kwargs):
    torch.manual_seed(123)
    return cls(*args, **kwargs)


def scrambled_difference(batch):
    """Chapter 3: the largest difference the skipped transpose makes (printed with 2 decimals)."""
    wrapper = seeded(MultiHeadAttentionWrapper, 3, 2, 6, 0.0, num_heads=3)
    split = MultiHeadAttention.from_wrapper(wrapper)
    skipped = CORRECT.but(split="no transpose", merge="no transpose")
    return (split_attention(split, batch, 3, skipped) - split(batch)).abs().max()


PRINTED = {  # name: (what the chapter prints, its decimals)
    "chapter 1, one head, 'Your'": (
        lambda batch: seeded(CausalAttention, 3, 2, 6, 0.0)(batch)[0, 0],
        3,
    ),
    "chapters 1 and 2, two heads of width 2, 'Your'": (
        lambda batch: seeded(MultiHeadAttentionWrapper, 3, 2, 6, 0.0, num_heads=2)(batch)[0, 0],
        3,
    ),
    "chapter 2, two heads of width 1, every token": (
        lambda batch: seeded(MultiHeadAttentionWrapper, 3, 1, 6, 0.0, num_heads=2)(batch)[0],
        3,
    ),
    "chapter 3, the transpose skipped": (scrambled_difference, 2),
}


@pytest.mark.parametrize("name", PRINTED)
def test_each_printed_value_is_far_from_a_rounding_boundary(name):
    compute, decimals = PRINTED[name]
    with torch.no_grad():
        values = compute(example_batch())
    assert distance_to_rounding_boundary(values, decimals) > MARGIN


def test_the_distance_is_measured_at_the_printed_decimals():
    assert distance_to_rounding_boundary(torch.tensor([0.1235]), 3) < 1e-6
    assert distance_to_rounding_boundary(torch.tensor([0.1232]), 3) == pytest.approx(3e-4, abs=1e-8)
