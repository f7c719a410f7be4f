"""What the engine may assume of a batch and of a training source, whatever the task: a batch is a dict of tensors
whose leading size is its rows, and a source that sets ``endless`` makes a fresh batch for every step.

The task contract (``tasks.base``) builds on these; ``swarmlab.engine`` reads them from here, so the engine imports
nothing from ``tasks``.
"""

from __future__ import annotations

import torch


def is_endless(data) -> bool:
    """Whether ``data`` makes a fresh batch per step (``tasks.base.EndlessData``) rather than holding a finite split."""
    return bool(getattr(data, "endless", False))


def batch_len(batch: dict) -> int:
    """Rows in a batch: the leading size of its first tensor."""
    for value in batch.values():
        if torch.is_tensor(value):
            return value.shape[0]
    raise ValueError("a batch must hold at least one tensor")
