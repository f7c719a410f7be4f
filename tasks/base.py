"""What every task provides to the training engine.

A task turns a batch (a dict of tensors from a dataset's ``get_batch``) into model outputs, a loss and
streaming metrics. Datasets expose ``__len__`` and ``get_batch(idx: LongTensor) -> dict``; the engine
does the shuffling and batching, so sets with masks, long documents and images plug in the same way.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from tasks.metrics import ConfusionMatrix


class Task:
    name: str = ""
    model_kind: str = "text"  # which registry entries fit: models.list_models(kind=task.model_kind)
    monitor: str = "accuracy"  # validation metric for early stopping and model selection
    mode: str = "max"  # "max" or "min"

    def forward(self, model: nn.Module, batch: dict) -> torch.Tensor:
        raise NotImplementedError

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:
        raise NotImplementedError

    def new_metrics(self):
        raise NotImplementedError

    def is_better(self, value: float, best: float | None) -> bool:
        if best is None:
            return True
        return value > best if self.mode == "max" else value < best


class TextClassificationTask(Task):
    """``model(input_ids, attention_mask) -> logits``; cross-entropy; confusion-matrix metrics."""

    num_classes: int = 2
    positive_class: int = 1

    def forward(self, model: nn.Module, batch: dict) -> torch.Tensor:
        return model(batch["input_ids"], batch["attention_mask"])  # (B, num_classes)

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:
        return F.cross_entropy(outputs.float(), batch["label"])

    def new_metrics(self) -> ConfusionMatrix:
        return ConfusionMatrix(self.num_classes)
