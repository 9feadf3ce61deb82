"""Chapter 5's practice: a forward that hands attention to the fused kernel.
The check is :func:`mha.checks.fused.check_fused_attention`."""

import textwrap

from .checks.fused import check_fused_attention
from .exercise import Exercise

fused_attention = Exercise(
    checker=check_fused_attention,
    hints=(
        "Three steps: make queries, keys and values of shape (b, num_heads, num_tokens, "
        "head_dim) from self.qkv(x); let the kernel do the attention; bring the heads back "
        "together and apply self.out_proj.",
        "self.qkv(x) is (b, num_tokens, 3 * d_out). View it as (b, num_tokens, 3, "
        "num_heads, head_dim) and move axis 2 to the front and the heads before the tokens: "
        "permute(2, 0, 3, 1, 4) gives 3 × (b, num_heads, num_tokens, head_dim).",
        "The kernel call needs two more arguments besides the three tensors: one that makes "
        "it causal, and dropout_p, which must be 0.0 unless self.training. Its output is "
        "(b, num_heads, num_tokens, head_dim): transpose(1, 2), then reshape to "
        "(b, num_tokens, self.d_out).",
    ),
    solution_code=textwrap.dedent(
        """\
        class MyFusedAttention(FusedAttentionStart):
            def forward(self, x):
                b, num_tokens, _ = x.shape
                qkv = self.qkv(x)  # (b, num_tokens, 3 * d_out)
                qkv = qkv.view(b, num_tokens, 3, self.num_heads, self.head_dim)
                queries, keys, values = qkv.permute(2, 0, 3, 1, 4)
                # each (b, num_heads, num_tokens, head_dim)
                dropout_p = self.dropout_p if self.training else 0.0
                context = F.scaled_dot_product_attention(
                    queries, keys, values, dropout_p=dropout_p, is_causal=True
                )  # (b, num_heads, num_tokens, head_dim)
                context = context.transpose(1, 2)
                # (b, num_tokens, num_heads, head_dim)
                context = context.reshape(b, num_tokens, self.d_out)
                return self.out_proj(context)  # (b, num_tokens, d_out)


        fused_attention.check(MyFusedAttention)
        """
    ),
)
