"""What the report reads for one task key: whatever exists under ``reports/<stage>/<key>/`` (and each run's
``outputs/train/<key>/<run>/run.json``), and the side runs under ``reports/side/``. A missing file is an empty entry,
never an error: the report says what is missing."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Callable

from swarmlab.drive.report.cells import is_number
from swarmlab.drive.report.results import read_metrics

# registered task name -> (monitored metric, "min" or "max", model kind); raises when the task is not registered
TaskInfo = Callable[[str], tuple[str, str, str | None]]


def read_json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_csv(path: Path) -> list[dict]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError:
        return []
    out = []
    for row in rows:
        parsed = {}
        for k, v in row.items():
            try:
                parsed[k] = float(v) if v not in ("", None) else None
            except ValueError:
                parsed[k] = v
        out.append(parsed)
    return out


class TaskData:
    """What exists under reports/ (and outputs/) for one task key."""

    def __init__(self, key: str, params: dict, reports: Path, outputs: Path, task_info: TaskInfo):
        self.key, self.reports = key, reports
        sections = params.get("tasks") or {}
        self.section = sections.get(key)
        self.registered = (self.section or {}).get("task") or key
        self.monitor, self.mode, self.kind, self.registry_note = "loss", "min", None, ""
        try:
            self.monitor, self.mode, self.kind = task_info(self.registered)
        except Exception:
            self.registry_note = f"task `{self.registered}` is not registered on this branch"
        train_dir, eval_dir = reports / "train" / key, reports / "evaluate" / key
        train = read_metrics(train_dir / "metrics.json", "train", key)  # garbage or deleted: one line, no report
        evaluate = read_metrics(eval_dir / "metrics.json", "evaluate", key)
        self.skipped = str(
            evaluate.get("skipped") or train.get("skipped") or ""
        )  # a profile that skips the task says why
        self.train = {k: v for k, v in train.items() if isinstance(v, dict)}
        self.evaluate = {k: v for k, v in evaluate.items() if isinstance(v, dict)}
        self.histories = {p.stem: read_csv(p) for p in sorted((train_dir / "history").glob("*.csv"))}
        self.eval_plots = sorted((eval_dir / "plots").glob("*.png"))
        self.sweep = read_json(reports / "sweep" / key / "best_params.json")
        if self.sweep is not None and not self.sweep.get("models"):  # a pinned task's record: nothing was searched
            self.sweep = None
        # the data stage's summary; a task built in steps (IMDB) has one per step, reports/data/<task>/<step>/
        self.data_steps = [f.parent.name for f in sorted((reports / "data" / key).glob("*/metrics.json"))]
        self.data = read_json(reports / "data" / key / "metrics.json") or {
            step: read_json(reports / "data" / key / step / "metrics.json") for step in self.data_steps
        }
        self.samples = sorted((reports / "sample" / key).rglob("*.png"))  # <task>/<run>/samples.png
        self.sample_files = sorted(
            p.relative_to(reports / "sample" / key).as_posix()
            for p in (reports / "sample" / key).rglob("*")
            if p.is_file()
        )
        self.frontier = sorted((reports / "frontier" / key).glob("*.png"))
        self.models = sorted(set(self.train) | set(self.evaluate))  # metrics keys: run names, or models (older layout)
        self.run_files = {m: read_json(outputs / "train" / key / m / "run.json") or {} for m in self.models}
        self.train_dir, self.eval_dir = train_dir, eval_dir

    def model_of(self, key: str) -> str:
        """The registered model of a metrics key: the entry's ``model``, or the key itself (layout before seeds)."""
        entry = self.evaluate.get(key) or self.train.get(key) or {}
        return str(entry.get("model") or key)

    @property
    def present(self) -> bool:
        return bool(self.train or self.evaluate or self.sweep or self.data or self.samples or self.frontier)

    def value(self, model: str, metric: str):
        """Our ``metric`` for ``model``: the evaluation's, else the training summary's, else derived."""
        ev, tr = self.evaluate.get(model) or {}, self.train.get(model) or {}
        for source in (ev, tr):
            if is_number(source.get(metric)):
                return source[metric]
        if metric == "peak_memory_gb" and is_number(ev.get("peak_memory_mb")):
            return ev["peak_memory_mb"] / 1024
        if metric == "inference_time_s" and is_number(ev.get("throughput_samples_per_s")) and ev.get("test_rows"):
            return ev["test_rows"] / ev["throughput_samples_per_s"]
        if metric.startswith("train_"):  # the last training row of the history (e.g. paper 003's last-epoch train loss)
            rows = self.histories.get(model) or []
            if rows and is_number(rows[-1].get(metric)):
                return rows[-1][metric]
        return None


def side_dirs(reports: Path) -> list[Path]:
    """The side runs: folders under ``reports/side/``, each with a README giving its commands."""
    return sorted(p for p in (Path(reports) / "side").glob("*") if p.is_dir())


def side_metrics(folder: Path) -> list[tuple[Path, dict, dict]]:
    """(folder, train metrics, eval metrics) for every folder under a side run holding them."""
    found = []
    for d in sorted({p.parent for p in folder.rglob("*metrics*.json")}):
        tr = read_json(d / "train_metrics.json") or {}
        ev = read_json(d / "eval_metrics.json") or read_json(d / "evaluate_metrics.json") or {}  # either name
        if isinstance(tr, dict) and isinstance(ev, dict) and (tr or ev):
            found.append((d, tr, ev))
    return found
