"""Transformer building blocks shared by the attention baselines: pre-LN block, positions, pooling."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from models.layers.drop import Dropout
from models.layers.mlp import Mlp


class PreLNBlock(nn.Module):
    """``x + drop(attn(LN(x), key_mask))`` then ``x + drop(ffn(LN(x)))`` (pre-LN: stable without warm-up).

    Args:
        dim: model width D.
        attn: a module ``(x (B, L, D), key_mask (B, L) | None) -> (B, L, D)``.
        mlp_ratio: FFN inner width = mlp_ratio * D.
        dropout: residual-branch and FFN dropout.
    """

    def __init__(self, dim: int, attn: nn.Module, *, mlp_ratio: int = 4, dropout: float = 0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = attn
        self.ln2 = nn.LayerNorm(dim)
        self.ffn = Mlp(dim, mlp_ratio * dim, dropout)
        self.drop = Dropout(dropout)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), key_mask))  # (B, L, D)
        return x + self.drop(self.ffn(self.ln2(x)))  # (B, L, D)


def sinusoidal_positions(L: int, dim: int, *, device=None, dtype=torch.float32) -> torch.Tensor:
    """(L, D) fixed sin/cos positions (Vaswani et al., 2017): computed on the fly, any length, no parameters."""
    pos = torch.arange(L, device=device, dtype=torch.float32)[:, None]  # (L, 1)
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    out = torch.zeros(L, dim, device=device, dtype=torch.float32)
    out[:, 0::2] = torch.sin(pos * freq)
    out[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return out.to(dtype)


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``x (B, L, D)`` over the real tokens (``mask (B, L)`` True); a row with none gives 0."""
    if mask is None:
        return x.mean(dim=1)
    m = mask.to(x.dtype)[..., None]  # (B, L, 1)
    return (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)  # (B, D)
