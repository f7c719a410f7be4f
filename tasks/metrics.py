"""Streaming classification metrics built on a confusion matrix (rows = truth, columns = prediction)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

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
        if self.keep_items:  # per review: correct (0/1), prediction, truth, cross-entropy
            self._keep("accuracy", preds == targets)
            self._keep("pred", preds)
            self._keep("label", targets)
            self._keep("loss", F.cross_entropy(logits.detach().float(), targets, reduction="none"))

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


def f1_scores(matrix: torch.Tensor) -> tuple[torch.Tensor, float, float, torch.Tensor]:
    """Per-class, macro and micro F1 of a (K, K) confusion matrix (rows = truth, columns = prediction).

    Standard definitions (scikit-learn's ``f1_score`` with ``zero_division=0``):

    * per class k: ``F1_k = 2 TP_k / (2 TP_k + FP_k + FN_k)``, 0 when the class is neither true nor predicted;
    * macro-F1: the unweighted mean of ``F1_k`` over the classes that occur in the truth or the predictions
      (scikit-learn's default label set: a class absent from both is not averaged in);
    * micro-F1: F1 of the pooled counts, ``2 sum TP / (2 sum TP + sum FP + sum FN)``; with one label per row
      every error is one FP and one FN, so it equals the accuracy.

    Returns ``(per_class (K,) float64, macro, micro, present (K,) bool)``.
    """
    m = matrix.double()
    tp = m.diag()
    fp = m.sum(dim=0) - tp  # predicted k, truth not k
    fn = m.sum(dim=1) - tp  # truth k, predicted not k
    denom = 2 * tp + fp + fn
    per_class = torch.where(denom > 0, 2 * tp / denom.clamp(min=1), torch.zeros_like(tp))
    present = denom > 0
    macro = float(per_class[present].mean()) if present.any() else 0.0
    pooled = 2 * tp.sum() + fp.sum() + fn.sum()
    micro = float(2 * tp.sum() / pooled) if pooled > 0 else 0.0
    return per_class, macro, micro, present


class MulticlassConfusion(ConfusionMatrix):
    """Accuracy, macro-F1 and micro-F1 (and the loss); per-class F1 and the confusion matrix as extras.

    Accumulates the same (K*K,) confusion counts on the device as :class:`ConfusionMatrix` (no host sync in
    ``update``); every score is computed from them in ``compute``. With ``positive`` set (a binary task) the
    precision, recall and F1 of that class are reported too, under :class:`ConfusionMatrix`'s keys.

    Args:
        num_classes: K.
        class_names: K names for the per-class F1 in ``extras`` (default ``"0".."K-1"``).
        positive: the class whose precision / recall / F1 to add; None = none (multi-class).
    """

    def __init__(
        self,
        num_classes: int,
        label_key: str = "label",
        *,
        class_names: tuple[str, ...] | list[str] = (),
        positive: int | None = None,
    ):
        super().__init__(num_classes, label_key, positive=0 if positive is None else positive)
        if class_names and len(class_names) != num_classes:
            raise ValueError(f"{len(class_names)} class names for {num_classes} classes")
        self.class_names = [str(c) for c in class_names] or [str(k) for k in range(num_classes)]
        self.with_positive = positive is not None

    def compute(self) -> dict:
        base = super().compute()  # accuracy, precision/recall/f1 of `positive`, loss
        _, macro, micro, _ = f1_scores(self.matrix)
        out = {"accuracy": base["accuracy"], "macro_f1": macro, "micro_f1": micro}
        if self.with_positive:
            out.update(precision=base["precision"], recall=base["recall"], f1=base["f1"])
        if "loss" in base:
            out["loss"] = base["loss"]
        return out

    def extras(self) -> dict:
        per_class, _, _, present = f1_scores(self.matrix)
        return {
            "confusion_matrix": self.matrix.tolist(),
            "class_names": self.class_names,
            "per_class_f1": {name: float(v) for name, v in zip(self.class_names, per_class)},
            "per_class_support": {name: int(n) for name, n in zip(self.class_names, self.matrix.sum(dim=1))},
        }
