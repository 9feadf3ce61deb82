"""Multi-head attention, from one head at a time to weight splits: the code the chapters import."""

from .attention import CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper
from .data import TOKENS, example_batch, example_inputs
from .gqa import GroupedQueryAttention
from .latent import LatentAttention
from .rotary import RotaryAttention
from .tiled import TiledAttention
from .variants import (
    FusedMultiHeadAttention,
    MultiHeadAttentionCombinedQKV,
    TorchMultiheadAttentionAdapter,
    copy_weights,
)

__all__ = [
    "CausalAttention",
    "FusedMultiHeadAttention",
    "GroupedQueryAttention",
    "LatentAttention",
    "MultiHeadAttention",
    "MultiHeadAttentionCombinedQKV",
    "MultiHeadAttentionWrapper",
    "RotaryAttention",
    "TOKENS",
    "TiledAttention",
    "TorchMultiheadAttentionAdapter",
    "copy_weights",
    "example_batch",
    "example_inputs",
]
