"""Chapter 8's practice: LatentAttention's absorbed forward, written from its
weights. The check is :func:`mha.checks.latent.check_absorbed`."""

import torch

from .checks.latent import check_absorbed
from .exercise import Exercise


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
        "Head h's key for a token is c @ B: the token's latent c times B, head "
        "h's block of W_up_key.weight.T. A score is q @ (c @ B).T, which equals "
        "(q @ B.T) @ c.T: the absorbed query q @ B.T scores the latent itself. "
        "In code, module.W_up_key.weight.view(H, hd, -1)[h] is head h's B.T, "
        "(hd, latent_dim), so queries (b, H, T, hd) @ "
        "module.W_up_key.weight.view(H, hd, -1), (H, hd, latent_dim), gives "
        "every head's absorbed queries at once: (b, H, T, latent_dim).",
        "The shapes, step by step: absorbed queries (b, H, T, latent_dim) @ "
        "latents.unsqueeze(1).transpose(2, 3), (b, 1, latent_dim, T), gives "
        "scores (b, H, T, T). Mask the future, softmax with head_dim ** 0.5 "
        "(the width the keys would have had), apply module.dropout, then "
        "weights @ latents.unsqueeze(1) is a @ C for every head at once, the "
        "combined latents: (b, H, T, latent_dim).",
        "Head h's share of the output is (a @ C) @ (V @ O): V is head h's block "
        "of W_up_value.weight.T, O its hd rows of out_proj.weight.T. In code, "
        "V.T is module.W_up_value.weight.view(H, hd, -1)[h] and O.T is "
        "module.out_proj.weight.view(-1, H, hd)[:, h], out_proj.weight's "
        "columns h * hd onwards. So "
        "module.out_proj.weight.view(-1, H, hd).transpose(0, 1) @ "
        "module.W_up_value.weight.view(H, hd, -1) is O.T @ V.T, that is "
        "(V @ O).T, for every head: (H, d_out, latent_dim). Multiply each "
        "head's combined latents by its .transpose(1, 2), sum over heads "
        "(dim=1), and add module.out_proj.bias.",
    ),
    solution_code=absorbed_attention,
)
