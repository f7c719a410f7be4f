from __future__ import annotations

import random

import numpy as np
import torch


def set_seeds(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) from one integer."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A generator whose stream depends only on (seed, epoch): a resumed run shuffles like an uninterrupted one."""
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)
