"""Chapter 8's check, on one table of answers: right ones in several styles
are accepted, each catalogued mistake, the starting code and the book's own
methods are named."""

import pytest

from mha.checks.latent import MISTAKES
from mha.latent_exercise import absorbed_forward

HEAD = "import torch\n\ndef absorbed_attention(module, x):\n"

BOOK = "    b, T, _ = x.shape\n    H, hd = module.num_heads, module.head_dim\n"

EINSUM = (
    BOOK
    + """\
    c = module.W_down_kv(x)
    q = module.W_query(x).view(b, T, H, hd)
    q = torch.einsum("bthd,hdc->bhtc", q, module.W_up_key.weight.view(H, hd, -1))
    s = torch.einsum("bhtc,bsc->bhts", q, c) / hd**0.5
    s = s.masked_fill(module.mask[:T, :T], float("-inf"))
    w = module.dropout(torch.softmax(s, dim=-1))
    lc = torch.einsum("bhts,bsc->bhtc", w, c)
    ctx = torch.einsum("bhtc,hdc->bthd", lc, module.W_up_value.weight.view(H, hd, -1))
    return ctx.reshape(b, T, H * hd) @ module.out_proj.weight.T + module.out_proj.bias
"""
)

LOOP = (
    BOOK
    + """\
    latents = module.W_down_kv(x)
    queries = module.W_query(x)
    outputs = module.out_proj.bias.expand(b, T, -1).clone()
    for h in range(H):
        rows = slice(h * hd, (h + 1) * hd)
        q = queries[..., rows] @ module.W_up_key.weight[rows]
        scores = q @ latents.transpose(1, 2) / hd**0.5
        scores = scores.masked_fill(module.mask[:T, :T], -torch.inf)
        weights = module.dropout(torch.softmax(scores, dim=-1))
        fold = module.out_proj.weight[:, rows] @ module.W_up_value.weight[rows]
        outputs = outputs + (weights @ latents) @ fold.T
    return outputs
"""
)

SOLUTION = "import torch\n\n" + absorbed_forward.solution_text

STARTING = (
    BOOK
    + """\
    latents = module.W_down_kv(x)
    queries = module.split_heads(module.W_query(x))
    raise NotImplementedError("write the absorbed steps here")
"""
)

UP_PROJECTING = (
    BOOK
    + """\
    latents = module.W_down_kv(x)
    q = module.split_heads(module.W_query(x))
    k = module.split_heads(module.W_up_key(latents))
    v = module.split_heads(module.W_up_value(latents))
    s = (q @ k.transpose(2, 3)).masked_fill(module.mask[:T, :T], -torch.inf)
    w = module.dropout(torch.softmax(s / hd**0.5, dim=-1))
    return module.out_proj((w @ v).transpose(1, 2).reshape(b, T, -1))
"""
)


def from_solution(old, new):
    """The solution with one line changed: a mistake a reader makes."""
    assert old in SOLUTION, old
    return SOLUTION.replace(old, new)


CASES = [
    ("book style", SOLUTION, True, ["equals forward"]),
    ("einsum style", HEAD + EINSUM, True, ["equals forward"]),
    ("per-head loop", HEAD + LOOP, True, ["equals forward"]),
    (
        "strided blocks",
        from_solution(
            "W_up_key.weight.view(H, hd, -1)", "W_up_key.weight.view(hd, H, -1).transpose(0, 1)"
        ),
        False,
        [MISTAKES[0][1]],
    ),
    (
        "key blocks read from the transposed weight",
        from_solution("W_up_key.weight.view(H, hd, -1)", "W_up_key.weight.T.reshape(H, hd, -1)"),
        False,
        ["(d_out, latent_dim)"],
    ),
    (
        "a key block used transposed",
        from_solution("W_up_key.weight.view(H, hd, -1)", "W_up_key.weight.view(H, hd, -1).mT"),
        False,
        ["Your function failed"],
    ),
    (
        "scale from latent_dim",
        from_solution("attn_scores / hd**0.5", "attn_scores / module.latent_dim**0.5"),
        False,
        ["latent_dim ** 0.5"],
    ),
    (
        "mask forgotten",
        from_solution("attn_scores.masked_fill(future, -torch.inf)", "attn_scores"),
        False,
        ["mask the scores"],
    ),
    (
        "value fold into out_proj's rows",
        from_solution(
            "module.out_proj.weight.view(-1, H, hd)", "module.out_proj.weight.mT.reshape(-1, H, hd)"
        ),
        False,
        ["columns that read head h"],
    ),
    (
        "dropout on the latents",
        from_solution("    attn_weights = module.dropout(attn_weights)\n", "").replace(
            "latent_context = attn_weights @ latents",
            "latent_context = module.dropout(attn_weights @ latents)",
        ),
        False,
        ["combined latents"],
    ),
    (
        "dropout forgotten",
        from_solution("    attn_weights = module.dropout(attn_weights)\n", ""),
        False,
        ["apply module.dropout"],
    ),
    (
        "bias forgotten",
        from_solution("per_head.sum(dim=1) + module.out_proj.bias", "per_head.sum(dim=1)"),
        False,
        ["bias is missing"],
    ),
    ("starting code", HEAD + STARTING, False, ["starting code", "hint(1)"]),
    ("up-projects the cache", HEAD + UP_PROJECTING, False, ["up-projects the latents"]),
    ("the book's method", HEAD + "    return module.absorbed(x)\n", False, ["book's own method"]),
    ("the book's forward", HEAD + "    return module(x)\n", False, ["book's forward"]),
    ("a shape error", HEAD + "    return x @ module.W_query\n", False, ["Your function failed"]),
    ("returns a number", HEAD + "    return 3\n", False, ["no catalogued mistake"]),
]


@pytest.mark.parametrize(
    ("code", "passed", "words"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_check_absorbed(code, passed, words):
    namespace = {}
    exec(code, namespace)
    result = absorbed_forward.check(namespace["absorbed_attention"])
    assert result.passed is passed, result.feedback
    for word in words:
        assert word in result.feedback, result.feedback


def test_every_catalogued_mistake_has_a_case():
    """Each message of the catalogue is what some wrong answer in CASES must be told."""
    told = [word for _, _, passed, words in CASES if not passed for word in words]
    for _, message in MISTAKES:
        assert any(word in message for word in told), message
