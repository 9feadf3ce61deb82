"""Chapter 6's practice: a grouped-query forward. The check is
:func:`mha.checks.gqa.check_gqa_forward`."""

import textwrap

from .checks.gqa import check_gqa_forward
from .exercise import Exercise

gqa_forward = Exercise(
    checker=check_gqa_forward,
    hints=(
        "Project and split as in chapter 3, but with two block counts. self.W_query(x) has "
        "self.num_heads blocks of self.head_dim columns: view it as (b, num_tokens, "
        "self.num_heads, self.head_dim). self.W_key(x) and self.W_value(x) have only "
        "self.num_kv_groups blocks. Then .transpose(1, 2) all three, so the blocks come "
        "before the tokens.",
        "Now give every head the keys and values of its group. Head h belongs to group "
        "h // self.group_size: the first group_size heads share block 0, the next group_size "
        "block 1, and so on. One call on the block axis (dim=1) repeats each block in place, "
        "group_size times; the predict-and-reveal above compared it with another that cycles.",
        "From here it is chapter 3's attention: scores queries @ keys.transpose(2, 3); fill "
        "self.mask[:num_tokens, :num_tokens] with -torch.inf; softmax over the last axis after "
        "dividing by self.head_dim ** 0.5; self.dropout; mix the values; transpose back, "
        "reshape to (b, num_tokens, self.d_out); return self.out_proj(context).",
    ),
    solution_code=textwrap.dedent(
        """\
        class MyGroupedQueryAttention(GroupedQueryAttention):
            def forward(self, x):
                b, num_tokens, _ = x.shape
                queries = self.W_query(x)  # (b, T, d_out)
                keys = self.W_key(x)  # (b, T, num_kv_groups * head_dim)
                values = self.W_value(x)  # (b, T, num_kv_groups * head_dim)

                # Queries: one block per head. Keys, values: one per group.
                H, G = self.num_heads, self.num_kv_groups
                queries = queries.view(b, num_tokens, H, self.head_dim)
                keys = keys.view(b, num_tokens, G, self.head_dim)
                values = values.view(b, num_tokens, G, self.head_dim)
                queries = queries.transpose(1, 2)  # (b, H, T, head_dim)
                keys = keys.transpose(1, 2)  # (b, G, T, head_dim)
                values = values.transpose(1, 2)  # (b, G, T, head_dim)

                # Each group's block once per head of the group, in place.
                keys = keys.repeat_interleave(self.group_size, dim=1)
                values = values.repeat_interleave(self.group_size, dim=1)
                # keys and values are now (b, H, T, head_dim)

                attn_scores = queries @ keys.transpose(2, 3)  # (b, H, T, T)
                future = self.mask[:num_tokens, :num_tokens]  # (T, T)
                attn_scores = attn_scores.masked_fill(future, -torch.inf)
                scaled = attn_scores / self.head_dim**0.5
                attn_weights = self.dropout(torch.softmax(scaled, dim=-1))

                context = attn_weights @ values  # (b, H, T, head_dim)
                context = context.transpose(1, 2)  # (b, T, H, head_dim)
                context = context.reshape(b, num_tokens, self.d_out)
                return self.out_proj(context)  # (b, T, d_out)


        check_gqa_forward(MyGroupedQueryAttention)
        """
    ),
)
