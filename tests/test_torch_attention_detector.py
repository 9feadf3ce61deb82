"""The one detector of torch's own attention that the chapters' checks share
(:func:`mha.checks.classes.watching_torch_attention`): it sees the fused kernel and
``nn.MultiheadAttention`` by every route, and nothing in attention written step by step."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha import MultiHeadAttention
from mha.checks.classes import (
    TorchAttentionSeen,
    torch_attention_message,
    watching_torch_attention,
)

QKV = [torch.rand(1, 2, 4, 3, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3)]


def layer_call(need_weights):
    layer = nn.MultiheadAttention(6, 2, batch_first=True).eval()
    x = torch.rand(1, 4, 6, generator=torch.Generator().manual_seed(4))
    return lambda: layer(x, x, x, need_weights=need_weights)


@pytest.mark.parametrize(
    "run, layer, kernel, grouped",
    [
        (lambda: F.scaled_dot_product_attention(*QKV, is_causal=True), False, True, False),
        (lambda: torch.ops.aten.scaled_dot_product_attention(*QKV), False, True, False),
        (
            lambda: F.scaled_dot_product_attention(
                QKV[0], *(t[:, :1] for t in QKV[1:]), enable_gqa=True
            ),
            False,
            True,
            True,
        ),
        (layer_call(need_weights=False), True, True, False),
        (layer_call(need_weights=True), True, False, False),
    ],
    ids=["sdpa", "aten sdpa", "sdpa enable_gqa", "layer fast path", "layer with weights"],
)
def test_every_route_to_torchs_attention_is_seen(run, layer, kernel, grouped):
    with torch.no_grad(), watching_torch_attention() as seen:
        run()
    assert seen and seen.layer == layer and seen.grouped == grouped
    assert seen.kernel or not kernel


def test_attention_written_step_by_step_is_not_torchs():
    module = MultiHeadAttention(3, 4, 5, 0.0, 2).eval()
    with torch.no_grad(), watching_torch_attention() as seen:
        module(torch.rand(1, 5, 3))
    assert not seen


def test_the_message_says_what_torchs_code_does_and_points_to_chapter_5():
    kernel, layer = TorchAttentionSeen(), TorchAttentionSeen()
    kernel.kernel = kernel.grouped = True
    layer.layer = True
    for seen, name in ((kernel, "scaled_dot_product_attention"), (layer, "MultiheadAttention")):
        text = torch_attention_message(seen, "write it yourself.")
        assert name in text and "Chapter 5" in text and text.endswith("write it yourself.")
    assert "enable_gqa=True" in torch_attention_message(kernel, "")
