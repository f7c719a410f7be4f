"""Stochastic depth (Huang et al., 2016), as timm's ``DropPath``: drop a residual branch per sample."""

from __future__ import annotations

import torch
import torch.nn as nn


class DropPath(nn.Module):
    """In training, zero the whole branch output of a sample with probability ``p`` and scale the kept ones by
    ``1 / (1 - p)``; identity in eval mode or at ``p = 0``.

    Args:
        p: drop probability in [0, 1).
    """

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"drop-path probability must be in [0, 1), got {p!r}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or not self.p:
            return x
        keep = 1.0 - self.p
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # one draw per sample, broadcast over the rest
        return x * x.new_empty(shape).bernoulli_(keep).div_(keep)

    def extra_repr(self) -> str:
        return f"p={self.p}"
