"""Chapter 7's reference, :func:`online`: the online softmax, right or with one mistake of
:data:`.tiled_catalogue.TABLE` made, each mistake a keyword of :func:`online`'s ``bug``."""

import torch

from .watch import dropped, mask_for

PER_BLOCK = ("softmax per block averaged", "softmax per block added")  # no running maximum


# fmt: off
def online(m, x, mistake="", training=False, stages=None):
    """The online softmax over ``m``'s layers on ``x``, or with ``mistake`` made; in ``training``
    with the check's dropout; ``stages`` gets the last query block's steps, as STEPS names them."""
    stages = {} if stages is None else stages
    p = m.dropout.p if training or mistake == "dropout in eval" else 0.0
    place = mistake.removeprefix("drop ") if mistake.startswith("drop ") else "weights"

    def drop(t, *where):  # t, dropped if this mistake puts dropout at one of where
        if place == "kept by chance p" and "weights" in where and training:  # kept by chance p
            return t * mask_for(t, p, p) / (1 - p)
        return dropped(t, p) if place in where else t

    def bug(right, **wrong):  # what ``mistake`` (its words joined by _) makes of ``right``
        return wrong.get(mistake.replace(" ", "_"), right)

    queries, keys, values = (m.split_heads(f(x)) for f in (m.W_query, m.W_key, m.W_value))
    hd, size, num_tokens, contexts = m.head_dim, m.block_size, x.shape[1], []  # (b, H, T, hd)
    scale = bug(hd**0.5, scaled_by_sqrt_d_out=m.d_out**0.5, divided_by_head_dim=hd,
                not_scaled=1, scale_multiplied=hd**-0.5)
    for q_start in range(0, num_tokens, size):
        q = queries[:, :, q_start : q_start + size]  # (b, H, rows, hd)
        q_end = q_start + q.shape[2]
        row_max = q.new_full((*q.shape[:3], 1), bug(-torch.inf, row_max_from_zero=0.0))
        row_sum, out = torch.zeros_like(row_max), torch.zeros_like(q)  # (b, H, rows, 1), like q
        stop = bug(q_end, diagonal_skipped=q_start, range_one_short=q_end - 1,
                   future_blocks_unmasked=num_tokens)
        for k_start in range(0, stop, size):
            k_end = min(k_start + size - (mistake == "key blocks end early"), max(stop, q_end))
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]  # (b, H, cols, hd)
            v = bug(v, values_from_keys=k)
            k, v = bug((k, v), keys_of_head_0=(k[:, :1].expand_as(k), v[:, :1].expand_as(v)))
            s = drop(q @ k.mT / scale, "scores")  # (b, H, rows, cols)
            kp, qp = torch.arange(k_start, k_end), torch.arange(q_start, q_end)[:, None]
            local = kp - k_start > qp - q_start  # the diagonal block's mask, on any block
            hidden = bug(kp > qp, no_mask=kp < 0, diagonal_hidden=kp >= qp,
                         inverted_mask=(kp <= qp) & (k_start >= q_start),  # on the diagonal
                         inverted_on_every_block=kp <= qp, mask_at_the_origin=local,
                         mask_without_the_column_offset=kp - k_start > qp,
                         future_blocks_unmasked=(kp > qp) & (k_start <= q_start))
            masked = s.masked_fill(hidden, bug(-torch.inf, mask_fills_zero=0.0))
            stages["scores"] = stages["scores"] if k_start else (s, masked)  # the first block's
            s = drop(bug(masked, mask_after_exp=s), "masked scores")
            own = s.amax(-1, keepdim=True)
            new_max = bug(torch.maximum(row_max, own), own_block_maximum=own)
            w = torch.softmax(s, -1) if mistake in PER_BLOCK else torch.exp(s - new_max)
            w = bug(w, mask_after_exp=w.masked_fill(hidden, 0))
            f = torch.exp(row_max - new_max)  # 0 at the first block: its 1 / f is inf
            f = bug(f, factor_upside_down=torch.where(row_max == -torch.inf, 0.0, 1 / f),
                    own_block_maximum=1, softmax_per_block_averaged=1, softmax_per_block_added=1)
            into_out = bug(w, normalised_per_block=w / w.sum(-1, keepdim=True))
            kept = drop(drop(into_out, "weights", "sum", "twice"), "twice")  # out's weights
            summed = (kept if place == "sum" else w).sum(-1, keepdim=True)  # row_sum's
            summed = bug(summed, row_sum_over_the_queries=w.sum(-2, keepdim=True).mT)
            block = drop(kept @ drop(v, "values"), "block output")  # (b, H, rows, hd)
            old, new = bug(f, rescaled_after_adding=1), bug(1, rescaled_after_adding=f)
            row_sum = (row_sum * bug(old, sum_not_rescaled=1, no_rescale=1) + summed) * new
            out = drop((out * bug(old, output_not_rescaled=1, no_rescale=1) + block) * new, "out")
            out = out / row_sum if mistake.startswith("divided in the loop") else out
            row_max = bug(new_max, row_max_never_updated=row_max)
            stages |= {"weights (mask, running maximum)": [w], "running sum": [row_sum]}
            stages["running output"] = [out]
        undivided = mistake in ("never divided", "divided in the loop", PER_BLOCK[1],
                                "normalised per block")
        context = drop(out if undivided else out / row_sum, "context")  # (b, H, rows, hd)
        stages["context out / row_sum"] = [context]
        laid_out = context.transpose(1, 2).reshape(context.shape)  # (b, rows, H, hd) as q's
        transposed = context.transpose(1, 2)  # (b, rows, H, hd)
        contexts.append(bug(context, wrong_layout=laid_out, context_transposed=transposed))
    joined = torch.cat(contexts, 2).transpose(1, 2)  # (b, T, H, hd), as the book's forward
    return m.out_proj(joined.reshape(x.shape[0], num_tokens, m.d_out))  # (b, T, d_out)
# fmt: on
