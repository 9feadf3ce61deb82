"""Chapter 5's check: a forward that hands attention to the fused kernel and uses its result."""

import re
from itertools import permutations

import torch

from ..starting import FusedAttentionStart
from .heads_reference import BIAS, OUT, fused, misplaced
from .practice import NOT_WRITTEN, Practice, checker

# fmt: off
ROWS = ((7, 8, 9, 0.0, 2, 0, 6), (5, 12, 8, 0.0, 3, 1, 5), (4, 4, 4, 0.0, 1, 0, 4),
        (8, 8, 7, 0.5, 4, 0, 7))  # Practice.keys, then qkv_bias and num_tokens
HEADS = ("Your heads and tokens are mixed up. The kernel takes (b, num_heads, num_tokens, "
         "head_dim): view to (b, num_tokens, num_heads, head_dim), then transpose(1, 2); move the "
         "heads back after the tokens before reshaping to (b, num_tokens, d_out).")
SPLIT = ("self.qkv(x)'s last axis holds all queries, then all keys, then all values, each "
         "num_heads blocks of head_dim: view it as (b, num_tokens, 3, num_heads, head_dim).")
ROLES = ("Your queries, keys and values are mixed up: self.qkv(x) holds the queries first, then "
         "the keys, then the values. Unpack them in that order.")
MISTAKES = (  # in eval mode: what each buggy reference changes, and what to tell the reader
    (dict(drop=True), "Eval mode drops weights too: pass dropout_p only while self.training."),
    (dict(mask="none"), "Every token sees later tokens too: there is no causal mask."),
    (dict(mask="inverted"), "Your mask is the wrong way round: attn_mask is True where allowed."),
    (dict(mask="added tril"), "A float attn_mask is added to the scores: tril(ones) adds 1 where "
     "allowed and hides nothing. Pass a bool mask, True where allowed, or is_causal=True."),
    (dict(mask="diagonal too"), "Your mask hides each token from itself: attn_mask is True on "
     "and below the diagonal (or pass is_causal=True)."),
    *((change, HEADS) for change in (dict(heads="not"), dict(heads="not", merge="transposed"),
                                     dict(heads="viewed"), dict(merge="no transpose"))),
    (dict(merge="interleaved"), "Your merge interleaves the heads' columns: transpose(1, 2), then "
     "reshape, head 1's block of head_dim columns first."),
    *((dict(split=split), SPLIT) for split in ("heads, 3", "strided", "3, tokens")),
    *((dict(roles=roles), ROLES) for roles in permutations(range(3)) if roles != (0, 1, 2)),
    (dict(scale="head_dim"), "The scores are scaled twice: the kernel divides them by √head_dim."),
    (dict(scale="times"), "Your scale multiplies the scores by √head_dim: the kernel's scale is a "
     "factor, and by default it is already 1 / √head_dim. Leave it out."),
    *((dict(scale=scale), "The kernel divides the scores by √head_dim itself: leave its scale out.")
      for scale in ("none", "sqrt d_out")),
    (dict(bias=False), BIAS.format(layer="qkv")), *OUT,
    "split self.qkv(x); heads before tokens; a causal kernel call; heads back; out_proj.")
EARLY = (  # what raised, before the output's values: (holds(facts), message)
    (lambda f: re.search(rf"\[{f['b']}, (-1|{f['T']}), {f['d_in']}\]' is inv", str(f["raised"])),
     "Your forward raised {error}: the heads together hold d_out={d_out} values a token, not "
     "d_in. Reshape the context to (b, num_tokens, self.d_out)."),
    (lambda f: f["raised"] and "attention" in f["op"] and len(f["shapes"]) > 1
     and f["shapes"][1][-2:] == f["shapes"][0][-2:][::-1], "Your keys reach the kernel "
     "transposed, as for queries @ keys: the kernel takes them as the queries, (b, num_heads, "
     "num_tokens, head_dim), and transposes them itself."),
    (lambda f: any(f"({m}) must match the size of tensor b ({n}) at non-singleton dimension 2" in
                   str(f["raised"]) for m, n in ((f["d_out"], f["d_in"]), (f["d_in"], f["d_out"]))),
     "Your forward raised {error}: it adds x (a residual) to a tensor d_out={d_out} wide. The "
     "block that holds attention adds that; return self.out_proj(context)."))
STEPWISE = "Your forward computes the attention step by step: hand it to the fused kernel."
UNUSED = "Your forward calls the kernel but does not use what it returns: change it, same output."
BELONGS = ("Dropout belongs inside the kernel, on its attention weights: pass dropout_p="
           "self.dropout_p while self.training (0.0 otherwise), and drop nothing yourself.")
# fmt: on


def after_match(r):
    """Once the outputs are right: the kernel did the work, and its result was used."""
    if "kernel" not in r.watch.seen:
        return STEPWISE
    return UNUSED if torch.equal(r.again(bump=1.0), r.output) else None


FUSED = Practice(
    start=FusedAttentionStart, own=True, rows=ROWS, reference=fused, mistakes=MISTAKES, early=EARLY,
    after=after_match, quiet=True, torch="Split the heads and call the kernel.", kernel=False,
    starting=f"{NOT_WRITTEN} What does the kernel need from self.qkv(x), and in which shape? "
    "fused_attention.hint(1), just below the check, starts from there.",
    inherited="{name} has no forward of its own yet: the starting code's only raises. What are "
    "the steps from x to the output? fused_attention.hint(1) gives a first nudge.",
    belongs=BELONGS, trained=misplaced(BELONGS),
    praise=f"Your forward matches the book's modules in all {len(ROWS)} configurations (one to "
    "four heads, biases, inputs shorter than context_length), comes from the fused kernel's "
    "result, and in training drops whole attention weights inside the kernel.",
)  # fmt: skip
#: Checks a fused-kernel class against references from each instance's own layers.
check_fused_attention = checker(FUSED, "check_fused_attention")
