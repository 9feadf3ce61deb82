"""Chapter 8's practice: LatentAttention's absorbed forward, written from its
weights. The check is :func:`mha.checks.latent.check_absorbed`."""

import torch

from .checks.core import Exercise
from .checks.latent import check_absorbed


def absorbed_attention(module, x):
    """LatentAttention's output on x, scored against the latents."""
    b, num_tokens, _ = x.shape
    H, hd = module.num_heads, module.head_dim
    latents = module.W_down_kv(x).unsqueeze(1)  # (b, 1, T, c)
    queries = module.split_heads(module.W_query(x))  # (b, H, T, hd)
    up_key = module.W_up_key.weight.view(H, hd, -1)  # (H, hd, c)
    absorbed_queries = queries @ up_key  # (b, H, T, c)

    attn_scores = absorbed_queries @ latents.transpose(2, 3)  # (b, H, T, T)
    future = module.mask[:num_tokens, :num_tokens]  # (T, T)
    attn_scores = attn_scores.masked_fill(future, -torch.inf)
    attn_weights = torch.softmax(attn_scores / hd**0.5, dim=-1)
    attn_weights = module.dropout(attn_weights)
    latent_context = attn_weights @ latents  # (b, H, T, c)

    up_value = module.W_up_value.weight.view(H, hd, -1)  # (H, hd, c)
    out = module.out_proj.weight.view(-1, H, hd)  # (d_out, H, hd)
    folded = out.transpose(0, 1) @ up_value  # (H, d_out, c)
    per_head = latent_context @ folded.transpose(1, 2)  # (b, H, T, d_out)
    return per_head.sum(dim=1) + module.out_proj.bias  # (b, T, d_out)


absorbed_forward = Exercise(
    checker=check_absorbed,
    hints=(
        "Head h's key for a token is its block of W_up_key times the token's "
        "latent, and that block is module.W_up_key.weight.view(H, hd, -1)[h], "
        "(hd, latent_dim). A score is query · (block @ latent), which equals "
        "(query @ block) · latent. So multiply the queries, (b, H, T, hd), by "
        "all the blocks at once, (H, hd, latent_dim): every head's query "
        "becomes latent_dim wide, and the latents can be scored directly.",
        "The shapes, step by step: absorbed queries (b, H, T, latent_dim) @ "
        "latents.unsqueeze(1).transpose(2, 3), (b, 1, latent_dim, T), gives "
        "scores (b, H, T, T). Mask the future, softmax with head_dim ** 0.5 "
        "(the width the keys would have had), apply module.dropout, then "
        "weights @ latents.unsqueeze(1) combines the latents: "
        "(b, H, T, latent_dim).",
        "out_proj reads head h's context through its columns h * hd onwards: "
        "module.out_proj.weight.view(-1, H, hd).transpose(0, 1) is "
        "(H, d_out, hd). Times W_up_value's blocks, view(H, hd, -1), it gives "
        "(H, d_out, latent_dim): apply it to each head's combined latents, "
        "sum over heads, and add module.out_proj.bias.",
    ),
    solution_code=absorbed_attention,
)
