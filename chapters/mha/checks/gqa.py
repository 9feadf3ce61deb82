"""Chapter 6's check: a grouped-query forward, its mistakes buggy versions of :func:`grouped`."""

import re

from ..gqa import GroupedQueryAttention
from .heads_reference import OUT, grouped, misplaced
from .practice import Practice, checker
from .runs import LAYERS, UNTRANSPOSED, untransposed
from .split_mistakes import MISTAKES as CHAPTER_3
from .split_mistakes import SCALE, SPLIT_ONLY

# fmt: off
ROWS = ((5, 12, 6, 0.0, 6, 2, 0, 6), (6, 8, 8, 0.25, 4, 2, 1, 5), (3, 8, 5, 0.0, 4, 1, 0, 5),
        (4, 6, 7, 0.0, 3, 3, 0, 4), (10, 8, 4, 0.0, 8, 4, 0, 4))  # 6 heads, 2 groups first


def viewed_by_heads(f):
    """The forward raised on keys or values viewed with num_heads blocks (their size is named)."""
    kv = f["num_kv_groups"] * (f["d_out"] // f["num_heads"])
    return f["raised"] and f"size {2 * f['T'] * kv}" in f["raised"]


def unrepeated(f):
    """It raised on keys or values with fewer blocks than the queries, or repeated on the tokens."""
    n, shapes = f["num_heads"] // f["num_kv_groups"], f["shapes"]
    fewer = len({s[1] for s in shapes if len(s) == 4}) > 1  # block counts in the failed call
    on_tokens = n > 1 and any(n * f["T"] in s[-2:] for s in shapes)
    axis = "the block axis (dim=1), not the token axis" if on_tokens else "the block axis (dim=1)"
    return f["raised"] and (fewer or on_tokens) and {"n": n, "axis": axis}


EARLY = (LAYERS, (untransposed, UNTRANSPOSED),  # before the output: what the failed call shows
         (viewed_by_heads, "Your forward raised {error}: view the keys and values with "
          "self.num_kv_groups={num_kv_groups} blocks, not num_heads."),
         (unrepeated, "Your forward raised {error}: the queries have {num_heads} blocks, the keys "
          "and values need as many. Repeat each key and value block once per head of its group, "
          "group_size = num_heads // num_kv_groups = {n} times, on {axis}."),
         (lambda f: re.search(rf"out of bounds for dimension [01] with size {f['num_kv_groups']}"
                              r"|out of DATA bounds", str(f["raised"])), "Your forward raised "
          "{error}: a head index runs past the {num_kv_groups} key and value blocks. Head h reads "
          "block h // group_size (group_size = num_heads // num_kv_groups), on axis 1."))
CYCLED = ("Head h reads block h % num_kv_groups, as repeat (or expand on a new first axis) cycles "
          "the blocks, or values come from another group: its block is h // group_size. "
          "repeat_interleave(group_size, dim=1), for both.")
KV_SPLIT = ("Your keys and values are split wrong: each group owns a block of head_dim consecutive "
            "columns. View by token first, (b, num_tokens, num_kv_groups, head_dim), then "
            ".transpose(1, 2).")
MISTAKES = (  # in eval mode: what each buggy reference changes, and what to tell the reader
    (dict(drop=True), "Eval mode drops weights too: use self.dropout(attn_weights) instead."),
    *((changes, CYCLED) for changes in (dict(keys="repeat", values="repeat"), dict(keys="repeat"),
                                         dict(values="repeat"))),
    *((dict(scale=scale), SCALE) for scale in ("kv_width", "group_size")),
    (dict(scale="head_dim ** 1.5"), "The scores are divided by √head_dim three times (the queries, "
     "the keys, then the scores): once is enough."),
    (dict(keys="columns", values="columns"), "You repeat each column of the keys and values: "
     "repeat whole blocks after the split, repeat_interleave(group_size, dim=1)."),
    (dict(scale="after softmax"), "The weights are divided by √head_dim after the softmax, so "
     "they no longer sum to 1: divide the scores before it."),
    *((dict(kv=how), KV_SPLIT) for how in ("strided", "no transpose")),  # keys and values alone
    (dict(vs="strided"), KV_SPLIT),  # the values alone
    (dict(split="no transpose", kv="blocks"), "Your queries are one view straight to (b, "
     "num_heads, num_tokens, head_dim), which mixes tokens and heads: view by token first, then "
     ".transpose(1, 2)."),
    *(m for m in CHAPTER_3[1:-1] if "num_heads" not in m[0] and m[0] not in SPLIT_ONLY),  # biases,
    # projections, split, merge, scale, mask, softmax, out_proj: not a head count (the module's)
    OUT[1],
    "split, repeat_interleave(group_size, dim=1), -inf mask, √head_dim, softmax, merge, out_proj.")
BELONGS = "Dropout belongs on the attention weights, after the softmax: self.dropout(weights)."
GQA = Practice(
    start=GroupedQueryAttention, own=False, early=EARLY, reference=grouped, mistakes=MISTAKES,
    keys=("d_in", "d_out", "context_length", "dropout", "num_heads", "num_kv_groups"), rows=ROWS,
    torch="Chapter 5's practice hands attention to that kernel; write chapter 3's steps here.",
    starting="Your forward still raises NotImplementedError, as the starting code does: replace "
    "the raise line with the pass itself. The first hint, just below the check, shows where to "
    "start.",
    inherited="{name} does not define forward: it runs GroupedQueryAttention.forward, the book's.",
    belongs=BELONGS, trained=misplaced(BELONGS),
    praise=f"Your forward matches the reference in all {len(ROWS)} configurations (one group, "
    "several, one per head; biases; short inputs) and in training drops whole attention weights.")
# fmt: on
#: Checks a grouped-query class against references from each instance's own layers.
check_gqa_forward = checker(GQA, "check_gqa_forward")
