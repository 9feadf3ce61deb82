"""The detector of PyTorch's own attention that every class practice's run uses
(:class:`mha.checks.watch.Watch`): it sees the fused kernel and ``nn.MultiheadAttention`` by
the routes a reader takes, and nothing in attention written step by step; the book's forwards
are recorded beside it (:func:`mha.checks.shortcuts.book_calls`)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha import MultiHeadAttention
from mha.checks.shortcuts import book_calls
from mha.checks.watch import Watch

QKV = [torch.rand(1, 2, 4, 3, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3)]


def layer_call(need_weights):
    layer = nn.MultiheadAttention(6, 2, batch_first=True).eval()
    x = torch.rand(1, 4, 6, generator=torch.Generator().manual_seed(4))
    return lambda: layer(x, x, x, need_weights=need_weights)


@pytest.mark.parametrize(
    "run, seen",
    [
        (lambda: F.scaled_dot_product_attention(*QKV, is_causal=True), {"kernel"}),
        (
            lambda: F.scaled_dot_product_attention(
                QKV[0], *(t[:, :1] for t in QKV[1:]), enable_gqa=True
            ),
            {"grouped"},
        ),
        (layer_call(need_weights=False), {"layer"}),
        (layer_call(need_weights=True), {"layer"}),
    ],
    ids=["sdpa", "sdpa enable_gqa", "layer fast path", "layer with weights"],
)
def test_every_route_to_torchs_attention_is_seen(run, seen):
    with torch.no_grad(), book_calls() as book, Watch() as torch_attention:
        run()
    assert seen <= torch_attention.seen and not book


def test_attention_written_step_by_step_is_not_torchs_but_the_book_forward_is_seen():
    module = MultiHeadAttention(3, 4, 5, 0.0, 2).eval()
    with torch.no_grad(), book_calls() as book, Watch() as torch_attention:
        module(torch.rand(1, 5, 3))
    assert torch_attention.seen <= {"dropout"} and set(book) == {"MultiHeadAttention.forward"}
