"""Streaming classification metrics built on a confusion matrix (rows = truth, columns = prediction)."""
from __future__ import annotations

import torch


class ConfusionMatrix:
    def __init__(self, num_classes: int, label_key: str = "label"):
        self.num_classes = num_classes
        self.label_key = label_key
        self.matrix = torch.zeros(num_classes, num_classes, dtype=torch.long)
        self.loss_sum = 0.0
        self.count = 0
        self.loss_count = 0

    def update(self, logits: torch.Tensor, batch: dict, loss: torch.Tensor | None = None) -> None:
        """Add a batch: ``logits`` (B, K), ``batch[label_key]`` (B,), ``loss`` the batch's mean loss."""
        preds = logits.detach().argmax(dim=-1).cpu()
        targets = batch[self.label_key].cpu()
        idx = targets * self.num_classes + preds
        self.matrix += torch.bincount(idx, minlength=self.num_classes**2).view(self.num_classes, self.num_classes)
        if loss is not None:  # the batch's mean loss
            self.loss_sum += float(loss) * len(targets)
            self.loss_count += len(targets)
        self.count += len(targets)

    def compute(self, positive: int = 1) -> dict:
        """Accuracy, and precision/recall/F1 of class ``positive``; loss when losses were given."""
        m = self.matrix.double()
        tp = m[positive, positive]
        precision = float(tp / m[:, positive].sum()) if m[:, positive].sum() > 0 else 0.0
        recall = float(tp / m[positive, :].sum()) if m[positive, :].sum() > 0 else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        out = {
            "accuracy": float(m.diag().sum() / m.sum()) if m.sum() > 0 else 0.0,
            "precision": precision,
            "recall": recall,
            "f1": f1,
        }
        if self.loss_count:
            out["loss"] = self.loss_sum / self.loss_count
        return out
