"""Chapter 1's practice: MultiHeadAttentionWrapper's forward, written on
WrapperSkeleton. The check is :func:`mha.checks.wrapper.check_wrapper`."""

import torch

from .checks.wrapper import check_wrapper
from .exercise import Exercise
from .starting import WrapperSkeleton


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
