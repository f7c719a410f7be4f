"""Reusable blocks shared by architectures (attention, masks, windows, clustering, set blocks)."""

from models.layers.attention import MultiHeadAttention, MultiHeadSelfAttention, masked_sdpa
from models.layers.attention_patterns import (
    PatternSelfAttention,
    fixed_sparse_attention,
    full_attention,
    linear_attention,
    sliding_chunks_attention,
)
from models.layers.gates import GateNet
from models.layers.mlp import Mlp
from models.layers.params import NumParamsMixin
from models.layers.set_blocks import ISAB, MAB, PMA, SAB, SetPoolingHead
from models.layers.transformer import PreLNBlock, masked_mean, sinusoidal_positions

__all__ = [
    "GateNet",
    "ISAB",
    "MAB",
    "Mlp",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "NumParamsMixin",
    "PMA",
    "PatternSelfAttention",
    "PreLNBlock",
    "SAB",
    "SetPoolingHead",
    "fixed_sparse_attention",
    "full_attention",
    "linear_attention",
    "masked_sdpa",
    "masked_mean",
    "sinusoidal_positions",
    "sliding_chunks_attention",
]
