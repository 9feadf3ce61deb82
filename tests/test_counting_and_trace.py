"""The instruments chapter 1 uses to watch the wrapper run."""

import json
import subprocess
import sys

import pytest
import torch

from mha import MultiHeadAttentionWrapper, example_batch
from mha.counting import count_matmuls, count_ops, matmul_sizes
from mha.trace import trace_heads
from mha.variants import equivalent_modules


def test_the_wrapper_s_matmul_count_grows_with_heads_while_the_others_stay_flat():
    x = example_batch()
    counts = {
        name: [
            count_matmuls(equivalent_modules([name], 3, 2 * h, 6, h)[name], x) for h in (1, 2, 4, 8)
        ]
        for name in ("wrapper", "split", "combined_qkv", "fused")
    }
    # Per head: three projections, the scores and the weighted sum. The split does three
    # projections, the scores, the weighted sum and out_proj; one projection fewer with combined
    # QKV; the fused kernel counts as one call for scores and sum together.
    assert counts == {
        "wrapper": [5, 10, 20, 40],
        "split": [6] * 4,
        "combined_qkv": [4] * 4,
        "fused": [3] * 4,
    }


def test_matmul_sizes_are_multiply_adds_of_each_product():
    # One head, d_in=3, d_out=2, batch 2 × 6 tokens: projections (12×3)@(3×2) = 72 multiply-adds,
    # scores (6×2)@(2×6) per sequence = 72 × 2, weights @ values (6×6)@(6×2) = 72 × 2.
    sizes = matmul_sizes(MultiHeadAttentionWrapper(3, 2, 6, 0.0, 1), example_batch())
    assert sorted(sizes) == [72, 72, 72, 144, 144]


def test_count_ops_names_aten_operators():
    ops = count_ops(MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3), example_batch())
    assert ops["cat"] == 1 and ops["_softmax"] == 3


def test_trace_notices_a_head_that_is_fed_another_heads_output():
    class Chained(MultiHeadAttentionWrapper):
        def forward(self, x):
            first = self.heads[0](x)
            return torch.cat([first, self.heads[1](first[..., :3].expand_as(x))], dim=-1)

    calls = trace_heads(Chained(3, 3, 6, 0.0, 2), example_batch())
    assert [c.same_object for c in calls] == [True, False]


def test_every_head_receives_the_same_input_and_heads_run_in_list_order():
    x = example_batch()
    calls = trace_heads(MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=4), x)
    assert [c.head for c in calls] == [1, 2, 3, 4]
    assert all(c.same_object for c in calls)


#: Run in a fresh process: import torch and mha, and say which of sympy and torch._dynamo are
#: imported; build Llama-sized modules on meta weights (chapter 6's ``weights_on_meta``), and
#: say again; watch a forward the ways the book does (counting operators, measuring the score
#: tensors' memory, the checks' detector of torch's attention, the tiled check on its starting
#: code), and say again. Then, in the same process, undo the opt-out of the book's dispatch
#: modes (``QuietDispatchMode._should_skip_dynamo``), make a mode of that class and run one
#: operator under it, and say again: torch._dynamo among them shows that the probe can tell.
#: torch wraps a mode's handler when its class is made, so the probe's class is made after the
#: patch. One process for all (each fresh process imports torch again).
WATCHING = """
import json, sys, torch
from torch import nn
from mha import GroupedQueryAttention, MultiHeadAttention, TiledAttention, example_batch
from mha.counting import QuietDispatchMode, count_ops
from mha.gqa import weights_on_meta
from mha.measure_tiled import score_memory
from mha.checks.watch import Watch
from mha.tiled_exercise import online_softmax
from mha.starting import TiledAttentionStart
found = {}
def imported(after):
    found[after] = [m for m in ("sympy", "torch._dynamo") if m in sys.modules]
imported("import")
with weights_on_meta():
    GroupedQueryAttention(4096, 4096, 8, 0.0, 32, num_kv_groups=8)
    MultiHeadAttention(4096, 4096, 8, 0.0, num_heads=32)
    nn.Linear(4096, 14336, bias=False), nn.RMSNorm(4096)
imported("meta")
module = MultiHeadAttention(3, 4, 6, 0.0, num_heads=2)
count_ops(module, example_batch())
score_memory(TiledAttention(3, 4, 6, 0.0, num_heads=2, block_size=2), example_batch())
with torch.no_grad(), Watch():
    module.W_query.weight.mul_(2.0)
online_softmax.check(TiledAttentionStart)
imported("watching")
QuietDispatchMode._should_skip_dynamo = classmethod(lambda cls: True)
class Probe(QuietDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
with Probe():
    torch.ones(2).add(1)
imported("probe")
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def imported_after():
    """``{step: [the modules of sympy and torch._dynamo imported after it]}`` in one fresh
    process, for the steps ``import``, ``meta``, ``watching`` and ``probe``."""
    found = subprocess.run([sys.executable, "-c", WATCHING], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr[-2000:]
    return json.loads(found.stdout.splitlines()[-1])


def test_watching_a_forward_never_imports_torch_compile_machinery(imported_after):
    """torch wraps a plain TorchDispatchMode's handler for torch.compile, and the wrapper imports
    torch._dynamo on its first call: about 3 s of CPU in every process (a chapter's first
    check) for nothing the book compiles. The book's modes derive from QuietDispatchMode."""
    assert "torch._dynamo" not in imported_after["watching"]


def test_the_dynamo_test_can_fail(imported_after):
    assert "torch._dynamo" in imported_after["probe"]


def test_llama_sized_modules_on_meta_weights_import_neither_sympy_nor_dynamo(imported_after):
    """The point of weights_on_meta (tests/test_gqa.py): chapter 6 counts Llama-sized layers
    without the seconds of CPU that an operation on a meta tensor costs the first time (sympy,
    torch._dynamo). Checked in a fresh process, after checking that importing torch and mha
    alone imports neither (the probe above shows that the check can see an import)."""
    assert imported_after["import"] == [] and imported_after["meta"] == [], imported_after
