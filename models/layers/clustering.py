"""Token -> cluster grouping: contiguous chunks, or learned Gumbel-softmax routing; both are padding-aware.

A clusterer has two halves that share one assignment:
  ``pool(x, mask, tau=) -> (reps (B, C, D), key_mask (B, C) | None, assign)``  the representatives, mask-weighted;
  ``broadcast(reps, assign) -> (B, L, D)``  each token gets its clusters' representatives back.
``key_mask`` marks clusters holding at least one real token (an empty cluster must not be attended to).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ChunkClusters(nn.Module):
    """Contiguous clusters of ``cluster_size`` tokens (the original SwarmFormer); representatives are means
    over the real tokens of each chunk. ``L`` must be a multiple of ``cluster_size`` (the caller pads).

    Args:
        cluster_size: S, tokens per chunk.
    """

    def __init__(self, cluster_size: int):
        super().__init__()
        self.cluster_size = cluster_size

    def pool(self, x: torch.Tensor, mask: torch.Tensor | None, *, tau=None):
        B, L, D = x.shape
        S = self.cluster_size
        if L % S:
            raise ValueError(f"length {L} is not a multiple of cluster_size={S}; pad the input")
        if mask is None:
            return x.view(B, L // S, S, D).mean(dim=2), None, None  # (B, C, D)
        m = mask.view(B, L // S, S, 1).to(x.dtype)  # (B, C, S, 1)
        count = m.sum(dim=2)  # (B, C, 1)
        reps = (x.view(B, L // S, S, D) * m).sum(dim=2) / count.clamp_min(1.0)  # (B, C, D); empty chunks -> 0
        return reps, count[..., 0] > 0, None

    def broadcast(self, reps: torch.Tensor, assign) -> torch.Tensor:
        return reps.repeat_interleave(self.cluster_size, dim=1)  # (B, L, D): each rep copied to its S tokens


def gumbel_assign(logits: torch.Tensor, *, tau: torch.Tensor | float, hard: bool, sample: bool) -> torch.Tensor:
    """Rows of cluster weights over the last dim.

    ``sample=True`` (training): Gumbel-softmax with temperature ``tau``; ``hard`` gives one-hot rows whose
    gradient is the soft sample's (straight-through). ``sample=False`` (eval): no noise; ``softmax(logits/tau)``
    or, when ``hard``, the one-hot argmax.
    """
    if sample:
        return F.gumbel_softmax(logits, tau=tau, hard=hard, dim=-1)
    if hard:
        return F.one_hot(logits.argmax(dim=-1), logits.shape[-1]).to(logits.dtype)
    return torch.softmax(logits / tau, dim=-1)


class GumbelRouter(nn.Module):
    """Tokens choose among learnable cluster embeddings by Gumbel-softmax; block-local so memory stays linear.

    The sequence is cut into blocks of ``block`` tokens; inside each block every token scores the same
    ``num_clusters`` learnable embeddings, ``logits = norm(x) . E^T / sqrt(D)``, and gets an assignment row
    ``A`` (sums to 1 for real tokens, 0 for PAD). Representatives are assignment-weighted means of the real
    tokens, ``r_c = sum_l A_lc x_l / sum_l A_lc``, and the broadcast sends ``sum_c A_lc r_c`` back to token
    ``l``. With ``block = seq_len`` the routing is global over ``num_clusters`` clusters; a smaller block
    keeps the score tensor at ``B * L * num_clusters`` floats (linear in L) with the same parameters, and the
    cluster set is ``L / block * num_clusters`` (each block's instances of the shared prototypes).

    Args:
        dim: model width D.
        num_clusters: C, clusters per block.
        block: tokens per routing block; ``L`` must be a multiple (the caller pads).
        hard: one-hot assignments (straight-through in training, argmax in eval).
        norm: a module applied to tokens before scoring (LayerNorm under pre-LN, else Identity).
    """

    def __init__(self, dim: int, *, num_clusters: int, block: int, hard: bool, norm: nn.Module | None = None):
        super().__init__()
        self.num_clusters, self.block, self.hard = num_clusters, block, hard
        self.norm = norm if norm is not None else nn.Identity()
        self.cluster_emb = nn.Parameter(torch.randn(num_clusters, dim))  # unit-variance logits after 1/sqrt(D)
        self.scale = dim**-0.5

    def assignment(
        self, x: torch.Tensor, mask: torch.Tensor | None, *, tau: torch.Tensor | float = 1.0
    ) -> torch.Tensor:
        """(B, nb, Lb, C) assignment rows, zero on PAD tokens."""
        B, L, D = x.shape
        if L % self.block:
            raise ValueError(f"length {L} is not a multiple of the routing block {self.block}; pad the input")
        nb = L // self.block
        xb = self.norm(x).view(B, nb, self.block, D)  # (B, nb, Lb, D)
        # logits: b batch, n block, l token in block, d model dim, c cluster
        logits = torch.einsum("bnld,cd->bnlc", xb, self.cluster_emb).float() * self.scale  # (B, nb, Lb, C)
        assign = gumbel_assign(logits, tau=tau, hard=self.hard, sample=self.training)  # (B, nb, Lb, C)
        if mask is not None:
            assign = assign * mask.view(B, nb, self.block, 1)  # PAD tokens join no cluster
        return assign

    def pool(self, x: torch.Tensor, mask: torch.Tensor | None, *, tau: torch.Tensor | float = 1.0):
        B, L, D = x.shape
        assign = self.assignment(x, mask, tau=tau)  # (B, nb, Lb, C)
        nb = assign.shape[1]
        mass = assign.sum(dim=2)  # (B, nb, C)
        total = torch.einsum("bnlc,bnld->bncd", assign.to(x.dtype), x.view(B, nb, self.block, D))  # (B, nb, C, D)
        safe = torch.where(mass > 0, mass, torch.ones_like(mass))  # empty clusters: 0 / 1 = 0, no NaN gradient
        reps = (total / safe[..., None].to(total.dtype)).reshape(B, nb * self.num_clusters, D)  # (B, nb*C, D)
        key_mask = (mass > 0).reshape(B, nb * self.num_clusters)  # (B, nb*C)
        return reps, key_mask, assign

    def broadcast(self, reps: torch.Tensor, assign: torch.Tensor) -> torch.Tensor:
        B, nb, Lb, C = assign.shape
        r = reps.view(B, nb, C, reps.shape[-1])  # (B, nb, C, D)
        out = torch.einsum("bnlc,bncd->bnld", assign.to(reps.dtype), r)  # (B, nb, Lb, D)
        return out.reshape(B, nb * Lb, -1)  # (B, L, D)


def lcm(*values: int) -> int:
    out = 1
    for v in values:
        out = out * v // math.gcd(out, v)
    return out
