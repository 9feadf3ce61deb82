"""Chapter 8's check: right answers of every style pass, each learner's mistake is named."""

import pytest

from mha.latent_exercise import absorbed_forward

HEAD = "import torch\nimport torch.nn.functional as F\nfrom mha.latent import *\n\n"
SOLUTION = HEAD + absorbed_forward.solution_text
ROWS = "module.W_up_key.weight.view(H, hd, -1)"
VALUE_ROWS = "module.W_up_value.weight.view(H, hd, -1)"
DROPOUT = "attn_weights = module.dropout(attn_weights)"
MASKED = "attn_scores = attn_scores.masked_fill(future, -torch.inf)"
RETURN = "return per_head.sum(dim=1) + module.out_proj.bias"
OUT = "per_head = latent_context @ folded.transpose(1, 2)"
TAIL = SOLUTION[SOLUTION.index("    latent_context") :]
AFTER = "    ctx = (latent_context @ up_value.mT).transpose(1, 2).reshape(b, num_tokens, -1)\n"
EINSUM = """\
    w_k = module.W_up_key.weight.view(H, hd, -1)
    w_v = module.W_up_value.weight.view(H, hd, -1)
    w_o = module.out_proj.weight.view(-1, H, hd)
    q = torch.einsum("bhtd,hdc->bhtc", queries, w_k)
    s = torch.einsum("bhtc,bsc->bhts", q, latents[:, 0]) / hd**0.5
    s = s.masked_fill(module.mask[:num_tokens, :num_tokens], float("-inf"))
    w = module.dropout(s.softmax(-1))
    return torch.einsum("bhts,bsc,hdc,ohd->bto", w, latents[:, 0], w_v, w_o) + module.out_proj.bias
"""
LOOP = """\
    out = module.out_proj.bias.expand(b, num_tokens, -1)
    for h in range(H):
        rows = slice(h * hd, (h + 1) * hd)
        q = queries[:, h] @ module.W_up_key.weight[rows]  # (b, T, c)
        s = q @ latents[:, 0].mT / hd**0.5
        s = s.masked_fill(module.mask[:num_tokens, :num_tokens], -1e9)
        w = module.dropout(torch.softmax(s, dim=-1))
        fold = module.out_proj.weight[:, rows] @ module.W_up_value.weight[rows]
        out = out + (w @ latents[:, 0]) @ fold.T
    return out
"""
SDPA = """\
    q = queries @ module.W_up_key.weight.view(H, hd, -1)
    ctx = torch.nn.functional.scaled_dot_product_attention(q, latents, latents, is_causal=True,
        scale=hd**-0.5, dropout_p=module.dropout.p if module.training else 0.0)
"""


def change(*pairs, text=SOLUTION):
    """The solution with each ``old`` replaced by ``new``: one mistake a reader makes."""
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert old in text, old
        text = text.replace(old, new)
    return text


def body(code):  # the solution's first lines (latents, queries and H, hd), then ``code``
    return SOLUTION[: SOLUTION.index("    up_key")] + code


AFTER_COMBINING = AFTER + "    return module.out_proj(ctx)\n"
BEFORE_OUT = TAIL[: TAIL.index("    out =")]
MASK = "future = module.mask[:num_tokens, :num_tokens]"
ONES = "future = torch.ones(num_tokens, num_tokens)"
SPLIT = "module.split_heads(latents[:, 0] @ module.W_up_{}.weight.T)"
# fmt: off
CASES = [  # (answer, passes?, words its feedback must contain)
    (SOLUTION, True, "equals forward"), (change("dim=-1", "dim=-2"), False, "dim=-1, the keys"),
    (body(EINSUM), True, "equals forward"), (body(LOOP), True, "equals forward"),
    (body(SDPA + "    latent_context = ctx\n" + TAIL[TAIL.index("    up_value"):]), True, "equals"),
    (change(TAIL, BEFORE_OUT + AFTER_COMBINING), True, "equals forward"),
    (change("hd**0.5, dim", "1, dim", "= queries @", "= queries / hd**0.5 @"), True, "equals"),
    (body("    raise NotImplementedError\n"), False, "hint(1)"),
    (body("    return module(x)\n"), False, "book's forward"),
    (body("    return module.absorbed(x)\n"), False, "own method"),
    (body("    return as_multi_head(module)(x)\n"), False, "as_multi_head"),
    (body("    return generate_latent(module, x, LatentCache(module, b, 9))\n"), False, "step"),
    (change(ROWS, "module.up_key_blocks()"), False, "up_key_blocks"),
    (change("out.transpose(0, 1) @ up_value", "module.value_out_blocks()"), False, "value_out_b"),
    (change("absorbed_queries = queries @ up_key", "keys = " + SPLIT.format("key"),
            "absorbed_queries @ latents.transpose", "queries @ keys.transpose"), False, "the keys"),
    (change("attn_weights @ latents", "attn_weights @ " + SPLIT.format("value"),
            OUT, "per_head = latent_context.transpose(1, 2).flatten(2) @ module.out_proj.weight.T",
            RETURN, "return per_head"), False, "formed the values"),
    (change("queries @ up_key", "queries @ module.split_heads(module.W_up_key(latents[:, 0]))"
            ".mT @ latents[:, 0]"), False, "formed the keys"),
    (change("absorbed_queries = queries @ up_key", "k_t = up_key @ latents.mT",  # (b, H, hd, T)
            "absorbed_queries @ latents.transpose(2, 3)", "queries @ k_t"), False, "the keys"),
    (body("    k = module.split_heads(module.W_up_key(latents[:, 0]))\n"
          "    v = module.split_heads(module.W_up_value(latents[:, 0]))\n"), False, "keys and the"),
    (change(ROWS, "module.W_up_key.weight.view(hd, H, -1).transpose(0, 1)"), False, "H-th row"),
    (change(VALUE_ROWS, "module.W_up_value.weight.view(hd, H, -1).transpose(0, 1)"), False, "V.T"),
    (change(ROWS, "module.W_up_key.weight.T.reshape(H, hd, -1)"), False, ".T.reshape scrambles"),
    (change(VALUE_ROWS, "module.W_up_value.weight.T.reshape(H, hd, -1)"), False, "W_up_value.we"),
    (change("split_heads(module.W_query(x)", "W_query(x).view(b, H, -1, hd"), False, "split_heads"),
    (change("module.W_down_kv(x)", "(x @ module.W_down_kv.weight.T)"), False, "W_down_kv(x)"),
    (change("module.W_query(x)", "x @ module.W_query.weight.T"), False, "module.W_query(x)"),
    (change("module.W_query(x)", "x @ module.W_query.weight.T", "module.W_down_kv(x)",
            "(x @ module.W_down_kv.weight.T)"), False, "module.W_query(x) and module.W_down_kv(x)"),
    (change("hd**0.5", "module.latent_dim**0.5"), False, "not latent_dim ** 0.5"),
    (change("hd**0.5", "module.d_out**0.5"), False, "not d_out ** 0.5"),
    (change("attn_scores / hd**0.5", "attn_scores"), False, "not scaled"),
    (change("attn_scores / hd**0.5", "attn_scores * hd**0.5"), False, "multiplies"),
    (change("/ hd**0.5, dim=-1)", ", dim=-1) / hd**0.5"), False, "before the softmax"),
    (change(MASKED, ""), False, "mask the"), (change("-torch.inf", "0"), False, "-torch.inf"),
    (change(MASK, "future = module.mask"), False, "shorter than context_length"),
    (change(MASK, ONES + ".triu().bool()"), False, "from itself"),
    (change(MASK, ONES + ".tril().bool()"), False, "earlier ones"),
    (change(DROPOUT, ""), False, "in training"), (change("sum(", "mean("), False, "a mean"),
    (change(MASKED, "", "weights)\n", "weights.masked_fill(future, 0))\n"), False, "after, rows"),
    (change("module.dropout(attn_weights)", "F.dropout(attn_weights, module.dropout.p)"), False,
     "eval mode"),
    (change(DROPOUT, "", "attn_scores.m", "module.dropout(attn_scores).m"), False, "to the scores"),
    (change(DROPOUT, "", "attn_scores / hd", "module.dropout(attn_scores) / hd"), False, "is nan"),
    (change(DROPOUT, "", "attn_weights @ latents ", "module.dropout(attn_weights @ latents) "),
     False, "combined latents"),
    (change(DROPOUT, "", RETURN, f"return module.dropout({RETURN[7:]})"), False, "to the output"),
    (change("out_proj.weight.view", "out_proj.weight.mT.reshape"), False, "not its rows"),
    (change(TAIL, BEFORE_OUT + AFTER_COMBINING.replace(".transpose(1, 2)", "")), False,
     "transpose(1, 2)"),
    (change(RETURN, "return per_head.sum(dim=1)"), False, "bias is missing"),
    (change(RETURN, "return (per_head + module.out_proj.bias).sum(dim=1)"), False, "not per head"),
    (change(TAIL, BEFORE_OUT + AFTER + "    return ctx\n"), False, "out_proj is missing"),
    (change(RETURN, f"return module.out_proj({RETURN[7:]})"), False, "ran twice"),
    (change(RETURN, "return module.out_proj(per_head.sum(dim=1))"), False, "ran twice"),
    (change("folded.transpose(1, 2)", "folded.reshape(H, -1, module.d_out)"), False, "not reshape"),
    (change(RETURN, f"return module.dropout({RETURN[7:]})"), False, "output as well"),
    (change(ROWS, "module.W_up_key.weight.T.reshape(H, -1, hd).mT"), False, "scrambles"),
    (change("up_value = module.W_up_value", "up_value = module.W_up_key"), False, "W_up_key's"),
    (change(RETURN, "return per_head"), False, "sum the heads' outputs over dim=1"),
    (change(RETURN, "per_head.sum(dim=1) + module.out_proj.bias"), False, "returned None"),
    (change("latents.transpose(2, 3)", "latents[:, 0].transpose(1, 2)"), False, "no head axis"),
    (change(ROWS, ROWS + ".mT"), False, "blocks of W_up_key are turned"),
    (change(RETURN, "return per_head.sum(dim=1) + 2 * module.out_proj.bias"), False, "hint(3)"),
    (change("up_key = module", "up_key = 1.1 * module"), False, "see hint(1)"),
    (change("attn_scores / hd", "attn_scores.clamp(max=0.1) / hd"), False, "differ at the weights"),
    (change("attn_scores = absorbed", "attn_scores = 1.1 * absorbed"), False, "at the scores"),
    (change("= attn_weights @", "= 1.1 * attn_weights @"), False, "at the combined latents"),
]
# fmt: on


@pytest.mark.parametrize("answer, passes, words", CASES)
def test_the_check(answer, passes, words):
    namespace = {}
    exec(answer, namespace)
    result = absorbed_forward.check(namespace["absorbed_attention"])
    assert result.passed is passes and words in result.feedback, result.feedback


def test_a_row_can_fail():  # a wrong answer held to another mistake's words: its own are told
    with pytest.raises(AssertionError, match="Softmax over dim=-1, the keys"):
        test_the_check(change("dim=-1", "dim=-2"), False, "mask the scores")
