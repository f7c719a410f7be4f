"""Streaming classification metrics built on a confusion matrix (rows = truth, columns = prediction)."""
from __future__ import annotations

import torch

from tasks.base import LossMeter


class ConfusionMatrix(LossMeter):
    """Accuracy, precision/recall/F1 of one class, and the loss, accumulated on the logits' device.

    ``update`` adds a batch with one ``index_add_`` into a (K*K,) counter: no host sync (``bincount``
    would read the maximum back to size its output).
    """

    def __init__(self, num_classes: int, label_key: str = "label", positive: int = 1):
        super().__init__()
        self.num_classes = num_classes
        self.label_key = label_key
        self.positive = positive
        self.counts: torch.Tensor | None = None  # (K*K,) long, created on the first batch's device

    def update(self, logits: torch.Tensor, batch: dict, loss: torch.Tensor | None = None) -> None:
        """Add a batch: ``logits`` (B, K), ``batch[label_key]`` (B,), ``loss`` the batch's mean loss."""
        super().update(logits, batch, loss)
        preds = logits.detach().argmax(dim=-1)  # (B,)
        targets = batch[self.label_key].to(preds.device)
        if self.counts is None:
            self.counts = torch.zeros(self.num_classes**2, dtype=torch.long, device=preds.device)
        self.counts.index_add_(0, targets * self.num_classes + preds, torch.ones_like(preds))

    @property
    def matrix(self) -> torch.Tensor:
        """(K, K) counts on the CPU: rows = truth, columns = prediction."""
        if self.counts is None:
            return torch.zeros(self.num_classes, self.num_classes, dtype=torch.long)
        return self.counts.view(self.num_classes, self.num_classes).cpu()

    def compute(self) -> dict:
        """Accuracy, and precision/recall/F1 of class ``positive``; loss when losses were given."""
        m = self.matrix.double()
        p = self.positive
        tp = m[p, p]
        precision = float(tp / m[:, p].sum()) if m[:, p].sum() > 0 else 0.0
        recall = float(tp / m[p, :].sum()) if m[p, :].sum() > 0 else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        out = {
            "accuracy": float(m.diag().sum() / m.sum()) if m.sum() > 0 else 0.0,
            "precision": precision,
            "recall": recall,
            "f1": f1,
        }
        out.update(super().compute())
        return out

    def extras(self) -> dict:
        return {"confusion_matrix": self.matrix.tolist()}
