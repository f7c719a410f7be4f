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
            points = [
                (s, r[f"{split}_{key}"]) for s, r in zip(steps, history) if r.get(f"{split}_{key}") not in (None, "")
            ]
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
            ax.text(
                j,
                i,
                f"{m[i][j]}",
                ha="center",
                va="center",
                color="white" if m[i][j] > max(map(max, m)) / 2 else "black",
            )
    slanted = k > 2 and max(len(str(c)) for c in class_names) > 3  # e.g. arXiv-11's "math.ST"
    ax.set_xticks(range(k), class_names, rotation=45 if slanted else 0, ha="right" if slanted else "center")
    ax.set_yticks(range(k), class_names)
    ax.set(xlabel="predicted", ylabel="true", title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tile(images, pad: int = 2, fill: int = 128):
    """(R, K, C, H, W) images -> one (R*H + (R-1)*pad, K*W + (K-1)*pad[, C]) array: row r, column k holds
    image [r, k]; ``pad`` pixels of ``fill`` between them. C = 1 gives a 2-D array, C = 3 an RGB one. numpy only."""
    import numpy as np

    images = np.asarray(images)
    if images.ndim != 5:
        raise ValueError(f"tile needs (rows, columns, C, H, W) images, got shape {images.shape}")
    R, K, C, H, W = images.shape
    out = np.full((R * (H + pad) - pad, K * (W + pad) - pad, C), fill, dtype=images.dtype)
    for r in range(R):
        for k in range(K):
            top, left = r * (H + pad), k * (W + pad)
            out[top : top + H, left : left + W] = images[r, k].transpose(1, 2, 0)  # (H, W, C)
    return out[..., 0] if C == 1 else out


def image_grid(images, path: Path, title: str, row_labels=(), *, pad: int = 2) -> Path:
    """A figure of (R, K, C, H, W) uint8 images, one row per entry of ``row_labels``, 0-255 on a grey scale
    (C = 1) or as RGB (C = 3), pixels shown as they are (no interpolation)."""
    plt = pyplot()
    grid = tile(images, pad=pad)
    R, K, C, H, W = images.shape
    scale = 0.5 / 28  # inches per pixel: a 28x28 image is half an inch
    fig, ax = plt.subplots(figsize=(max(6.5, grid.shape[1] * scale + 1.6), grid.shape[0] * scale + 1.0))
    ax.imshow(grid, cmap="gray" if C == 1 else None, vmin=0, vmax=255, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([r * (H + pad) + H / 2 for r in range(R)] if row_labels else [], list(row_labels))
    ax.tick_params(length=0)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def class_scores(values, names, path: Path, title: str, ylabel: str) -> Path:
    """A bar per class (``values`` in the order of ``names``), each labelled with its value."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(names) + 1.5), 3.6))
    bars = ax.bar(range(len(names)), values, color="tab:blue")
    ax.bar_label(bars, fmt="%.3f", fontsize=7)
    ax.set_xticks(
        range(len(names)),
        names,
        rotation=30 if max(map(len, names)) > 3 else 0,
        ha="right" if max(map(len, names)) > 3 else "center",
        fontsize=8,
    )
    ax.set(ylabel=ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
