"""Chapter 4's prose claims hold on seeds 0 to 7, not only on the seed the chapter runs.

Each seed is trained exactly as the chapter trains it: the three models of width 32 (one head,
two heads, four heads) built right after ``torch.manual_seed(seed)``, 200 steps of ``train`` on
one thread; then the one-head and two-head models resumed to 800 steps, keeping the step with
the lowest training loss (``keep_best``). ``CLAIMS`` lists what the chapter says about the
trained models, each as the sentence and the test of it, and every claim must hold on every
seed. One claim holds on most seeds, not all: the two heads' pairing at 800 steps ("on most of
them"). Which seeds pair is decided near the 0.8 line, and training carries a last-bit
difference of the CPU's arithmetic into a visibly different model: seed 7 pairs on one machine
(0.82, AMD Zen 1) and misses on another (0.73, AMD Zen 4), on the native code path; under
``ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE`` too it differs between machines. So the test
asserts the chapter's word with its margin, at least ``MOST`` of the 8 seeds, and prints the
seeds it found; it never pins which. ``CROSS_SEED_CLAIMS`` are the chapter's statements about
how seeds differ. The thresholds are the chapter's own (``mha.tasks``), so a claim that holds
here holds with the margin the chapter prints.

About 14,400 training steps in all, each seed trained once, in one test: "most of the 8" is a
statement about all of them.
"""

import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from mha.tasks import (
    ACCURACY_BANDS,
    PAIRED,
    SPREAD,
    LookbackModel,
    LookbackTask,
    position_over_token,
    read_heads,
    read_pairs,
)
from mha.train import train

SEEDS = tuple(range(8))
D_MODEL = 32
#: Why not fewer steps or a smaller training set (to make chapter 4 and this test quicker, issue
#: 34): tried on seeds 0 to 7, both code paths, on a 2-core AMD EPYC, 2026-12 (session 6):
#: - 600 steps in all: two heads at 75 % on seed 6 natively (the claim: over 85 %); they pair
#:   up on 5 of 8 seeds on the portable path, no seed to spare.
#: - 500 steps: pairing on 4 of 8 natively; two heads under 85 % on seeds 1, 3, 6 (portable).
#: - 192 training sequences, 800 steps: one head's second-worst offset at 0.50 on seed 6 on both
#:   paths (the claim: under 0.5); two heads at 85.0 and 85.2 % on seeds 4 and 3 natively.
#: - 128 sequences: two heads' last loss at 200 steps 0.087 on seed 0 (the claim: over 0.1).
#: - learning rate 0.02, 100 + 300 steps: two heads at 69 % after 100 steps on seed 3 natively
#:   (the claim: 70 to 95 %), 73 to 76 % on the others; at 400 steps 85.7 % on seeds 1 and 3.
#: A shorter second budget, same machine, session 7: seeds 0 to 7 trained 200 steps, the one-head
#: and two-head models resumed and read at 300 to 700 steps in all, both code paths:
#: - 700 steps: every claim holds, but the heads pair up on 5 of 8 seeds natively (7 of 8
#:   portable): "most" with no seed to spare.
#: - 600 steps: two heads at 74.8 % on seed 6 natively (the claim: over 85 %); pairing on 5 of 8
#:   on the portable path.
#: - 450 to 550 steps: two heads at 69 to 77 % on some seed on one path or the other (seed 5 at
#:   450 natively, seed 1 at 500 and seed 0 at 550 portable): full-batch Adam at this rate has
#:   loss spikes, and a seed read in one reads low; at 800 every seed is over 88 %.
#: - 300 and 400 steps: the heads pair up on at most 2 of 8 seeds.
#: So 256 sequences and 200 + 600 steps stay: the claims need them to hold with a margin.
#: Loss spikes, same machine, session 8: full-batch Adam at this rate has spikes of about 20
#: steps (loss over 0.3, two heads down to 77 %). In steps 701 to 900 of the two-head model on
#: seeds 0 to 7 there were 4 spikes in 24 runs (native, portable, and native with the loss's
#: log-softmax laid out along dim 1 of (b, vocab, scored, offsets), which changes the last bit
#: of its gradient there): a read at step 800 lands in one with about 2 % chance per seed and
#: code path. One did: that layout read seed 3 at 81.2 % at 800 steps natively (the claim: over
#: 85 %), so it was not taken. A CPU whose rounding moves a spike onto step 800 would read the
#: same. So the longer run keeps its lowest-loss step (``keep_best``, session 9): a spike
#: raises the loss, so the model read is one from outside it. Which step that is, natively here:
#: the two heads' last step on 6 of 8 seeds; seed 1 step 625 (loss 0.037; at 800, 0.074, still
#: recovering from a spike), seed 3 step 644 (2 % under the last). The one head, on a plateau
#: near loss 1.0 that wobbles by a few per cent, steps 367 to 800. Every claim held as before, on
#: both paths, and the same seeds paired (0 to 5); chapter 4's outputs did not change.
#: An annealed rate was tried instead (0.01 falling linearly to 0 over the 600 steps, or over
#: the last 100), seeds 0 to 7, session 9: it slows the pairing (seed 1 at 0.796 natively with
#: the last 100 annealed; seed 0, the chapter's own, at 0.71 portable and 0.84 native with all
#: 600), so the chapter's printed pairing would differ between code paths: not taken.
#: The 200-step reads are not protected and need not be: read at every other step from 180 to
#: 220 on seeds 0 to 7, both paths, through the noise of that stage, two heads got 72 to 86 %
#: right (the claim: 70 to 95 %) and one head at most 55.5 % (the claim: under 70 %).
#: Why not a cheaper step (chapter 4's strict nbval CPU time is about 3 times chapter 1's, 4 on the
#: portable path; the book asks for 2): profiled 2026-12-07, same machine, native path. A step of
#: the two-head model takes about 5.5 ms, nearly all of it PyTorch's kernels for the book's
#: MultiHeadAttention on small tensors: the matrix products about a third; the softmax over rows of
#: 10 scores, forward and backward, about a fifth (AVX-512's kernel there: a row of 16 takes an
#: eighth of the time, and AVX2's kernel is 3 times quicker on rows of 10); the copies behind the
#: heads' transposes about a sixth. The training code adds little, and it stays: Adam 0.25 ms
#: (torch._foreach_* updates, the same to the bit, would save 0.04 ms), the targets rebuilt each
#: step 0.03 ms. The chapter's 1,800 steps are about 10 s of CPU, and fewer steps or sequences break
#: the claims above.
STEPS, LONGER = 200, 800
#: What the chapter calls learned, and its bands for "99 % or more" and "under 70 %".
LEARNED = 0.95
BANDS = dict((text, low) for low, text in ACCURACY_BANDS)
TOP, LOW = BANDS["99 % or more"], BANDS["70 to 95 %"]


@dataclass
class Trained:
    """What one model showed after training, as the chapter reads it."""

    first_loss: float
    last_loss: float
    accuracy: torch.Tensor  # (num_offsets,)
    heads: list  # read_heads: [(offset, weight)] per head
    pairs: list  # read_pairs: [((offset, offset), weight)] per head
    position_over_token: list
    losses: list = None  # the loss of each step's weights, from the first step on

    @property
    def learned(self):
        return int((self.accuracy >= LEARNED).sum())

    @property
    def mean(self):
        return float(self.accuracy.mean())


def read(model, losses):
    return Trained(
        first_loss=losses[0],
        last_loss=losses[-1],
        accuracy=model.task.accuracy(model),
        heads=read_heads(model),
        pairs=read_pairs(model),
        position_over_token=position_over_token(model),
        losses=losses,
    )


@functools.cache
def run(seed):
    """The chapter's experiment on ``seed``: ``{(num_heads, steps): Trained}``, plus
    ``"before"``, the four-head model's position/token ratios before training."""
    task = LookbackTask()
    found = {}
    for num_heads in (1, 2, 4):
        torch.manual_seed(seed)
        model = LookbackModel(task, D_MODEL, num_heads)
        if num_heads == 4:
            found["before"] = position_over_token(model)
        losses = train(model, steps=STEPS, progress=False)
        found[num_heads, STEPS] = read(model, losses)
        if num_heads in (1, 2):
            losses += train(
                model, steps=LONGER - STEPS, resume=True, keep_best=True, progress=False
            )
            found[num_heads, LONGER] = read(model, losses)
    return found


def covered(heads):
    """The chapter's answer to "how many offsets do the four heads cover?"."""
    if all(weight > 0.5 for _, weight in heads):
        return len({offset for offset, _ in heads})
    return "spread"


def pairs_share_the_offsets(pairs):
    """Every head puts over PAIRED on two offsets, and the heads' pairs are 1-4 between them."""
    offsets = [k for pair, _ in pairs for k in pair]
    return all(weight > PAIRED for _, weight in pairs) and sorted(offsets) == [1, 2, 3, 4]


CLAIMS = {
    "all three started near the loss of a blind guess, ln 8": lambda r: all(
        abs(r[h, STEPS].first_loss - math.log(8)) < 0.05 for h in (1, 2, 4)
    ),
    "last loss: over 0.1 for one and two heads, below 0.01 for four": lambda r: (
        r[1, STEPS].last_loss > 0.1 and r[2, STEPS].last_loss > 0.1 and r[4, STEPS].last_loss < 0.01
    ),
    "four heads of width 8 learned all four offsets, 99 % or more right": lambda r: (
        r[4, STEPS].learned == 4 and r[4, STEPS].mean >= TOP
    ),
    "one head of width 32 learned none, under 70 % right": lambda r: (
        r[1, STEPS].learned == 0 and r[1, STEPS].mean < LOW
    ),
    "one head of width 32 did not do as well as two heads (within 1 point)": lambda r: (
        r[1, STEPS].mean < r[2, STEPS].mean - 0.01
    ),
    "two heads: 70 to 95 % right, one or two offsets learned at most": lambda r: (
        LOW <= r[2, STEPS].mean < LEARNED and r[2, STEPS].learned <= 2
    ),
    "the four heads cover four different offsets, each with over half its weight": lambda r: (
        covered(r[4, STEPS].heads) == 4
    ),
    "the four narrow heads put most of their weight (over 0.8) on their offset": lambda r: all(
        weight > 0.8 for _, weight in r[4, STEPS].heads
    ),
    "the wide head and the two medium heads spread (under 0.6 on every offset)": lambda r: all(
        weight < SPREAD for h in (1, 2) for _, weight in r[h, STEPS].heads
    ),
    "before training, position and token weigh about the same (ratio 0.75 to 1.33)": lambda r: all(
        0.75 < ratio < 1.33 for ratio in r["before"]
    ),
    "after training, every head's position part is over 2 times its token part": lambda r: all(
        ratio > 2 for ratio in r[4, STEPS].position_over_token
    ),
    "at 800 steps one head still gets under 70 % right and learns two offsets at most": lambda r: (
        r[1, LONGER].mean < LOW and r[1, LONGER].learned <= 2
    ),
    "at 800 steps one head gets its two worst offsets mostly wrong (under 50 %)": lambda r: (
        sorted(r[1, LONGER].accuracy.tolist())[1] < 0.5
    ),
    "at 800 steps two heads get over 85 % right, more than at 200": lambda r: (
        r[2, LONGER].mean > 0.85 and r[2, LONGER].mean > r[2, STEPS].mean
    ),
}


def pair_up(r):
    """At 800 steps two heads pair up: two offsets each (over 0.8), different pairs."""
    return pairs_share_the_offsets(r[2, LONGER].pairs)


#: "Most of the 8 seeds": more than half. Measured, read at the last step (before keep_best): on
#: an AMD Zen 4, 6 of 8 natively (seeds 6 and 7 miss) and 7 of 8 on the portable path (seed 6
#: misses); on an AMD Zen 1, 7 of 8 on both paths (seed 6 misses). With keep_best, on the Zen 4,
#: 6 of 8 on both paths (seeds 6 and 7 miss). One or two seeds to spare, never pinned which.
MOST = 5

CROSS_SEED_CLAIMS = {
    "another seed gives the four heads another order of offsets": lambda runs: (
        len({tuple(k for k, _ in r[4, STEPS].heads) for r in runs.values()}) > 1
    ),
    "on some seeds two heads stay near 90 % at 800 steps (85 to 95 %)": lambda runs: any(
        0.85 < r[2, LONGER].mean < LEARNED for r in runs.values()
    ),
}


def test_most_is_more_than_half_of_the_seeds():
    assert len(SEEDS) / 2 < MOST <= len(SEEDS)


def misses_as_the_chapter_says(r):
    """Where the pairing misses, the heads still take different pairs, and one head gives its
    pair only about 0.7 of its weight (0.6 to 0.8)."""
    pairs = r[2, LONGER].pairs
    offsets = sorted(k for pair, _ in pairs for k in pair)
    return offsets == [1, 2, 3, 4] and 0.6 < min(weight for _, weight in pairs) <= PAIRED


def pairing_differs(runs):
    """Where the pairing holds on fewer than ``MOST`` seeds of ``runs`` (the chapter's "most"
    would then be wrong), or misses otherwise than the chapter says."""
    paired = sorted(seed for seed, r in runs.items() if pair_up(r))
    print(f"the two heads pair up at 800 steps on seeds {paired} of {sorted(runs)}")
    failed = []
    if len(paired) < MOST:
        failed.append(
            f"the two heads pair up at 800 steps on seeds {paired} of {sorted(runs)}: "
            f"fewer than {MOST}, so not on most seeds, as the chapter says"
        )
    unlike = [s for s, r in runs.items() if s not in paired and not misses_as_the_chapter_says(r)]
    if unlike:
        failed.append(f"seeds {unlike}: the pairing misses otherwise than the chapter says")
    return failed


def test_every_claim_of_chapter_4_holds_on_seeds_0_to_7():
    runs = {seed: run(seed) for seed in SEEDS}
    failed = [
        f"seed {seed}: {claim}"
        for seed, r in runs.items()
        for claim, holds in CLAIMS.items()
        if not holds(r)
    ]
    failed += pairing_differs(runs)
    failed += spike_reads_low(runs[0][2, LONGER])
    failed += [claim for claim, holds in CROSS_SEED_CLAIMS.items() if not holds(runs)]
    assert not failed, "\n".join(failed)


def fake_run(accuracy, weight, pair_weight, ratio, first_loss=2.08, last_loss=None):
    """A run whose every model reads the same: for the claims' own test."""
    last_loss = 2.08 * (1 - accuracy) if last_loss is None else last_loss
    found = {"before": [ratio] * 4}
    for h in (1, 2, 4):
        facts = Trained(
            first_loss=first_loss,
            last_loss=last_loss,
            accuracy=torch.full((4,), accuracy),
            heads=[(k + 1, weight) for k in range(h)],
            pairs=[((2 * k + 1, 2 * k + 2), pair_weight) for k in range(h)],
            position_over_token=[ratio] * h,
        )
        found[h, STEPS] = found[h, LONGER] = facts
    return found


def test_each_claim_can_fail():
    """A claim that cannot fail tests nothing: each is false for a perfect model, an untrained
    one or a start unlike the chapter's."""
    perfect = fake_run(accuracy=1.0, weight=1.0, pair_weight=1.0, ratio=3.0)
    untrained = fake_run(accuracy=0.125, weight=0.2, pair_weight=0.4, ratio=1.0)
    other_start = fake_run(0.125, 0.2, 0.4, ratio=3.0, first_loss=5.0)
    for claim, holds in {**CLAIMS, "pair up": pair_up}.items():
        assert not all(holds(r) for r in (perfect, untrained, other_start)), claim
    for claim, holds in CROSS_SEED_CLAIMS.items():
        runs = ({0: perfect, 1: perfect}, {0: untrained, 1: untrained})
        assert not all(holds(r) for r in runs), claim


def highest_spike(losses):
    """The step of the highest loss after the first ``STEPS``, if it is a spike: over 3 times the
    lowest loss before it, and over 0.5 (a blind guess is ln 8, about 2.1). Else None."""
    peak = max(range(STEPS, len(losses)), key=losses.__getitem__)
    spike = losses[peak] > max(3 * min(losses[STEPS:peak], default=math.inf), 0.5)
    return peak if spike else None


def spike_reads_low(kept):
    """Cell 32: full-batch Adam at this rate "has a loss spike now and then: the loss jumps and
    fewer answers come out right", and "a model read during one reads low". ``kept`` is the
    chapter's seed's two heads, as the chapter keeps them: the highest loss between steps 200 and
    800 must be a spike, and the model retrained to its peak must get at least 5 points fewer
    right. Measured on seeds 0 to 7 on three code paths (native, portable, AVX2; session 10):
    every seed had one, a peak of loss 1.7 to 7.4 after lows of 0.01 to 0.26, and read at its peak
    got 12 to 38 points fewer right than kept (seed 0: 16 to 20). What is wrong, as a list."""
    peak = highest_spike(kept.losses)
    if peak is None:
        return [f"seed 0, two heads: no loss spike in steps {STEPS} to {LONGER}"]
    torch.manual_seed(0)
    in_spike = LookbackModel(LookbackTask(), D_MODEL, num_heads=2)
    train(in_spike, steps=peak, progress=False)  # the weights whose loss is losses[peak]
    right = float(in_spike.task.accuracy(in_spike).mean())
    print(f"seed 0, two heads, the spike at step {peak}: {right:.1%} right, kept {kept.mean:.1%}")
    if right < kept.mean - 0.05:
        return []
    return [f"seed 0, two heads, read in the spike at step {peak}: {right:.1%} right, not low"]


def test_the_spike_checks_can_fail():
    """Losses that fall steadily, or rise only a little, have no spike; a model read at a "spike"
    that is no spike (step 201, early in training) does not read low against a kept model that
    gets nothing right."""
    falling = [2.0 / (1 + step) for step in range(LONGER)]
    assert highest_spike(falling) is None
    bump = falling[:500] + [2.5 * falling[499]] + falling[501:]
    assert highest_spike(bump) is None
    assert highest_spike(falling[:500] + [1.0] + falling[501:]) == 500
    nothing_right = fake_run(accuracy=0.0, weight=0.5, pair_weight=0.5, ratio=3.0)[2, LONGER]
    nothing_right.losses = falling[:201] + [1.0] + falling[202:]
    assert spike_reads_low(nothing_right)


CHAPTER = Path(__file__).parent.parent / "chapters" / "04_what_heads_learn.ipynb"


def chapter_code():
    cells = json.loads(CHAPTER.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_the_chapter_trains_as_this_test_does():
    """If the chapter's budget or width changes, the claims above must be re-examined."""
    code = chapter_code()
    assert f"d_model = {D_MODEL}\n" in code
    assert f"losses = train_all(models, steps={STEPS}, labels=labels)" in code
    assert f"more = {LONGER - STEPS}  #" in code
    assert "longer = {h: models[h] for h in (1, 2)}" in code
    assert "train_all(longer, steps=more, resume=True, keep_best=True, labels=labels)" in code


def test_every_reveal_of_chapter_4_offers_its_choices():
    """Each question offers its answers (True/False, 1-4 or "spread"), so "spread" is readable."""
    reveals = chapter_code().split("reveal(\n")[1:]
    assert len(reveals) == 2
    assert all("choices=" in call.split("\n)")[0] for call in reveals)


def test_the_pairing_claim_fails_one_seed_short_of_most():
    paired = fake_run(accuracy=0.9, weight=0.5, pair_weight=0.9, ratio=3.0)
    paired[2, LONGER].pairs = [((1, 2), 0.9), ((3, 4), 0.9)]
    weak = fake_run(accuracy=0.9, weight=0.5, pair_weight=0.7, ratio=3.0)  # about 0.7
    shared = fake_run(accuracy=0.9, weight=0.5, pair_weight=0.7, ratio=3.0)
    shared[2, LONGER].pairs = [((1, 2), 0.7), ((2, 3), 0.9)]  # both heads on offset 2
    spread = fake_run(accuracy=0.9, weight=0.5, pair_weight=0.4, ratio=3.0)
    assert not pairing_differs({s: paired if s < MOST else weak for s in SEEDS})
    assert not pairing_differs({s: paired for s in SEEDS})  # every seed is "most" too
    assert pairing_differs({s: paired if s < MOST - 1 else weak for s in SEEDS})  # one short
    assert pairing_differs({s: paired if s < 7 else shared for s in SEEDS})  # missed otherwise
    assert pairing_differs({s: paired if s < 7 else spread for s in SEEDS})


def prose():
    cells = json.loads(CHAPTER.read_text())["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())


def test_the_chapter_says_most_seeds_and_pins_no_count():
    """The pairing is stated as what it is, on most seeds, never as what two heads always do,
    and never as a count of seeds that another CPU's rounding could change."""
    text = prose()
    assert "seeds 0 to 7, and on most of them" in text
    assert "on most of the seeds we trained" in text
    assert not re.search(r"\b\d of the \d seeds", text)
    assert "and they do it by pairing" not in text
    assert "two heads of width 16 share the four offsets, two per head," not in text
