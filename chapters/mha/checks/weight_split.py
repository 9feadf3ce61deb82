"""Chapter 3's exercise: a weight split's forward, judged against :mod:`.split_mistakes`."""

from ..starting import WeightSplitSkeleton
from .practice import NOT_WRITTEN, Practice, checker
from .split_mistakes import MISTAKES, split
from .split_stages import BELONGS, EARLY, STAGES, TRAINED

# fmt: off
#: (d_in, d_out, context_length, dropout, num_heads, qkv_bias, num_tokens): most mistakes show in
#: the first; then a short input, one head, d_in > d_out, head_dim 1, biases, and dropout.
ROWS = ((5, 12, 6, 0.0, 3, 0, 6), (6, 8, 8, 0.0, 2, 0, 5), (4, 6, 5, 0.0, 1, 0, 5),
        (3, 8, 7, 0.0, 4, 0, 3), (10, 6, 4, 0.0, 6, 0, 4), (4, 6, 6, 0.0, 3, 1, 6),
        (3, 4, 5, 0.25, 2, 0, 5))
WEIGHT_SPLIT = Practice(
    start=WeightSplitSkeleton, rows=ROWS, reference=split, mistakes=MISTAKES, early=EARLY,
    quiet=True, belongs=BELONGS, trained=TRAINED, steps=STAGES,
    torch="Chapter 5's practice uses it; here, write them with @, masked_fill and torch.softmax.",
    starting=f"{NOT_WRITTEN} What does each head need from W_query, W_key and W_value, and in "
    "which shape? The first hint, just below the check, starts from there.",
    praise=f"Your forward matches the reference from each instance's own weights in all "
    f"{len(ROWS)} configurations (1 to 6 heads, short inputs, biases; dropout off in eval mode "
    "and on whole attention weights in training mode), without torch's own attention.")
# fmt: on
#: Checks a weight-split class against references from each instance's own layers.
check_weight_split = checker(WEIGHT_SPLIT, "check_weight_split")
