"""Every figure the project draws (matplotlib on the Agg backend), in one module that only draws: its callers hand it
plain numbers and arrays, so it imports nothing of ``models`` or ``tasks``. Static PNGs, because DVC's HTML plots
load vega from a CDN and are blank offline.

* a run's figures, written by the tasks and the engine: ``training_curve``, ``confusion_matrix``, ``image_grid``
  (``tile``), ``class_scores``, ``clustering_example`` and ``mog_example`` (paper 003's Figure 4 and §4.2);
* the report's: ``training_curves``, ``metric_vs_params``, ``ablation_plot``, ``comparison_chart``. These are
  byte-for-byte reproducible: PNGs carry no Software/date metadata (``save``), inputs are drawn in a fixed order,
  and no figure depends on anything but its arguments;
* the frontier and memory-scaling stages': ``frontier_plot``, ``memory_scaling``. They keep their own format (110 dpi,
  matplotlib's default metadata), as do a run's figures, so that committed PNGs stay as they are.

matplotlib is imported by ``pyplot()`` on a figure's first call, not at module top: it costs about half a second,
and most importers (every stage that trains) draw nothing on most calls.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

DPI = 100  # the report's figures
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib  # matplotlib: heavy, loaded by a figure's first call

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib: heavy, loaded by a figure's first call

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


def _ellipse(ax, mean, cov, color, **kwargs) -> None:
    """The 2-sigma ellipse of a 2-D Gaussian."""
    from matplotlib.patches import Ellipse  # with pyplot(): matplotlib is loaded only by a figure's first call

    values, vectors = np.linalg.eigh(np.asarray(cov, np.float64))
    angle = np.degrees(np.arctan2(vectors[1, 1], vectors[0, 1]))
    width, height = 2 * 2 * np.sqrt(np.maximum(values[::-1], 0))
    ax.add_patch(Ellipse(mean, width, height, angle=angle, fill=False, color=color, **kwargs))


def clustering_example(x, labels, probs, means, covs, path: Path, title: str = "", *, match) -> Path:
    """Paper 003 Figure 4: one task's truth (with the generating covariance ellipses) beside the predicted
    assignment; predicted slots take the colour of the true cluster they are matched to (count-maximising
    matching; slots matched to no cluster get the spare colours); the grey halo under each point is the entropy
    of its slot distribution (darker = less sure; Figure 4 shades the whole plane, which needs the model).

    ``x`` (N, 2) points, ``labels`` (N,) their true clusters, ``probs`` (N, S) the predicted slot distributions,
    ``means`` (k, 2) and ``covs`` (k, 2, 2) the k generating Gaussians: numpy arrays. ``match``: the task's matching
    of one (cluster, slot) count table, (rows, cols) (``tasks.set_losses.best_matching``, as its metric uses)."""
    plt = pyplot()
    pred = probs.argmax(axis=1)
    k = len(means)
    S = probs.shape[1]
    table = np.zeros((S, S), np.int64)
    np.add.at(table, (labels, pred), 1)
    rows, cols = match(table)
    colour_of_slot = np.empty(S, np.int64)
    colour_of_slot[cols] = rows  # slot -> the true cluster it is matched to (indices >= k: spare colours)
    accuracy = table[rows, cols].sum() / max(len(labels), 1)
    entropy = -(probs * np.log(np.clip(probs, 1e-12, None))).sum(axis=1)
    cmap = plt.get_cmap("tab10" if S <= 10 else "tab20")

    fig, axes = plt.subplots(1, 2, figsize=(10, 5), sharex=True, sharey=True)
    axes[0].scatter(x[:, 0], x[:, 1], c=[cmap(c % cmap.N) for c in labels], s=6)
    for j in range(k):
        _ellipse(axes[0], means[j], covs[j], cmap(j % cmap.N), lw=1.2)
    axes[0].set_title(f"truth: {k} clusters, {len(labels)} points")
    axes[1].scatter(x[:, 0], x[:, 1], c=entropy, cmap="Greys", s=40, alpha=0.35, vmin=0, vmax=np.log(S))
    axes[1].scatter(x[:, 0], x[:, 1], c=[cmap(colour_of_slot[s] % cmap.N) for s in pred], s=6)
    axes[1].set_title(f"prediction: {len(set(pred.tolist()))} slots used, matched accuracy {accuracy:.3f}")
    for ax in axes:
        ax.set_aspect("equal")
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def mog_example(x, true, predicted, logliks, path: Path, title: str = "") -> Path:
    """One §4.2 task: its points with the true components (dashed) and the predicted ones (solid), 2-sigma.

    ``x`` (N, 2) points; ``true`` and ``predicted`` each the (pi, mu, sigma) of a diagonal mixture, numpy arrays of
    shapes (K,), (K, 2), (K, 2); ``logliks`` the task's mean log-likelihood under each, in that order."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    ax.scatter(x[:, 0], x[:, 1], s=4, c="k", alpha=0.5)
    for (pi, mu, sigma), style in ((true, "--"), (predicted, "-")):
        for j in range(len(pi)):
            _ellipse(ax, mu[j], np.diag(sigma[j] ** 2), f"C{j}", ls=style, lw=1.0 + 2.0 * pi[j])
    ax.set_title(
        f"{title + ': ' if title else ''}log-lik {logliks[1]:.3f} (oracle {logliks[0]:.3f})\n"
        f"dashed = true components, solid = predicted (2 sigma)",
        fontsize=9,
    )
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------- the report's figures


def save(fig, path: Path) -> Path:
    """Write ``fig`` as a PNG without the metadata that would make two renders differ, and close it."""
    plt = pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return path


def _number(value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def training_curves(histories: dict[str, list[dict]], monitor: str, title: str, path: Path) -> Path:
    """Per model: train (dashed) and validation (solid) loss, and the validation ``monitor``, against the step
    (the epoch when a history has no step column)."""
    plt = pyplot()
    panels = ["loss"] + ([monitor] if monitor != "loss" else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], panels):
        xlabel = "step"
        for i, (model, rows) in enumerate(sorted(histories.items())):
            x_key = "step" if rows and "step" in rows[0] else "epoch"
            xlabel = x_key if i == 0 else xlabel
            color = COLORS[i % len(COLORS)]
            for split, style in (("train", "--"), ("val", "-")):
                pts = [(_number(r.get(x_key)), _number(r.get(f"{split}_{metric}"))) for r in rows]
                pts = [(x, y) for x, y in pts if x is not None and y is not None]
                if pts and not (split == "train" and metric != "loss"):
                    ax.plot(*zip(*pts), style, marker="o", ms=3, color=color, label=f"{model} ({split})")
        ax.set(
            xlabel=xlabel,
            ylabel=metric,
            title=f"{metric} (train dashed, validation solid)" if metric == "loss" else f"validation {metric}",
        )
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return save(fig, path)


def metric_vs_params(
    ours: list[tuple[str, float, float]],
    papers: list[tuple[str, float, float]],
    metric: str,
    lower_is_better: bool,
    title: str,
    path: Path,
) -> Path:
    """Our models (dots, frontier dashed) and the papers' (crosses) as ``metric`` against parameter count."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, n, v in sorted(ours):
        ax.scatter([n], [v], color=COLORS[0], zorder=3)
        ax.annotate(label, (n, v), fontsize=7, xytext=(4, 3), textcoords="offset points")
    frontier, best = [], None
    for _label, n, v in sorted(ours, key=lambda t: (t[1], t[2])):
        if best is None or (v < best if lower_is_better else v > best):
            frontier.append((n, v))
            best = v
    if len(frontier) > 1:
        ax.plot(*zip(*frontier), "--", color=COLORS[0], alpha=0.6, label="our frontier")
    for label, n, v in sorted(papers):
        ax.scatter([n], [v], marker="x", color=COLORS[1], zorder=3)
        ax.annotate(label, (n, v), fontsize=7, color=COLORS[1], xytext=(4, -9), textcoords="offset points")
    if ours:
        ax.scatter([], [], color=COLORS[0], label="ours")
    if papers:
        ax.scatter([], [], marker="x", color=COLORS[1], label="papers")
    ax.set_xscale("log")
    ax.set(xlabel="parameters", ylabel=metric, title=title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path)


def ablation_plot(
    labels: list[str],
    series: dict[str, list[float | None]],
    title: str,
    ylabel: str,
    path: Path,
    intervals: dict[str, list[tuple[float, float] | None]] | None = None,
) -> Path:
    """One line per series (e.g. validation and test score) over the grid's points, in the grid's order; a series
    named in ``intervals`` gets an error bar (low, high) at each point that has one."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(labels) + 2), 3.8))
    xs = list(range(len(labels)))
    for i, (name, values) in enumerate(sorted(series.items())):
        pts = [(x, v) for x, v in zip(xs, values) if v is not None]
        if pts:
            color = COLORS[i % len(COLORS)]
            ax.plot(*zip(*pts), "o-", color=color, label=name)
            bars = [
                (x, v, iv) for x, v, iv in zip(xs, values, (intervals or {}).get(name) or []) if v is not None and iv
            ]
            if bars:
                ax.errorbar(
                    [x for x, _, _ in bars],
                    [v for _, v, _ in bars],
                    yerr=[[v - iv[0] for _, v, iv in bars], [iv[1] - v for _, v, iv in bars]],
                    fmt="none",
                    ecolor=color,
                    capsize=4,
                )
    ax.set_xticks(
        xs,
        labels,
        rotation=30 if max(map(len, labels), default=0) > 8 else 0,
        ha="right" if max(map(len, labels), default=0) > 8 else "center",
        fontsize=8,
    )
    ax.set(ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path)


def comparison_chart(compared: list[tuple], xlabel: str, title: str, path: Path) -> Path:
    """Bars of compared values with their 95% intervals, each ``(label, value, low, high)`` (a ledger row's
    ``compared``; a difference: one bar against 0)."""
    plt = pyplot()
    labels = [c[0] for c in compared]
    values = [c[1] for c in compared]
    errs = [[max(0.0, c[1] - c[2]) for c in compared], [max(0.0, c[3] - c[1]) for c in compared]]
    fig, ax = plt.subplots(figsize=(6.0, 0.6 + 0.55 * len(labels)))
    ax.barh(range(len(labels)), values, xerr=errs, color=COLORS[: len(labels)], capsize=4)
    ax.set_yticks(range(len(labels)), labels)
    ax.axvline(0, color="black", lw=0.6)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=9)
    ax.invert_yaxis()
    fig.tight_layout()
    return save(fig, path)


# -------------------------------------------------------------------------------------------- the stages' own figures


def frontier_plot(points: list[dict], score: str, path: Path, title: str) -> Path:
    """Per family: every point (faint), its frontier (dashed, each labelled with its architecture code) and a tick at
    the largest model tried; validation ``score`` against parameter count (the frontier stage's figure)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    families = list(dict.fromkeys(p["family"] for p in points))
    for i, family in enumerate(families):
        color = f"C{i % 10}"
        own = sorted((p for p in points if p["family"] == family), key=lambda p: p["num_params"])
        front = [p for p in own if p["frontier"]]
        rest = [p for p in own if not p["frontier"]]
        if rest:
            ax.scatter([p["num_params"] for p in rest], [p[score] for p in rest], color=color, alpha=0.25, s=14)
        ax.plot([p["num_params"] for p in front], [p[score] for p in front], "--o", color=color, ms=5, label=family)
        ax.plot([own[-1]["num_params"]], [front[-1][score]], "|", color=color, ms=14, mew=2)  # the largest model tried
        for p in front:
            ax.annotate(
                p["code"],
                (p["num_params"], p[score]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
                color=color,
            )
    ax.set_xscale("log")
    ax.set(xlabel="parameters", ylabel=f"validation {score.removeprefix('val_')}", title=title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def memory_scaling(result: dict, path: Path) -> None:
    """Log-log memory increment and time vs N, one line per model; open markers = predicted, not run."""
    plt = pyplot()
    fig, (ax_m, ax_t) = plt.subplots(1, 2, figsize=(12, 4.8))
    timeout_s = result["config"]["timeout_s"]
    for i, label in enumerate(dict.fromkeys(p["model"] for p in result["points"])):
        pts = [p for p in result["points"] if p["model"] == label]
        color = f"C{i % 10}"
        ok = [p for p in pts if p["status"] == "ok"]
        if ok:
            ax_m.plot(
                [p["tokens"] for p in ok],
                [max(p["increment_bytes"], 1) / 1e6 for p in ok],
                "o-",
                color=color,
                label=label,
            )
            ax_t.plot([p["tokens"] for p in ok], [p["time_s"] for p in ok], "o-", color=color, label=label)
        pred = [p for p in pts if p["status"] == "over_cap"]
        if pred:
            ax_m.plot(
                [p["tokens"] for p in pred],
                [p["predicted_bytes"] / 1e6 for p in pred],
                "o:",
                mfc="none",
                color=color,
                label=f"{label} (predicted, not run)" if not ok else None,
            )
        slow = [p for p in pts if p["status"] == "timeout"]
        if slow:
            ax_t.plot([p["tokens"] for p in slow], [timeout_s] * len(slow), "x", ms=10, color=color)
    ax_m.set(
        xscale="log",
        yscale="log",
        xlabel="sequence length N (tokens)",
        ylabel="forward memory increment (MB)",
        title="peak memory of one forward minus baseline\n(open markers: predicted, not run)",
    )
    ax_t.set(
        xscale="log",
        yscale="log",
        xlabel="sequence length N (tokens)",
        ylabel="time of one forward (s)",
        title=f"time (x = timeout at {timeout_s:g} s)",
    )
    for ax in (ax_m, ax_t):
        ax.grid(alpha=0.3, which="both")
    ax_m.legend(fontsize=7)
    env = result["environment"]
    fig.suptitle(
        f"batch {result['config']['batch_size']}, {env['device']}, {env['OMP_NUM_THREADS'] or 'default'} threads, "
        f"torch {env['torch']}, {env['date_utc']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
