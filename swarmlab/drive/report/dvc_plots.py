"""The data of the top-level `dvc plots` (dvc.yaml ``plots:``): training curves and confusion matrices in long form,
in columns every task shares, one CSV per (task, model) under ``reports/report/plots/``."""

from __future__ import annotations

import csv
import io

from swarmlab.drive.report.cells import is_number

PLOTS = "report/plots"  # relative to reports/


def curve_csv(rows: list[dict], monitor: str) -> str:
    """One model's history in the columns every task shares (the data of the top-level `dvc plots`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["step", "epoch", "train_loss", "val_loss", "val_monitored", "monitored"])
    for i, r in enumerate(rows):
        step = r.get("step") if is_number(r.get("step")) else (r.get("epoch") if is_number(r.get("epoch")) else i + 1)
        w.writerow(
            [
                _num(step),
                _num(r.get("epoch")),
                _num(r.get("train_loss")),
                _num(r.get("val_loss")),
                _num(r.get(f"val_{monitor}")),
                monitor,
            ]
        )
    return buf.getvalue()


def _num(v) -> str:
    if not is_number(v):
        return ""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def confusion_csv(matrix: list[list]) -> str:
    """The confusion matrix as one (actual, predicted) row per test item, the layout DVC's confusion template reads."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["actual", "predicted"])
    for i, row in enumerate(matrix):
        for j, count in enumerate(row):
            for _ in range(int(count)):
                w.writerow([i, j])
    return buf.getvalue()
