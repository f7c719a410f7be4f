"""Static plots (matplotlib, Agg): DVC's HTML plots load vega from a CDN and are blank offline."""
from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def training_curve(history: list[dict], path: Path, title: str, monitor: str = "accuracy") -> Path:
    plt = _plt()
    epochs = [r["epoch"] for r in history]
    fig, (ax_loss, ax_metric) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax_loss.plot(epochs, [r["train_loss"] for r in history], "o-", label="train")
    ax_loss.plot(epochs, [r["val_loss"] for r in history], "o-", label="validation")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", title="loss")
    ax_metric.plot(epochs, [r[f"train_{monitor}"] for r in history], "o-", label="train")
    ax_metric.plot(epochs, [r[f"val_{monitor}"] for r in history], "o-", label="validation")
    ax_metric.set(xlabel="epoch", ylabel=monitor, title=monitor)
    for ax in (ax_loss, ax_metric):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def confusion_matrix(matrix, class_names, path: Path, title: str) -> Path:
    plt = _plt()
    m = matrix.tolist() if hasattr(matrix, "tolist") else matrix
    k = len(m)
    fig, ax = plt.subplots(figsize=(4, 3.6))
    ax.imshow(m, cmap="Blues")
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{m[i][j]}", ha="center", va="center",
                    color="white" if m[i][j] > max(map(max, m)) / 2 else "black")
    ax.set_xticks(range(k), class_names)
    ax.set_yticks(range(k), class_names)
    ax.set(xlabel="predicted", ylabel="true", title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
