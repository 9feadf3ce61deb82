"""Attention without the score matrix: the online softmax over blocks of keys.

``TiledAttention`` computes what ``MultiHeadAttention`` computes, with the
same parameters and buffer, but it never holds a ``(num_tokens, num_tokens)``
score matrix. It walks the queries in blocks of ``block_size`` tokens and, for
each query block, the key blocks that the causal mask leaves visible. Each
row keeps three running quantities (the online softmax of Milakov and
Gimelshein, 2018, as FlashAttention uses it, Dao et al., 2022):

* ``row_max``, the largest score seen so far;
* ``row_sum``, the sum of ``exp(score - row_max)`` over the keys seen so far;
* ``out``, the sum of ``exp(score - row_max) * value`` over the same keys.

When a new block raises a row's maximum, the old sum and the old output were
taken relative to the old maximum: both are multiplied by
``exp(old_max - new_max)`` before the block is added. Only at the end is the
output divided by the sum. No tensor of scores is ever larger than
``(b, num_heads, block_size, block_size)``.

Dropout meets the online softmax at one place: it drops the unnormalised
weights ``exp(score - row_max)`` that go into ``out``, never those that go
into ``row_sum``. The final division then normalises by the full sum, so each
weight is ``softmax * mask / (1 - p)``, exactly what ``MultiHeadAttention``
does to its normalised weights: the two agree in distribution.
"""

import torch

from .attention import MultiHeadAttention, check_input, invalid


def check_block_size(owner, block_size):
    """Raise ``ValueError`` unless ``block_size`` is a positive integer."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise invalid(
            owner,
            f"block_size must be a positive integer, got {block_size!r}. "
            "Blocks of 64 tokens are a good start on a CPU.",
        )


def causal_block_pairs(num_tokens, block_size):
    """The ``(query block, key block)`` pairs a causal pass computes.

    Blocks are numbered from 0; the last one may be shorter. A key block
    entirely after a query block's last token is skipped, so the pairs are
    the ones on and below the diagonal: ``n * (n + 1) // 2`` of ``n * n``.
    """
    num_blocks = -(-num_tokens // block_size)  # ceil(num_tokens / block_size)
    return [(i, j) for i in range(num_blocks) for j in range(i + 1)]


class TiledAttention(MultiHeadAttention):
    """``MultiHeadAttention``'s function, computed one block of scores at a time.

    The parameters and the ``mask`` buffer are ``MultiHeadAttention``'s, with
    the same names, so ``load_state_dict`` moves weights between the two.
    ``block_size`` is the number of tokens in a block of queries and in a
    block of keys.
    """

    def __init__(
        self,
        d_in,
        d_out,
        context_length,
        dropout,
        num_heads,
        block_size=64,
        qkv_bias=False,
    ):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        check_block_size(self, block_size)
        self.block_size = block_size

    def forward(self, x):
        check_input(self, x)
        b, num_tokens, _ = x.shape
        # (b, num_heads, num_tokens, head_dim)
        queries = self.split_heads(self.W_query(x))
        keys = self.split_heads(self.W_key(x))
        values = self.split_heads(self.W_value(x))

        blocks = []
        for q_start in range(0, num_tokens, self.block_size):
            # (b, num_heads, rows, head_dim), rows <= block_size
            q = queries[:, :, q_start : q_start + self.block_size]
            blocks.append(self.query_block(q, keys, values, q_start))
        context = torch.cat(blocks, dim=2)  # (b, num_heads, T, head_dim)

        # (b, num_tokens, num_heads, head_dim)
        context = context.transpose(1, 2)
        context = context.reshape(b, num_tokens, self.d_out)
        return self.out_proj(context)  # (b, num_tokens, d_out)

    def query_block(self, q, keys, values, q_start):
        """The context of the ``rows`` queries from token ``q_start`` on.

        ``q`` is ``(b, num_heads, rows, head_dim)``; ``keys`` and ``values``
        hold every token. Key blocks after the last query are skipped; only
        the diagonal block, where the two ranges overlap, needs the mask.
        """
        b, num_heads, rows, _ = q.shape
        q_end = q_start + rows
        # (b, num_heads, rows, 1): each row's running maximum and sum
        row_max = q.new_full((b, num_heads, rows, 1), -torch.inf)
        row_sum = q.new_zeros((b, num_heads, rows, 1))
        out = torch.zeros_like(q)  # (b, num_heads, rows, head_dim)
        for k_start in range(0, q_end, self.block_size):
            k_end = min(k_start + self.block_size, q_end)
            k = keys[:, :, k_start:k_end]  # (b, num_heads, cols, head_dim)
            v = values[:, :, k_start:k_end]
            # (b, num_heads, rows, cols)
            scores = q @ k.transpose(2, 3) / self.head_dim**0.5
            if k_end > q_start + 1:  # a key after some query: the diagonal
                future = self.mask[q_start:q_end, k_start:k_end]
                scores = scores.masked_fill(future, -torch.inf)
            new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
            weights = torch.exp(scores - new_max)  # unnormalised
            rescale = torch.exp(row_max - new_max)  # 0 for the first block
            row_sum = row_sum * rescale + weights.sum(-1, keepdim=True)
            out = out * rescale + self.dropout(weights) @ v
            row_max = new_max
        return out / row_sum  # (b, num_heads, rows, head_dim)
