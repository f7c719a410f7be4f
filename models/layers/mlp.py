"""The one feed-forward block of every model: ``fc2(Dropout(GELU(fc1(x))))``."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.drop import Dropout


class Mlp(nn.Module):
    """``fc2(Dropout(GELU(fc1(x))))``: Linear(D, hidden) -> GELU -> Dropout -> Linear(hidden, D).

    The FFN of the pre-LN encoder block (hidden = mlp_ratio * D), of HSW and of the Enhanced SwarmFormer,
    and the local aggregator's MLP of the reference SwarmFormer (hidden = D). ``fc1`` and ``fc2`` are
    state-dict names (and the SwarmFormer fast path reads their weights directly): keep them.

    Args:
        dim: input and output width D.
        hidden: inner width (``mlp_ratio * D`` in a transformer block; the original SwarmFormer uses D).
        dropout: dropout on the hidden activations (after GELU).
        drop: the dropout module's class: the house ``Dropout`` (``rand >= p``), or ``nn.Dropout`` where a path must
            draw the same masks as code that uses it (the SwarmFormer oracle of the authors' model).
    """

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0, *, drop: type[nn.Module] = Dropout):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.drop = drop(dropout)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(F.gelu(self.fc1(x))))  # (..., D)
