"""Shared test set-up: where the repository and its chapters are.

The chapters' package is installed (``make`` installs it editable, see pyproject.toml), so tests
import ``mha`` as the notebooks do, from ``chapters/mha``.
"""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"


def load_normaliser():
    """``.ci/execute_chapters.py`` (``make execute``) as a module: the one place that says what a
    normalised chapter is (tags, first lines, route paragraphs)."""
    spec = importlib.util.spec_from_file_location(
        "execute_chapters", ROOT / ".ci" / "execute_chapters.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def multi_head_attention_forward(module, queries, keys, values):
    """``module``'s attention handed to ``F.multi_head_attention_forward`` (the function behind
    ``nn.MultiheadAttention``) with identity projections: a shortcut the checks must refuse.
    ``queries``, ``keys`` and ``values`` are ``(b, num_tokens, d_out)``.

    torch is imported here, not at the top: xdist's controller, which only hands the tests to its
    workers, loads this file too, and importing torch costs about 3 s of CPU."""
    import torch
    import torch.nn.functional as F

    num_tokens, eye = queries.shape[1], torch.eye(module.d_out)
    context, _ = F.multi_head_attention_forward(
        *(t.transpose(0, 1) for t in (queries, keys, values)),
        module.d_out,
        module.num_heads,
        eye.repeat(3, 1),
        None,
        None,
        None,
        False,
        module.dropout.p,
        eye,
        None,
        training=module.training,
        attn_mask=module.mask[:num_tokens, :num_tokens],
    )
    return module.out_proj(context.transpose(0, 1))  # (b, num_tokens, d_out)
