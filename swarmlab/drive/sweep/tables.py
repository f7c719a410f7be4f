"""The sweep's results: every trial of every model ranked, as ``best_params.json``, ``summary.md`` and
``summary.csv`` under ``reports/sweep/<task>/``, and the same table on the console."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from swarmlab.io import atomic_write_text
from swarmlab.log import get_logger

logger = get_logger(__name__)


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) >= 1e-2 or value == 0 else f"{value:.3g}"
    return "" if value is None else str(value)


def format_table(rows: list[dict], columns: list[str], markdown: bool = False) -> str:
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells]) + "\n"
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines) + "\n"


def rank(rows: list[dict], key: str, mode: str) -> list[dict]:
    def score(r):
        v = r.get(key)
        ok = isinstance(v, (int, float)) and math.isfinite(v)
        return (0, -v if mode == "max" else v) if ok else (1, 0)

    ranked = sorted(rows, key=score)
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    return ranked


def write_reports(report_dir: Path, *, task, profile: str, state: dict, results: dict) -> dict | None:
    """``best_params.json``, ``summary.md`` and ``summary.csv`` (every trial of every model, ranked).

    An interrupted sweep (a model with unfinished trials) writes only the summaries, its cut trials marked
    ``interrupted``, and returns None: ``best_params.json`` (a previous sweep's, if any) is left as it was."""
    from swarmlab.drive.sweep.trial import objective  # the trial module imports ray.tune: heavy, and a table needs none

    metric = objective(task.monitor)
    unfinished = sum(res.get("unfinished", 0) for res in results.values())
    per_model = {}
    for name, res in results.items():
        if res["best"] is None:  # interrupted: no best trial
            continue
        b = res["best"]
        per_model[name] = {
            "params": b["params"],
            "train": res["train"],
            "model_overrides": res["model_overrides"],
            metric: b[metric],
            "metrics": b["metrics"],
            "best_step": b["best_step"],
            "best_epoch": b["best_epoch"],
            "trial_id": b["trial"],
            "mlflow_run_id": b["mlflow_run_id"],
            "mlflow_parent_run_id": res["parent_run_id"],
            "checkpoint": b["checkpoint"],
            "trials": len(res["rows"]),
            "trials_failed": sum(r["status"] == "error" for r in res["rows"]),
        }
    model_rows = rank([{"model": n, **v} for n, v in per_model.items()], metric, task.mode)
    best_params = {
        "task": task.key,
        "profile": profile,
        "sweep_id": state["sweep_id"],
        "metric": metric,
        "mode": task.mode,
        "best_model": model_rows[0]["model"] if model_rows else None,
        "models": per_model,
    }
    trial_rows = rank([dict(r) for res in results.values() for r in res["rows"]], metric, task.mode)
    for r in trial_rows:
        r["params"] = " ".join(f"{k}={fmt(v)}" for k, v in r["params"].items())
    for r in model_rows:
        r["params"] = " ".join(f"{k}={fmt(v)}" for k, v in r["params"].items())

    model_cols = ["rank", "model", metric, "best_step", "best_epoch", "trials", "trials_failed", "params"]
    trial_cols = [
        "rank",
        "model",
        "trial",
        "status",
        metric,
        "num_params",
        "best_step",
        "best_epoch",
        "evaluations",
        "steps",
        "params",
    ]
    note = (
        f"**Interrupted**: {unfinished} trial(s) were cut before their schedule ended (status `interrupted`); "
        f"no best parameters were written. Continue with `python -m pipelines.sweep --task {task.key} --resume`.\n\n"
        if unfinished
        else ""
    )
    md = (
        f"# Sweep of {task.key} ({profile} profile, sweep {state['sweep_id']})\n\n"
        + note
        + f"Objective: {metric} ({task.mode}), the best validation score of each trial.\n\n## Models\n\n"
        + format_table(model_rows, model_cols, markdown=True)
        + "\n## Trials\n\n"
        + format_table(trial_rows, trial_cols, markdown=True)
    )
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=trial_cols + ["mlflow_run_id", "error"], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(trial_rows)
    report_dir.mkdir(parents=True, exist_ok=True)
    if not unfinished:
        atomic_write_text(report_dir / "best_params.json", json.dumps(best_params, indent=2) + "\n")
    atomic_write_text(report_dir / "summary.md", md)
    atomic_write_text(report_dir / "summary.csv", buf.getvalue())
    print("\n" + format_table(trial_rows, trial_cols), end="", flush=True)
    if unfinished:
        return None
    logger.info(
        f"best: {model_rows[0]['model']} {metric} {fmt(model_rows[0][metric])}  ->  {report_dir / 'best_params.json'}"
    )
    return best_params
