"""Static plots (matplotlib, Agg): DVC's HTML plots load vega from a CDN and are blank offline."""
from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def training_curve(history: list[dict], path: Path, title: str, monitor: str = "accuracy") -> Path:
    """Loss and the monitored metric, train and validation, against the optimizer step."""
    plt = pyplot()
    steps = [r["step"] for r in history]
    panels = [("loss", "loss")] + ([(monitor, monitor)] if monitor != "loss" else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.5), squeeze=False)
    for ax, (key, label) in zip(axes[0], panels):
        for split, name in (("train", "train"), ("val", "validation")):
            points = [(s, r[f"{split}_{key}"]) for s, r in zip(steps, history) if r.get(f"{split}_{key}") not in (None, "")]
            if points:
                ax.plot(*zip(*points), "o-", ms=3, label=name)
        for s, r in zip(steps, history):
            if r.get("event"):
                ax.axvline(s, color="grey", lw=0.8, ls=":")
        ax.set(xlabel="step", ylabel=label, title=label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def confusion_matrix(matrix, class_names, path: Path, title: str) -> Path:
    plt = pyplot()
    m = matrix.tolist() if hasattr(matrix, "tolist") else matrix
    k = len(m)
    side = max(4.0, 1.2 + 0.45 * k)  # 4 in for 2 classes, ~6 in for 10-11 (ListOps, arXiv-11)
    fig, ax = plt.subplots(figsize=(side, side * 0.9))
    ax.imshow(m, cmap="Blues")
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{m[i][j]}", ha="center", va="center",
                    color="white" if m[i][j] > max(map(max, m)) / 2 else "black")
    slanted = k > 2 and max(len(str(c)) for c in class_names) > 3  # e.g. arXiv-11's "math.ST"
    ax.set_xticks(range(k), class_names, rotation=45 if slanted else 0, ha="right" if slanted else "center")
    ax.set_yticks(range(k), class_names)
    ax.set(xlabel="predicted", ylabel="true", title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
