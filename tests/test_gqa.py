"""GroupedQueryAttention is multi-head attention with shared key/value blocks: with one block per
head it is MultiHeadAttention, with one block in all it is multi-query attention, and head h
always reads block h // group_size. The cache helpers generate exactly what the forward computes,
and the chapter's figures follow the book's phone-legibility rules."""

import ast
import inspect

import pytest
import torch
from matplotlib.colors import to_rgb

import test_figures as figure_rules
from conftest import CHAPTERS
from mha import GroupedQueryAttention, MultiHeadAttention, plots_gqa
from mha.gqa import (
    KVCache,
    attend_to_cache,
    block_lists_match,
    generate,
    kv_cache_bytes,
    prefill,
    scaling_verdict,
    timing_verdict,
    weights_on_meta,
)
from mha.plots import MAX_WIDTH_IN, MIN_TEXT_PT, OKABE_ITO
from mha.predictions import Unreadable
from mha.reveal import reveal

#: (d_in, d_out, num_heads, num_kv_groups, qkv_bias): d_in != d_out in each.
CONFIGS = [
    (5, 12, 6, 2, False),
    (6, 8, 4, 2, True),
    (3, 8, 4, 1, False),
    (4, 6, 3, 3, True),
    (10, 8, 8, 4, False),
]
IDS = [f"{h}heads-{g}groups" + ("-bias" if bias else "") for _, _, h, g, bias in CONFIGS]


def build(d_in, d_out, num_heads, num_kv_groups, qkv_bias, context_length=9, seed=0):
    torch.manual_seed(seed)
    return GroupedQueryAttention(
        d_in, d_out, context_length, 0.0, num_heads, num_kv_groups, qkv_bias
    ).eval()


def random_input(d_in, num_tokens=7, batch=3, seed=1):
    return torch.randn(batch, num_tokens, d_in, generator=torch.Generator().manual_seed(seed))


# --- the same function as MultiHeadAttention ----------------------------------------------------


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_with_one_group_per_head_it_loads_a_multi_head_state_dict_and_computes_the_same(qkv_bias):
    torch.manual_seed(0)
    mha = MultiHeadAttention(5, 12, 9, 0.0, num_heads=4, qkv_bias=qkv_bias).eval()
    gqa = GroupedQueryAttention(5, 12, 9, 0.0, num_heads=4, num_kv_groups=4, qkv_bias=qkv_bias)
    assert gqa.state_dict().keys() == mha.state_dict().keys()
    gqa.load_state_dict(mha.state_dict())
    x = random_input(5)
    with torch.no_grad():
        assert torch.allclose(gqa.eval()(x), mha(x), atol=1e-6)


def test_with_one_group_per_head_the_same_seed_gives_multi_head_attentions_weights():
    """The layers are created in MultiHeadAttention's order, so a seeded run prints its numbers."""
    torch.manual_seed(123)
    mha = MultiHeadAttention(3, 4, 6, 0.0, num_heads=2).eval()
    torch.manual_seed(123)
    gqa = GroupedQueryAttention(3, 4, 6, 0.0, num_heads=2, num_kv_groups=2).eval()
    for name, tensor in mha.state_dict().items():
        assert torch.equal(gqa.state_dict()[name], tensor.to(gqa.state_dict()[name].dtype)), name
    x = random_input(3, num_tokens=6)
    with torch.no_grad():
        assert torch.allclose(gqa(x), mha(x), atol=1e-6)


def as_multi_head(gqa):
    """A MultiHeadAttention whose key/value block h is the GQA's block h // group_size."""
    mha = MultiHeadAttention(
        gqa.W_query.in_features,
        gqa.d_out,
        gqa.context_length,
        0.0,
        gqa.num_heads,
        qkv_bias=gqa.W_key.bias is not None,
    ).eval()
    state = gqa.state_dict()
    for name in ("W_key", "W_value"):
        for part in ("weight", "bias"):
            key = f"{name}.{part}"
            if key in state:
                blocks = state[key].unflatten(0, (gqa.num_kv_groups, gqa.head_dim))
                state[key] = blocks.repeat_interleave(gqa.group_size, dim=0).flatten(0, 1)
    mha.load_state_dict(state)
    return mha


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_head_h_reads_key_and_value_block_h_floordiv_group_size(config):
    """Equal to MultiHeadAttention with each shared block copied into the heads of its group."""
    gqa = build(*config)
    x = random_input(config[0])
    with torch.no_grad():
        assert torch.allclose(gqa(x), as_multi_head(gqa)(x), atol=1e-6)


def test_one_group_is_multi_query_attention_every_head_reads_the_same_keys():
    gqa = build(3, 8, 4, 1, False)
    assert gqa.W_key.out_features == gqa.W_value.out_features == gqa.head_dim
    mha = as_multi_head(gqa)
    blocks = mha.W_key.weight.unflatten(0, (4, gqa.head_dim))
    assert all(torch.equal(blocks[h], blocks[0]) for h in range(4))


# --- shapes, parameters, causality --------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_queries_keep_one_block_per_head_keys_and_values_one_per_group(config):
    d_in, d_out, num_heads, num_kv_groups, _ = config
    gqa = build(*config)
    head_dim = d_out // num_heads
    assert gqa.W_query.weight.shape == (d_out, d_in)
    assert gqa.W_key.weight.shape == gqa.W_value.weight.shape == (num_kv_groups * head_dim, d_in)
    assert gqa.out_proj.weight.shape == (d_out, d_out)
    assert (gqa.head_dim, gqa.group_size) == (head_dim, num_heads // num_kv_groups)
    assert gqa(random_input(d_in)).shape == (3, 7, d_out)


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_parameter_count_is_the_queries_and_out_proj_plus_two_key_value_projections(config):
    d_in, d_out, num_heads, num_kv_groups, bias = config
    kv_width = num_kv_groups * (d_out // num_heads)
    expected = (
        (d_in * d_out + bias * d_out)
        + 2 * (d_in * kv_width + bias * kv_width)
        + (d_out * d_out + d_out)
    )
    assert sum(p.numel() for p in build(*config).parameters()) == expected


def test_a_llama_sized_layer_has_a_quarter_of_the_key_value_parameters_of_multi_head():
    with weights_on_meta():
        gqa = GroupedQueryAttention(4096, 4096, 8, 0.0, num_heads=32, num_kv_groups=8)
        mha = MultiHeadAttention(4096, 4096, 8, 0.0, num_heads=32)
    kv = sum(p.numel() for name in ("W_key", "W_value") for p in getattr(gqa, name).parameters())
    kv_mha = sum(
        p.numel() for name in ("W_key", "W_value") for p in getattr(mha, name).parameters()
    )
    assert kv == 2 * 4096 * 1024 == kv_mha // 4


def test_weights_on_meta_gives_shapes_without_values_or_random_numbers_and_a_real_mask():
    real = build(5, 12, 6, 2, True)
    rng = torch.random.get_rng_state()
    with weights_on_meta():
        shapes_only = GroupedQueryAttention(5, 12, 9, 0.0, 6, 2, qkv_bias=True)
    assert torch.equal(torch.random.get_rng_state(), rng)
    for (name, p), (_, q) in zip(
        shapes_only.named_parameters(), real.named_parameters(), strict=True
    ):
        assert p.is_meta and p.shape == q.shape and p.requires_grad, name
    assert not shapes_only.mask.is_meta and torch.equal(shapes_only.mask, real.mask)


def test_weights_on_meta_ends_with_its_block_even_after_an_error():
    with pytest.raises(ValueError), weights_on_meta():
        GroupedQueryAttention(5, 12, 9, 0.0, num_heads=6, num_kv_groups=4)
    assert not any(p.is_meta for p in build(5, 12, 6, 2, False).parameters())


# That Llama-sized modules on meta weights import neither sympy nor torch._dynamo is checked in
# a fresh process, with the other import checks: tests/test_counting_and_trace.py.


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_a_token_never_sees_the_tokens_after_it(config):
    gqa = build(*config)
    x = random_input(config[0])
    changed = x.clone()
    changed[:, 4:] = torch.randn_like(changed[:, 4:])
    with torch.no_grad():
        before, after = gqa(x), gqa(changed)
    assert torch.allclose(before[:, :4], after[:, :4], atol=1e-6)
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_the_mask_is_a_bool_buffer_sliced_to_the_input():
    gqa = build(5, 12, 6, 2, False, context_length=9)
    assert gqa.mask.dtype == torch.bool and gqa.mask.shape == (9, 9)
    assert torch.equal(gqa.mask, torch.triu(torch.ones(9, 9), diagonal=1).bool())
    assert gqa(random_input(5, num_tokens=2)).shape == (3, 2, 12)


def test_dropout_acts_in_training_only_and_every_parameter_gets_a_gradient():
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(5, 12, 9, 0.5, num_heads=6, num_kv_groups=2)
    x = random_input(5)
    torch.manual_seed(1)
    first = gqa(x)
    torch.manual_seed(2)
    assert not torch.allclose(first, gqa(x))
    first.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in gqa.parameters())
    gqa.eval()
    with torch.no_grad():
        assert torch.equal(gqa(x), gqa(x))


# --- what a wrong configuration is told ---------------------------------------------------------


@pytest.mark.parametrize(
    "num_heads, num_kv_groups, phrase",
    [
        (6, 4, "num_heads=6 is not a multiple of num_kv_groups=4"),
        (6, 4, "divisors of num_heads: 1, 2, 3, 6"),
        (4, 0, "num_kv_groups must be a positive integer, got 0"),
        (4, 0, "Use num_kv_groups=1 for multi-query attention"),
        (4, -2, "got -2"),
        (4, 2.0, "got 2.0"),
        (4, True, "got True"),
        (0, 1, "num_heads must be a positive integer, got 0"),
        (5, 5, "d_out=12 is not divisible by num_heads=5"),
    ],
)
def test_a_configuration_that_cannot_split_raises_a_value_error_saying_what_to_change(
    num_heads, num_kv_groups, phrase
):
    with pytest.raises(ValueError, match="GroupedQueryAttention") as error:
        GroupedQueryAttention(5, 12, 8, 0.0, num_heads, num_kv_groups)
    assert phrase in str(error.value)


def test_an_input_longer_than_the_mask_raises_a_value_error():
    with pytest.raises(ValueError, match="context_length >= 10"):
        build(5, 12, 6, 2, False, context_length=9)(random_input(5, num_tokens=10))


# --- the key/value cache ------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_generating_token_by_token_with_the_cache_gives_the_forward_pass(config):
    gqa = build(*config)
    x = random_input(config[0])
    cache = KVCache(gqa, batch=3, max_tokens=9)
    with torch.no_grad():
        assert torch.allclose(generate(gqa, x, cache), gqa(x), atol=1e-5)
    assert cache.length == 7


def test_a_prefilled_prompt_then_one_token_at_a_time_gives_the_forward_pass():
    gqa = build(5, 12, 6, 2, True)
    x = random_input(5)
    cache = KVCache(gqa, batch=3, max_tokens=9)
    with torch.no_grad():
        prefill(gqa, x[:, :4], cache)
        assert torch.allclose(generate(gqa, x[:, 4:], cache), gqa(x)[:, 4:], atol=1e-5)
        cache.rewind(4)
        assert torch.allclose(generate(gqa, x[:, 4:], cache), gqa(x)[:, 4:], atol=1e-5)


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_the_cache_holds_two_values_per_group_column_and_token(config):
    gqa = build(*config)
    cache = KVCache(gqa, batch=3, max_tokens=9)
    per_layer = kv_cache_bytes(1, gqa.num_kv_groups, gqa.head_dim, 9, batch=3, bytes_per_value=4)
    assert cache.nbytes == per_layer == 2 * 3 * gqa.num_kv_groups * 9 * gqa.head_dim * 4


def test_llama_3_8b_caches_one_gib_per_8192_token_sequence_in_16_bit_values():
    assert kv_cache_bytes(32, 8, 128, 8192) == 2**30
    assert kv_cache_bytes(32, 32, 128, 8192) == 4 * 2**30


def test_the_cache_says_what_to_change_when_it_is_misused():
    gqa = build(5, 12, 6, 2, False)
    cache = KVCache(gqa, batch=3, max_tokens=4)
    with torch.no_grad():
        with pytest.raises(ValueError, match="max_tokens >= 5"):
            generate(gqa, random_input(5, num_tokens=5), cache)
        with pytest.raises(ValueError, match="takes one token"):
            attend_to_cache(gqa, random_input(5, num_tokens=2), cache)
    with pytest.raises(ValueError, match="from 0 to 4"):
        cache.rewind(5)
    whole = torch.zeros(3, gqa.num_kv_groups, 1, gqa.head_dim)  # (b, G, 1, hd)
    for keys, values in ((whole[..., :1], whole), (whole, whole[:, :, 0]), (whole[:1], whole)):
        with pytest.raises(ValueError, match=r"do not fit a cache of \(3, 2, tokens, 2\)"):
            cache.append(keys, values)


def test_the_cache_step_copies_no_key_shared_by_a_group():
    """attend_to_cache reads the cached keys through a view: no repeat, no expand."""
    tree = ast.parse(inspect.getsource(attend_to_cache))
    called = {
        n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    assert not called & {"repeat", "repeat_interleave", "expand"}


# --- timing verdicts ----------------------------------------------------------------------------


def test_a_verdict_needs_every_round_of_one_to_beat_every_round_of_the_other():
    assert timing_verdict("GQA", [1.0, 1.1, 1.2], "MHA", [3.0, 3.3, 2.9]) == (
        "GQA is faster than MHA in every round: 2.4x to 3.0x, round by round"
    )
    assert timing_verdict("MHA", [3.0, 3.3, 2.9], "GQA", [1.0, 1.1, 1.2]).startswith(
        "GQA is faster than MHA"
    )
    assert "inconclusive" in timing_verdict("GQA", [1.0, 2.0], "MQA", [1.5, 1.6])
    assert "inconclusive" in timing_verdict("GQA", [1.0, 1.0], "MQA", [1.0, 1.0])


def test_a_scaling_verdict_needs_every_round_on_one_side_of_factor_times_the_other():
    assert scaling_verdict("multiply-adds", [1.0, 1.1], [2.0, 2.6], 16) == (
        "16x the multiply-adds took 2.0x to 2.4x the time, round by round: "
        "less than 16x in every round"
    )
    assert scaling_verdict("bytes", [1.0, 1.1], [20.0, 21.0], 16).endswith(
        "more than 16x in every round"
    )
    overlapping = scaling_verdict("multiply-adds", [1.0, 2.0], [15.0, 17.0], 16)
    assert "inconclusive" in overlapping


ANSWER_BLOCKS = ([1, 1, 2, 2], [1, 2, 1, 2])


@pytest.mark.parametrize(
    "prediction",
    [
        ([1, 1, 2, 2], [1, 2, 1, 2]),
        [[1, 1, 2, 2], [1, 2, 1, 2]],
        ((1, 1, 2, 2), (1, 2, 1, 2)),
        ([0, 0, 1, 1], [0, 1, 0, 1]),
        "([1, 1, 2, 2], [1, 2, 1, 2])",
        " [0, 0, 1, 1], [0, 1, 0, 1] ",
        "[1, 1, 2, 2] and [1, 2, 1, 2]",
        "1 1 2 2 / 1 2 1 2",
        "1, 1, 2, 2; 1, 2, 1, 2",
        "0 0 1 1 and 0 1 0 1",
    ],
)
def test_block_lists_are_read_counted_from_one_or_from_zero(prediction):
    assert block_lists_match(prediction, ANSWER_BLOCKS)


@pytest.mark.parametrize(
    "prediction",
    [
        ([1, 2, 1, 2], [1, 1, 2, 2]),  # the two calls swapped
        ([0, 0, 1, 1], [1, 2, 1, 2]),  # one list from 0, the other from 1
        ([1, 1, 2, 2], [1, 2, 1, 2], [1]),
        ([1.5, 1, 2, 2], [1, 2, 1, 2]),
        "1 2 1 2 / 1 1 2 2",
        "[1, 2, 1, 2] and [1, 1, 2, 2]",
    ],
)
def test_wrong_block_lists_do_not_match(prediction):
    assert not block_lists_match(prediction, ANSWER_BLOCKS)


@pytest.mark.parametrize("prediction", ["yes", "repeat_interleave", None, [1, 1, 2, 2]])
def test_a_prediction_that_is_not_two_lists_is_unreadable_and_the_reveal_gives_the_format(
    prediction, capsys
):
    with pytest.raises(Unreadable):
        block_lists_match(prediction, ANSWER_BLOCKS)
    reveal(ANSWER_BLOCKS, prediction or "yes", matches=block_lists_match)
    shown = " ".join(capsys.readouterr().out.split())
    assert "cannot be read as this answer" in shown and "a pair of lists" in shown
    assert "is not what the code computes" not in shown


# --- the package code the chapter shows ---------------------------------------------------------


def test_the_code_the_chapter_shows_fits_79_characters():
    long = [
        (n, line)
        for n, line in enumerate((CHAPTERS / "mha" / "gqa.py").read_text().splitlines(), 1)
        if len(line) > 79
    ]
    assert not long, f"lines over 79 characters in mha/gqa.py: {long}"


# --- the chapter's figures ----------------------------------------------------------------------


def gqa_figures():
    gqa = build(3, 8, 4, 2, False, context_length=6, seed=123)
    q, k = gqa.W_query.weight.T, gqa.W_key.weight.T
    tokens = [2048, 4096, 8192]
    sizes = {f"{g} blocks": [kv_cache_bytes(32, g, 128, n) for n in tokens] for g in (32, 8, 1)}
    return {
        "plot_shared_key_blocks": plots_gqa.plot_shared_key_blocks(q, k, 4),
        "plot_shared_key_blocks (repeat)": plots_gqa.plot_shared_key_blocks(
            q, k, 4, block_of_head=[0, 1, 0, 1], how="repeat: head h reads block h % 2"
        ),
        "plot_shared_key_blocks (MQA)": plots_gqa.plot_shared_key_blocks(
            build(3, 8, 4, 1, False).W_query.weight.T, build(3, 8, 4, 1, False).W_key.weight.T, 4
        ),
        "plot_kv_cache_size": plots_gqa.plot_kv_cache_size(tokens, sizes, "cache size"),
    }


@pytest.fixture(scope="module")
def saved_gqa_figures():
    with pytest.MonkeyPatch.context() as monkeypatch:
        return {
            name: figure_rules.save_as_jupyter_does(fig, monkeypatch)
            for name, fig in gqa_figures().items()
        }


def test_every_figure_function_of_the_chapter_is_checked_here(saved_gqa_figures):
    functions = {
        name
        for name, f in inspect.getmembers(plots_gqa, inspect.isfunction)
        if name.startswith("plot_") and f.__module__ == plots_gqa.__name__
    }
    assert functions == {name.split(" ")[0] for name in saved_gqa_figures}


def test_the_chapters_figures_are_legible_on_a_phone(saved_gqa_figures):
    for name, figure in saved_gqa_figures.items():
        assert figure.width_px <= MAX_WIDTH_IN * 100, name
        assert figure.texts, name
        small = [(t.points, t.text) for t in figure.texts if t.points < MIN_TEXT_PT]
        assert not small, f"{name}: text under {MIN_TEXT_PT} pt: {small}"
        head_colours = {to_rgb(c) for c in OKABE_ITO} - {to_rgb("black")}
        for t in figure.texts:
            assert tuple(t.colour) not in head_colours, f"{name}: {t.text!r} in a head's colour"
            if t.background is not None:
                assert figure_rules.contrast(t.colour, t.background) >= 4.5, (name, t.text)


def test_the_chapters_figures_use_only_the_books_palette():
    source = (CHAPTERS / "mha" / "plots_gqa.py").read_text()
    stray = [
        (line, c)
        for line, c in figure_rules.colour_strings(ast.parse(source))
        if not figure_rules.allowed(c)
    ]
    assert not stray


def test_the_key_blocks_are_labelled_with_the_heads_that_read_them(saved_gqa_figures):
    right = {t.text for t in saved_gqa_figures["plot_shared_key_blocks"].texts}
    wrong = {t.text for t in saved_gqa_figures["plot_shared_key_blocks (repeat)"].texts}
    assert {"heads 1, 2", "heads 3, 4"} <= right and "heads 1, 3" not in right
    assert {"heads 1, 3", "heads 2, 4"} <= wrong and "heads 1, 2" not in wrong


def test_the_default_title_gives_no_answer_to_which_call_makes_the_layout():
    """The chapter draws this figure before it asks which call gives the layout."""
    gqa = build(3, 8, 4, 2, False, context_length=6, seed=123)
    fig = plots_gqa.plot_shared_key_blocks(gqa.W_query.weight.T, gqa.W_key.weight.T, 4)
    title = fig._suptitle.get_text()
    assert "consecutive" in title and "repeat" not in title


def test_no_text_right_after_the_block_reveal_gives_its_answer():
    """The formulas for which block a head reads belong in the reveal, not in the cells the reader
    sees before opening it."""
    import json

    nb = json.loads((CHAPTERS / "06_sharing_keys_values.ipynb").read_text())
    cells = nb["cells"]
    at = next(i for i, c in enumerate(cells) if "prediction_blocks," in "".join(c["source"]))
    assert "matches=block_lists_match" in "".join(cells[at]["source"])
    after = "".join(cells[at + 1]["source"])
    assert "h // group_size" not in after and "h % num_kv_groups" not in after
