"""What the engine may assume of a batch and of a training source, whatever the task: a batch is a dict of tensors
whose leading size is its rows, and a source that sets ``endless`` makes a fresh batch for every step.

The task contract (``tasks.base``) builds on these; ``swarmlab.engine`` reads them from here, so the engine imports
nothing from ``tasks``.
"""

from __future__ import annotations

import torch

from swarmlab.errors import SwarmlabError


def is_endless(data) -> bool:
    """Whether ``data`` makes a fresh batch per step (``tasks.base.EndlessData``) rather than holding a finite split."""
    return bool(getattr(data, "endless", False))


def batch_len(batch: dict) -> int:
    """Rows in a batch: the leading size of its first tensor."""
    for value in batch.values():
        if torch.is_tensor(value):
            return value.shape[0]
    raise ValueError("a batch must hold at least one tensor")


def check_batch_fits(batch_size: int, train_data, item_name: str, task_key: str) -> None:
    """Refuse a batch larger than a finite training split (one line naming the setting to lower)."""
    if not is_endless(train_data) and batch_size > len(train_data):
        raise SwarmlabError(
            f"train.batch_size={batch_size} is larger than the training split "
            f"({len(train_data)} {item_name}): lower it (train or tasks.{task_key}.train)"
        )
