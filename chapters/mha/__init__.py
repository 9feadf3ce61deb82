"""Multi-head attention, from one head at a time to weight splits: the code the chapters import."""

from .attention import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper
from .data import TOKENS, example_batch, example_inputs

__all__ = [
    "CausalAttention",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "TOKENS",
    "example_batch",
    "example_inputs",
]
