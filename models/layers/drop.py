"""Dropout for every model: ``Dropout`` (``nn.Dropout``'s law, a cheaper draw) and stochastic depth (Huang et al.,
2016), as timm's ``DropPath``: drop a residual branch per sample."""

from __future__ import annotations

import torch
import torch.nn as nn


def fast_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """``nn.Dropout`` semantics (keep each element with probability 1 - p, scale kept ones by 1/(1 - p)).

    ``rand >= p`` instead of ``bernoulli_``: on these CPUs ``bernoulli_`` costs ~4x a ``uniform_`` draw and
    was the largest single cost of SwarmFormer's training step; Longformer's step at 1,024 tokens is 1.07x faster
    with it (benchmarks/dropout_draw.py). The masks differ from ``nn.Dropout``'s, the law does not.
    """
    if not training or p == 0.0:
        return x
    if x.dtype in (torch.float32, torch.float64):
        mask = torch.rand_like(x).ge_(p)  # (..., D) in {0, 1}
    else:  # draw in fp32: a bf16 uniform has 8 mantissa bits and shifts the keep rate by ~1e-3
        mask = torch.rand_like(x, dtype=torch.float32).ge_(p).to(x.dtype)
    return x * mask.mul_(1.0 / (1.0 - p))  # kept elements scaled by 1/(1-p)


class Dropout(nn.Module):
    """``nn.Dropout(p)`` with :func:`fast_dropout`'s draw: the same law, module interface and ``p`` attribute.

    Args:
        p: drop probability in [0, 1).
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p!r}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


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
