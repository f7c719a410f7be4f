"""Slow, obviously correct oracles for the attention patterns in ``models/layers/attention_patterns.py``.

Each pattern is an explicit (L, L) bool matrix (True = query i may attend to key j), combined with the
key mask and fed to one dense masked softmax. O(L^2): for tests only. Independent of the module it checks (its own
feature map phi(x) = elu(x) + 1 too).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sliding_window_pattern(L: int, *, window_one_sided: int, global_first: bool = True, device=None) -> torch.Tensor:
    """(L, L): |i - j| <= w; with ``global_first`` also row 0 and column 0 (Longformer)."""
    i = torch.arange(L, device=device)
    allowed = (i[:, None] - i[None, :]).abs() <= window_one_sided
    if global_first:
        allowed[0, :] = True
        allowed[:, 0] = True
    return allowed


def fixed_sparse_pattern(L: int, *, block: int, summary: int, device=None) -> torch.Tensor:
    """(L, L): same block (i // l == j // l), or j is a summary position (j mod l >= l - c) (Child et al.)."""
    i = torch.arange(L, device=device)
    same_block = (i[:, None] // block) == (i[None, :] // block)
    summary_key = (i % block >= block - summary)[None, :]
    return same_block | summary_key


def full_pattern(L: int, *, device=None) -> torch.Tensor:
    return torch.ones(L, L, dtype=torch.bool, device=device)


def dense_attention(q, k, v, allowed: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(Dh)) v over ``allowed`` (L, L) & key_mask (B, L); rows with no key give 0.

    q, k, v: (B, H, L, Dh). Computed in float64 so that it is an oracle for float32 kernels.
    """
    B, H, L, Dh = q.shape
    ok = allowed[None, None].expand(B, 1, L, L)  # (B, 1, L, L)
    if key_mask is not None:
        ok = ok & key_mask[:, None, None, :]
    scores = (q.double() @ k.double().transpose(-2, -1)) * Dh**-0.5  # (B, H, L, L)
    scores = scores.masked_fill(~ok, float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row of -inf is NaN after softmax: zero it
    return (probs @ v.double()).to(v.dtype)


def dense_linear_attention(q, k, v, key_mask: torch.Tensor | None = None, *, eps: float = 1e-6) -> torch.Tensor:
    """The (L, L) similarity matrix phi(q) phi(k)^T, masked, each row divided by its sum (+ eps)."""
    sim = (F.elu(q.double()) + 1) @ (F.elu(k.double()) + 1).transpose(-2, -1)  # (B, H, L, L); phi(x) = elu(x) + 1
    if key_mask is not None:
        sim = sim * key_mask[:, None, None, :]
    return ((sim @ v.double()) / (sim.sum(dim=-1, keepdim=True) + eps)).to(v.dtype)
