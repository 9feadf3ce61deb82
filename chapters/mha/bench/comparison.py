"""Comparisons that know the measurements' spread, and the book's performance targets.

``compare`` turns two timings into "faster", "slower" or "inconclusive": only spreads (the
quartiles of the timed blocks) that do not overlap decide. ``time_causal_attention`` measures
how much the fused kernel gains from the causal mask. ``check_targets`` times each target's
modules side by side and ``target_verdict`` judges them the same noise-aware way.
"""

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from .timing import LABELS, prepare, time_in_rounds


class Attention(nn.Module):
    """``scaled_dot_product_attention`` alone, causal or not, on stacked queries, keys, values."""

    def __init__(self, is_causal):
        super().__init__()
        self.is_causal = is_causal

    def forward(self, qkv):
        queries, keys, values = qkv  # each (b, num_heads, num_tokens, head_dim)
        return F.scaled_dot_product_attention(queries, keys, values, is_causal=self.is_causal)


def _attention_case(batch, num_heads, num_tokens, head_dim, device):
    torch.manual_seed(0)
    qkv = torch.randn(3, batch, num_heads, num_tokens, head_dim, device=device)
    modules = {"causal": Attention(True), "full": Attention(False)}
    return modules, qkv  # qkv: (3, b, num_heads, num_tokens, head_dim)


#: Key and query block sizes of PyTorch's CPU flash-attention kernel (``FlashAttentionKernel.cpp``
#: in ATen's ``native/cpu``): keys in blocks of 512 (all keys when there are fewer); queries in
#: blocks of 256 from 768 tokens up, of 64 from 192, else of 32.
KEY_BLOCK = 512


def query_block(num_tokens):
    """The query block size of PyTorch's CPU flash kernel at ``num_tokens`` queries."""
    return 256 if num_tokens >= 768 else 64 if num_tokens >= 192 else 32


def causal_block_prediction(num_tokens):
    """``(skipped, pairs, predicted causal / full time)`` for the CPU flash kernel.

    The kernel walks (query block, key block) pairs. With ``is_causal`` it stops a query block's
    walk at the first key block that starts after the block's last query, so it skips only
    pairs that the mask hides entirely. If time follows the pairs computed, the causal call
    takes ``(pairs - skipped) / pairs`` of the full call's time.
    """
    q_block, k_block = query_block(num_tokens), min(KEY_BLOCK, num_tokens)
    q_starts = range(0, num_tokens, q_block)
    k_starts = range(0, num_tokens, k_block)
    skipped = sum(k >= min(q + q_block, num_tokens) for q in q_starts for k in k_starts)
    pairs = len(q_starts) * len(k_starts)
    return skipped, pairs, (pairs - skipped) / pairs


def time_causal_attention(sweep, tokens, *, num_heads=None, device="cpu"):
    """``{num_tokens: {"causal": Timing, "full": Timing}}`` for the fused kernel alone.

    Both calls do the same work unless the kernel skips the scores that the causal mask hides:
    their time ratio measures how much it skips. The heads are as wide as the length sweep's
    (``head_dim = sweep.d_out // sweep.tokens_sweep_heads``); ``num_heads`` of them (default:
    the length sweep's count). The kernel skips block pairs head by head, so fewer heads leave
    the prediction alone and only shorten every call.
    """
    if num_heads is not None and (isinstance(num_heads, bool) or not isinstance(num_heads, int)):
        raise ValueError(f"num_heads must be a whole number of heads, got {num_heads!r}.")
    if num_heads is not None and num_heads < 1:
        raise ValueError(f"num_heads must be 1 or more (or None: the sweep's), got {num_heads}.")
    head_dim = sweep.d_out // sweep.tokens_sweep_heads
    heads = sweep.tokens_sweep_heads if num_heads is None else num_heads
    cases = [partial(_attention_case, sweep.batch, heads, t, head_dim, device) for t in tokens]
    timings = time_in_rounds(
        cases,
        min_run_time=sweep.min_run_time,
        min_blocks=sweep.min_blocks,
        max_run_time=sweep.max_run_time,
        rounds=sweep.rounds,
        budget=sweep.budget,
    )
    return dict(zip(tokens, timings, strict=True))


class ScoresProduct(nn.Module):
    """The split's scores step alone: all heads' ``queries @ keys.T`` in one batched product."""

    def forward(self, inputs):
        queries, keys, _ = inputs  # each (b, num_heads, num_tokens, head_dim)
        return queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)


class MaskScaleSoftmax(nn.Module):
    """The split's steps between the two products: causal mask, scale, softmax, all heads."""

    def forward(self, inputs):
        queries, _, scores = inputs  # scores: (b, num_heads, num_tokens, num_tokens)
        n = scores.shape[-1]
        future = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, -torch.inf)
        return torch.softmax(scores / queries.shape[-1] ** 0.5, dim=-1)


def score_steps(batch, num_tokens, d_out, num_heads, device="cpu"):
    """A case for ``time_in_rounds``: the split's two score steps at ``num_heads`` heads.

    The same ``d_out`` split into more heads leaves the scores product's FLOPs unchanged and
    multiplies the scores that the mask, the scale and the softmax handle by ``num_heads``.
    """
    torch.manual_seed(0)
    head_dim = d_out // num_heads
    queries, keys = torch.randn(2, batch, num_heads, num_tokens, head_dim, device=device)
    scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
    modules = {"scores": ScoresProduct(), "softmax": MaskScaleSoftmax()}
    return modules, (queries, keys, scores)


# ---------------------------------------------------------------------------------------------
# Verdicts that know the measurements' spread
# ---------------------------------------------------------------------------------------------


#: How each verdict of ``compare`` reads in a sentence, with what decided it.
SPREAD_WORDS = {
    "faster": "faster, beyond the measured spread",
    "slower": "slower, beyond the measured spread",
    "inconclusive": "inconclusive (within the measured spread)",
}


def compare(a, b):
    """How ``a``'s time stands against ``b``'s: ``"faster"``, ``"slower"`` or ``"inconclusive"``.

    ``a`` and ``b`` are anything with ``low_ms`` and ``high_ms`` (a ``Row``, a ``Timing``): the
    quartiles of their timed blocks. Only when the two ranges do not overlap does the run tell
    the times apart; otherwise the difference is within the measured spread. A measurement of a
    single block (``blocks`` below 2, when it says) has no spread to judge by: inconclusive.
    """
    if min(getattr(a, "blocks", 2), getattr(b, "blocks", 2)) < 2:
        return "inconclusive"
    if a.high_ms < b.low_ms:
        return "faster"
    if a.low_ms > b.high_ms:
        return "slower"
    return "inconclusive"


def part_of_whole(part_ms, whole):
    """``"consistent"``, or ``"measurement problem"`` when a part outlasts its whole.

    ``part_ms`` is the time of a piece of the work that ``whole`` (with ``low_ms``, ``high_ms``)
    contains. A part that takes longer than the whole even against the whole's spread is not
    evidence about either: the two were measured under different conditions.
    """
    return "measurement problem" if part_ms > whole.high_ms else "consistent"


def select(rows, sweep, implementation):
    """The rows of one implementation in one sweep, in sweep order."""
    return [r for r in rows if r.sweep == sweep and r.implementation == implementation]


def _key(sweep):
    return "num_tokens" if sweep == "tokens" else "num_heads"


def ratios(rows, numerator, denominator, sweep="tokens"):
    """``{swept value: median time of numerator / median time of denominator}``.

    Above 1, ``denominator`` was the faster: ``ratios(rows, "wrapper", "split")`` is the split's
    speedup. Only values at which both were timed appear.
    """
    key = _key(sweep)
    times = {getattr(r, key): r.median_ms for r in select(rows, sweep, denominator)}
    return {
        getattr(r, key): r.median_ms / times[getattr(r, key)]
        for r in select(rows, sweep, numerator)
        if getattr(r, key) in times
    }


def verdicts(rows, a, b, sweep="tokens"):
    """``{swept value: compare(a's row, b's row)}``, e.g. where the split beat the wrapper; only
    values at which both were timed."""
    key = _key(sweep)
    other = {getattr(r, key): r for r in select(rows, sweep, b)}
    return {
        getattr(r, key): compare(r, other[getattr(r, key)])
        for r in select(rows, sweep, a)
        if getattr(r, key) in other
    }


def overhead_crossover(rows, implementation="wrapper"):
    """The sequence length at which ``implementation`` stops being overhead-bound, or ``None``.

    At the shortest sequence the work is small, so that time is taken as fixed overhead: Python,
    dispatch, kernel launches (the chapter prints how little of it the arithmetic could explain).
    Time = overhead + work that grows with the sequence (arithmetic and memory traffic), and the
    two are equal where the time reaches twice the overhead; beyond that the growing work
    dominates. The crossing is interpolated between measured lengths on log–log axes.
    """
    points = [(r.num_tokens, r.median_ms) for r in select(rows, "tokens", implementation)]
    if len(points) < 2:
        return None
    overhead = points[0][1]
    for (t0, y0), (t1, y1) in zip(points, points[1:], strict=False):
        if y0 < 2 * overhead <= y1:
            fraction = math.log(2 * overhead / y0) / math.log(y1 / y0)
            return math.exp(math.log(t0) + fraction * math.log(t1 / t0))
    return None


# ---------------------------------------------------------------------------------------------
# Targets, measured side by side
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """``implementation`` takes at most ``max_time_ratio`` times as long as the best reference.

    With several ``references``, the fastest of them in this run is the yardstick.
    """

    description: str
    implementation: str
    references: tuple
    batch: int
    num_tokens: int
    d_out: int
    num_heads: int
    max_time_ratio: float


TARGETS = (
    Target(
        "MultiHeadAttention at least 2.5× faster than the wrapper "
        "(1 × 64 tokens, d_out 64, 8 heads)",
        implementation="split",
        references=("wrapper",),
        batch=1,
        num_tokens=64,
        d_out=64,
        num_heads=8,
        max_time_ratio=1 / 2.5,
    ),
    Target(
        "FusedMultiHeadAttention at most 1.05× the time of nn.MultiheadAttention, "
        "the better of its two paths (4 × 512 tokens, d_out 768, 12 heads)",
        implementation="fused",
        references=("torch_mha", "torch_mha_nofast"),
        batch=4,
        num_tokens=512,
        d_out=768,
        num_heads=12,
        max_time_ratio=1.05,
    ),
)


def check_targets(
    *,
    targets=TARGETS,
    device="cpu",
    min_run_time=0.2,
    min_blocks=5,
    max_run_time=3.0,
    rounds=5,
    budget=120,
):
    """Time each target's modules side by side; return ``(target, {name: Timing})`` pairs.

    After ``budget`` seconds no new round starts (``time_in_rounds``); the report says so.
    """
    cases = [
        partial(
            prepare,
            (*t.references, t.implementation),
            t.batch,
            t.num_tokens,
            t.d_out,
            t.num_heads,
            device,
        )
        for t in targets
    ]
    timings = time_in_rounds(
        cases,
        min_run_time=min_run_time,
        min_blocks=min_blocks,
        max_run_time=max_run_time,
        rounds=rounds,
        budget=budget,
    )
    return list(zip(targets, timings, strict=True))


def target_verdict(target, timings):
    """``(verdict, reference)``: PASS, FAIL or INCONCLUSIVE against the fastest reference.

    PASS when even the slow end of the implementation's spread over the fast end of the
    reference's stays within ``max_time_ratio``; FAIL when even the most favourable ends miss
    it; INCONCLUSIVE when the spreads straddle the target.
    """
    reference = min(target.references, key=lambda name: timings[name].median_ms)
    mine, theirs = timings[target.implementation], timings[reference]
    if mine.high_ms / theirs.low_ms <= target.max_time_ratio:
        return "PASS", reference
    if mine.low_ms / theirs.high_ms > target.max_time_ratio:
        return "FAIL", reference
    return "INCONCLUSIVE", reference


def report_targets(results):
    """Per target: the verdict and description, every module's median, and the ratio."""
    lines = []
    for target, timings in results:
        verdict, reference = target_verdict(target, timings)
        mine = timings[target.implementation]
        ratio = mine.median_ms / timings[reference].median_ms
        lines.append(f"{verdict}  {target.description}")
        for name, t in timings.items():
            lines.append(
                f"      {LABELS[name]}: {t.median_ms:.3f} ms "
                f"(quartiles {t.low_ms:.3f} to {t.high_ms:.3f}, {t.rounds} rounds"
                + (", capped)" if t.capped else ")")
            )
        lines.append(
            f"      time ratio to {LABELS[reference]}: {ratio:.3f}, "
            f"needs ≤ {target.max_time_ratio:.3f}"
        )
        if verdict == "INCONCLUSIVE":
            lines.append("      the spreads straddle the target: run again on an idle machine")
    return "\n".join(lines)
