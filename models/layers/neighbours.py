"""The original SwarmFormer's local mixing, made padding-aware: mean of a token and its two neighbours."""

from __future__ import annotations

import torch
import torch.nn as nn


def circular_neighbour_mean(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``(x[i-1] + x[i] + x[i+1]) / 3`` with circular wrap-around, as the authors' ``torch.roll`` code.

    With a mask the neighbours are the previous and next *real* tokens, wrapping around among the real
    tokens only (so the first real token's left neighbour is the last real token, whatever PAD follows):
    with right padding this is the roll over the unpadded sequence, which makes it padding-invariant.
    PAD positions are returned unchanged.

    Args:
        x: (B, L, D).
        mask: (B, L) bool, True = real token; None = all real (then exactly ``torch.roll``).
    """
    if mask is None:
        return (torch.roll(x, 1, dims=1) + x + torch.roll(x, -1, dims=1)) / 3  # (B, L, D), wraps around
    B, L, D = x.shape
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # (B, L): real positions first, in order
    n = mask.sum(dim=1, keepdim=True)  # (B, 1) real tokens per row
    j = torch.arange(L, device=x.device)[None, :]  # (1, L) rank among the compacted tokens
    is_real = j < n  # (B, L)
    n_safe = n.clamp_min(1)
    prev = torch.where(is_real, (j - 1) % n_safe, j)  # (B, L): PAD ranks point at themselves
    nxt = torch.where(is_real, (j + 1) % n_safe, j)
    idx = order[..., None].expand(B, L, D)
    xc = x.gather(1, idx)  # (B, L, D) compacted: real tokens first
    mean = (xc.gather(1, prev[..., None].expand(B, L, D)) + xc + xc.gather(1, nxt[..., None].expand(B, L, D))) / 3
    return torch.empty_like(x).scatter(1, idx, mean)  # (B, L, D) back in place


class NeighbourMean(nn.Module):
    """Module wrapper of :func:`circular_neighbour_mean` (no parameters)."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return circular_neighbour_mean(x, mask)
