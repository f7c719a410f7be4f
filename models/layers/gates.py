from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class GateNet(nn.Module):
    """Gate logits from a token and its candidate update: ``fc2(GELU(fc1([x; u])))`` (apply sigmoid outside).

    Args:
        dim: model width D; the input is the concatenation of two D-vectors.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.fc1 = nn.Linear(2 * dim, dim)
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(torch.cat([x, u], dim=-1))))  # (..., D)
