"""Chapter 1's exercise: the wrapper's forward pass, written from :class:`WrapperSkeleton`.

:func:`check_wrapper` builds the reader's class with three, two and one heads: every head must
run once on the same ``x``, in list order, their outputs joined on the last axis."""

import torch
from torch import nn

from ..attention import CausalAttention
from .class_answer import Skeleton, class_problem, delegation
from .core import CheckResult, Exercise, first_mistake, never_raises
from .shortcuts import watching
from .wrapper_trial import CONFIGS, MISTAKES, UNKNOWN, Trial


class WrapperSkeleton(Skeleton):
    """Chapter 1's starting point: ``num_heads`` independent heads, no forward pass yet."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            for _ in range(num_heads)
        )


@never_raises
def check_wrapper(cls):
    """Check chapter 1's exercise: a wrapper class whose forward runs every head on ``x``, in
    list order, and joins their outputs on the last axis."""
    problem = class_problem(cls, "check_wrapper", "MyWrapper", "the loop over heads")
    if problem:
        return CheckResult(False, problem)
    with watching() as (book, watch):
        for config in CONFIGS:
            trial = Trial(cls, config, book, watch)
            if set(book) - {"CausalAttention.forward"}:
                return CheckResult(False, delegation(cls, book, "the loop over heads"))
            mistake = first_mistake(MISTAKES, trial) or (None if trial.joined() else UNKNOWN)
            if mistake is not None:
                quiet = mistake.name in ("constructor raises", "the starting code")
                seen_with = f"\n(Seen with {trial.call}.)" * (not quiet)
                return CheckResult(False, mistake.tell(trial) + seen_with)
    return CheckResult(
        True,
        "With 1, 2 and 3 heads, every head reads the same x, the heads run in list order, and "
        "their outputs sit side by side on the last axis: num_heads × d_out values per token.",
    )


class MyWrapper(WrapperSkeleton):
    def forward(self, x):
        # num_heads tensors, each (b, num_tokens, d_out)
        head_outputs = [head(x) for head in self.heads]
        # (b, num_tokens, num_heads * d_out)
        return torch.cat(head_outputs, dim=-1)


sequential_wrapper = Exercise(
    check_wrapper,
    hints=(
        "The trace showed what each head is given, and in which order the heads run. The "
        "shape prediction showed how the outputs come together. Your forward does the same.",
        "Go through self.heads in order and call each head on the same x. That gives "
        "num_heads tensors of shape (b, num_tokens, d_out); the wrapper returns one tensor of "
        "shape (b, num_tokens, num_heads × d_out).",
        "A list comprehension collects the heads' outputs; torch.cat joins a list of tensors "
        "along an existing axis, and dim=-1 is the last one.",
    ),
    solution_code=MyWrapper,
)
