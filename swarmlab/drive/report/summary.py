"""The one file DVC's own views show: ``reports/summary.json``, one headline per task and model.

``dvc metrics show`` and ``dvc exp show`` print every leaf of every ``metrics:`` file as a column. The per-task metrics
files (``reports/train/<task>/metrics.json``, ``reports/evaluate/<task>/metrics.json``) hold every run's every number
(a thousand leaves), so dvc.yaml declares them as plain outputs and this file as the pipeline's only metrics::

    {"imdb": {"swarmformer_small": {"test_accuracy": 0.7976, "lo": 0.7926, "hi": 0.8025, "seeds": 1,
                                    "train_time_s": 1880.5}}, ...}

per task, per model: the task's headline test metric (``test_<monitor>``, the metric that selected the checkpoint)
as the mean over the model's seeds, its 95% interval (a t-interval across seeds when there are several, else a
percentile bootstrap over the run's test items, as the claims ledger computes them; absent when neither is
possible), the number of seeds, and the mean net training time (``train_time_s``, seconds, without validation and
checkpoints). Five columns per model. ``render`` prints it as a table short enough for one screen.

DVC prints one row per metrics file, so that file is one row of every task's and model's columns (about 1,500
characters). ``write_rows`` also writes each headline as a file of its own, ``reports/summary/<task>/<model>.json``,
with the same six keys in each (``metric``, ``value``, ``lo``, ``hi``, ``seeds``, ``train_time_s``): a plain output,
not a ``metrics:`` file (``dvc exp show`` would name every column ``<file>:<key>``, the rule for keys files share), which
``dvc metrics show reports/summary`` prints as one row per task and model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from swarmlab.drive.report.results import read_task
from swarmlab.drive.report.stats import across_seeds, bootstrap
from swarmlab.io import atomic_dir, atomic_write_text


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _interval(runs, metric: str, values: list[float]):
    """(lo, hi) of the headline over ``runs``, or None when no test can give one."""
    if len(values) >= 2:
        iv = across_seeds(values)
        return iv.lo, iv.hi
    items = runs[0].items
    if items is None:
        return None
    try:
        iv = bootstrap(items, metric.removeprefix("test_"))
    except (KeyError, ValueError):  # the items cannot give this metric (a per-task mean, no predictions)
        return None
    return iv.lo, iv.hi


def summarize_task(reports: Path, task: str, monitor: str, *, default_seed: int = 0) -> dict:
    """``{model: {<test metric>: mean, lo, hi, seeds, train_time_s}}`` for the runs of ``task`` that have a finite
    headline; ``monitor`` is the task's validation metric without ``val_`` (``accuracy``, ``loss``...)."""
    metric = f"test_{monitor}"
    by_model: dict[str, list] = {}
    for run in read_task(reports, task, default_seed):
        if run.value(metric) is not None:
            by_model.setdefault(run.model, []).append(run)
    out = {}
    for model, runs in sorted(by_model.items()):
        values = [run.value(metric) for run in runs]
        entry = {metric: round(_mean(values), 6)}
        bounds = _interval(runs, metric, values)
        if bounds is not None and all(math.isfinite(b) for b in bounds):
            entry["lo"], entry["hi"] = round(bounds[0], 6), round(bounds[1], 6)
        entry["seeds"] = len(runs)
        times = [run.value("train_time_s") for run in runs if run.value("train_time_s") is not None]
        if times:
            entry["train_time_s"] = round(_mean(times), 1)
        out[model] = entry
    return out


def summarize(reports: Path, monitors: dict[str, str], *, default_seed: int = 0) -> dict:
    """``{task: summarize_task(...)}`` for every task of ``monitors`` (task key -> monitor) with a headline."""
    out = {}
    for task, monitor in monitors.items():
        entry = summarize_task(reports, task, monitor, default_seed=default_seed)
        if entry:
            out[task] = entry
    return out


def write_summary(path: Path, summary: dict) -> None:
    atomic_write_text(Path(path), json.dumps(summary, indent=2, sort_keys=True) + "\n")


def rows(summary: dict) -> dict[str, dict]:
    """``{"<task>/<model>.json": {metric, value, lo, hi, seeds, train_time_s}}``: one row of ``summary`` per task and
    model, every row with the same keys in the same order (``lo``/``hi``/``train_time_s`` None where the summary has
    none), so that ``dvc metrics show`` puts them in the same six columns."""
    out = {}
    for task, models in summary.items():
        for model, entry in models.items():
            metric = next(k for k in entry if k.startswith("test_"))
            out[f"{task}/{model}.json"] = {
                "metric": metric,
                "value": entry[metric],
                "lo": entry.get("lo"),
                "hi": entry.get("hi"),
                "seeds": entry["seeds"],
                "train_time_s": entry.get("train_time_s"),
            }
    return out


def write_rows(folder: Path, summary: dict) -> None:
    """Replace ``folder`` whole with ``rows(summary)``, one JSON file each (a model or task gone leaves no file)."""
    with atomic_dir(Path(folder)) as tmp:
        for name, row in rows(summary).items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(json.dumps(row, indent=2) + "\n")


def render(summary: dict) -> str:
    """The summary as a plain-text table: task, model, test metric, mean [95% interval], seeds, net train time."""
    header = ("task", "model", "test metric", "mean [95% interval]", "seeds", "train s")
    rows = []
    for task, models in summary.items():
        for model, entry in models.items():
            metric = next(k for k in entry if k.startswith("test_"))
            value = f"{entry[metric]:.4f}"
            if "lo" in entry:
                value += f" [{entry['lo']:.4f}, {entry['hi']:.4f}]"
            train = entry.get("train_time_s")
            rows.append(
                (
                    task,
                    model,
                    metric.removeprefix("test_"),
                    value,
                    str(entry["seeds"]),
                    "-" if train is None else f"{train:.0f}",
                )
            )
    if not rows:
        return "no task has a test result yet (reports/evaluate/<task>/metrics.json)"
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i < 4 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)])
