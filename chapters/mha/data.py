"""The reference book's running example: six tokens with three-dimensional embeddings."""

import torch

TOKENS = ("Your", "journey", "starts", "with", "one", "step")


def example_inputs():
    """The six-token sentence as a ``(6, 3)`` tensor, one row per token."""
    return torch.tensor(
        [
            [0.43, 0.15, 0.89],  # Your
            [0.55, 0.87, 0.66],  # journey
            [0.57, 0.85, 0.64],  # starts
            [0.22, 0.58, 0.33],  # with
            [0.77, 0.25, 0.10],  # one
            [0.05, 0.80, 0.55],  # step
        ]
    )


def example_batch():
    """Two copies of the sentence stacked into a batch: ``(2, 6, 3)``."""
    inputs = example_inputs()  # (num_tokens, d_in)
    return torch.stack((inputs, inputs), dim=0)  # (2, num_tokens, d_in)
