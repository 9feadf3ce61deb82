"""The classes the chapters' exercises start from: each has the book's layers and a
``forward`` that raises, for the reader to write in a subclass (the checks are in
:mod:`mha.checks`)."""

import torch
from torch import nn

from .attention import CausalAttention, MultiHeadAttention
from .tiled import TiledAttention
from .variants import FusedMultiHeadAttention


class Skeleton(nn.Module):
    """A practice's starting point: the constructor is given, ``forward`` is for the reader."""

    def forward(self, x):
        raise NotImplementedError(f"write the forward pass of {type(self).__name__}")


class WrapperSkeleton(Skeleton):
    """Chapter 1's starting point: ``num_heads`` independent heads, no forward pass yet."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            for _ in range(num_heads)
        )


class WeightSplitSkeleton(Skeleton):
    """Chapter 3's starting point: the layers of ``MultiHeadAttention``, no forward pass yet."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        book = MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, book.head_dim
        for name, layer in book.named_children():  # W_query, W_key, W_value, out_proj, dropout
            self.add_module(name, layer)
        self.register_buffer("mask", book.mask)  # (context_length, context_length), True: later


class FusedAttentionStart(nn.Module):
    """Chapter 5's starting point, ``forward`` for the reader: ``qkv(x)`` holds all queries,
    then all keys, then all values; ``mask`` is ``True`` above the diagonal, on each token's
    future."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        book = FusedMultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.d_in, self.d_out, self.num_heads, self.head_dim = d_in, d_out, num_heads, book.head_dim
        self.qkv, self.out_proj = book.qkv, book.out_proj  # the book's layers, seeded alike
        self.dropout_p = dropout  # a probability, for the fused kernel
        future = torch.ones(context_length, context_length, dtype=torch.bool).triu(1)
        self.register_buffer("mask", future)  # (context_length, context_length)

    def forward(self, x):
        raise NotImplementedError("This is the starting point: write forward in your own class.")


class TiledAttentionStart(TiledAttention):
    """Chapter 7's starting point: ``TiledAttention``'s layers and ``forward``, which hands
    ``query_block`` each query block; ``query_block`` is for the reader."""

    def query_block(self, q, keys, values, q_start):
        raise NotImplementedError("write the loop over key blocks in query_block")
