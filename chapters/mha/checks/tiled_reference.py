"""Chapter 7's references: :func:`online`, the online softmax over a module's own layers, right or
with one of the catalogue's mistakes made (:data:`.tiled_catalogue.TABLE` names them)."""

import torch

from .shortcuts import dropped


def online(m, x, mistake="", training=False):
    """The online softmax over ``m``'s layers on ``x``, or with ``mistake`` (a buggy reference's
    name in :data:`.tiled_catalogue.TABLE`) made; in ``training``, with the check's dropout."""
    p = m.dropout.p if training or mistake == "dropout in eval" else 0.0
    place = mistake.removeprefix("drop ") if mistake.startswith("drop ") else "weights"

    def drop(t, *where):
        """``t``, dropped if this mistake puts dropout in one of the places ``where``."""
        return dropped(t, p) if place in where else t

    queries, keys, values = (m.split_heads(f(x)) for f in (m.W_query, m.W_key, m.W_value))
    hd, size, contexts = m.head_dim, m.block_size, []  # queries, ...: (b, H, T, hd)
    scale = {"scaled by sqrt d_out": m.d_out**0.5, "divided by head_dim": hd, "not scaled": 1}
    for q_start in range(0, x.shape[1], size):
        q = queries[:, :, q_start : q_start + size]  # (b, H, rows, hd)
        q_end, parts = q_start + q.shape[2], []
        row_max = q.new_full((*q.shape[:3], 1), -torch.inf)  # (b, H, rows, 1)
        row_sum, out = torch.zeros_like(row_max), torch.zeros_like(q)
        for k_start in range(0, q_end, size):
            k_end = min(k_start + size - (mistake == "key block ends early"), q_end)
            k, v = keys[:, :, k_start:k_end], values[:, :, k_start:k_end]  # (b, H, cols, hd)
            s = drop(q @ k.mT / scale.get(mistake, hd**0.5), "scores")  # (b, H, rows, cols)
            i, j = torch.arange(q_start, q_end)[:, None], torch.arange(k_start, k_end)
            hidden = {
                "no mask": j < 0,
                "diagonal masked too": j >= i,
                "inverted mask": j <= i,
                "whole diagonal masked": (j >= 0) & (k_end > q_start + 1),
                "mask at the origin": j - k_start > i - q_start,
                "mask without column offset": j - k_start > i,
            }.get(mistake, j > i)
            s = drop(s.masked_fill(hidden, -torch.inf), "masked scores")
            if mistake.startswith("blocks"):  # each block normalised on its own
                parts.append(drop(torch.softmax(s, -1), "weights") @ v)
                continue
            own = s.amax(-1, keepdim=True)
            new_max = own if mistake == "own block maximum" else torch.maximum(row_max, own)
            w, first = torch.exp(s - new_max), row_max == -torch.inf
            f = {
                "own block maximum": 1.0,
                "factor upside down": torch.where(first, 0.0, torch.exp(new_max - row_max)),
                "ratio of the maxima": torch.where(first, 0.0, row_max / new_max),
            }.get(mistake, torch.exp(row_max - new_max))
            kept = drop(drop(w, "weights", "sum", "twice"), "twice")  # out's weights
            summed = kept if place == "sum" else w  # row_sum's
            row_sum = row_sum * {
                "sum not rescaled": 1,
                "nothing rescaled": 1,
                "sum rescaled by factor squared": f**2,
            }.get(mistake, f) + summed.sum(-1, keepdim=True)
            out = drop(out, "running output")
            out = out * (1 if mistake in ("output not rescaled", "nothing rescaled") else f)
            out = out + kept @ drop(v, "values")
            out = out / row_sum if mistake == "divided inside the loop" else out
            row_max = new_max
        end = out if mistake in ("never divided", "divided inside the loop") else out / row_sum
        mean = sum(parts) / max(len(parts), 1)
        block = {"blocks averaged": mean, "blocks added": sum(parts)}.get(mistake, end)
        contexts.append(drop(block, "context"))
    return m.out_proj(torch.cat(contexts, 2).transpose(1, 2).flatten(2))  # (b, T, d_out)
