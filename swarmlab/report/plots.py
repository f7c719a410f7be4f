"""The report's figures (matplotlib, Agg), drawn in one place: the report stage's and the frontier stage's.

The report's are byte-for-byte reproducible: PNGs carry no Software/date metadata (``save``), inputs are drawn in a
fixed order, and no figure depends on anything but its arguments. ``frontier_plot`` keeps the frontier stage's own
format (110 dpi, matplotlib's default metadata) so that its committed PNGs stay as they are.

The tasks' own figures (confusion matrices, sample grids, per-run training curves) are in ``swarmlab.plots``, which
also owns ``pyplot()``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from swarmlab.plots import pyplot

if TYPE_CHECKING:  # a type only: the frontier stage draws here without importing the ledger (numpy, scipy)
    from swarmlab.report.ledger import Row

DPI = 100
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


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
    labels: list[str], series: dict[str, list[float | None]], title: str, ylabel: str, path: Path
) -> Path:
    """One line per series (e.g. validation and test score) over the grid's points, in the grid's order."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(labels) + 2), 3.8))
    xs = list(range(len(labels)))
    for i, (name, values) in enumerate(sorted(series.items())):
        pts = [(x, v) for x, v in zip(xs, values) if v is not None]
        if pts:
            ax.plot(*zip(*pts), "o-", color=COLORS[i % len(COLORS)], label=name)
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


def comparison_chart(row: Row, path: Path) -> Path:
    """Bars of a ledger row's compared values with their 95% intervals (a difference: one bar against 0)."""
    plt = pyplot()
    labels = [c[0] for c in row.compared]
    values = [c[1] for c in row.compared]
    errs = [[max(0.0, c[1] - c[2]) for c in row.compared], [max(0.0, c[3] - c[1]) for c in row.compared]]
    fig, ax = plt.subplots(figsize=(6.0, 0.6 + 0.55 * len(labels)))
    ax.barh(range(len(labels)), values, xerr=errs, color=COLORS[: len(labels)], capsize=4)
    ax.set_yticks(range(len(labels)), labels)
    ax.axvline(0, color="black", lw=0.6)
    ax.set_xlabel(row.claim.decided_by.get("metric", row.claim.metric))
    ax.set_title(f"{row.claim.id}: {row.verdict}", fontsize=9)
    ax.invert_yaxis()
    fig.tight_layout()
    return save(fig, path)


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
