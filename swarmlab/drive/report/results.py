"""Our runs as the ledger reads them: one ``RunResult`` per (task, model, seed), from ``reports/train/<task>/`` and
``reports/evaluate/<task>/`` in either layout.

The metrics files are keyed by run name (``<model>-seed<k>``) with ``model`` and ``seed`` in each entry; files written
before seeds existed are keyed by model name with neither: such an entry is read as model = key, seed = the params'
``seed``. Per-item test scores come from ``reports/evaluate/<task>/items/<run>.npz``; a run that saved none (written
before items existed) gets, for accuracies only, its items rebuilt from the accuracy and the number of test rows
(``reconstructed``): exact for a single run's interval, but not pairable with another run's.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from swarmlab.errors import SwarmlabError
from swarmlab.drive.report.provenance import Provenance, provenance
from swarmlab.drive.report.testsplit import ITEMS, read_items

COUNTED = ("accuracy", "matched_accuracy")  # item scores that are 0/1 per test item


@dataclasses.dataclass
class RunResult:
    task: str
    run: str
    model: str
    seed: int
    test: dict  # the evaluate entry (test_* metrics, speed, memory, git_commit)
    train: dict  # the train entry (val_*, steps, train_time_s, ...)
    items: dict | None  # per-item test scores
    reconstructed: bool  # items rebuilt from counts (legacy run)
    provenance: Provenance  # of the numbers: the evaluation's commit (the training's where none was evaluated)
    train_provenance: Provenance = Provenance(None, None, None, "")  # the training's (recorded since 2026-11-25)

    def value(self, metric: str):
        """``metric`` as recorded: the evaluate entry's, else the train entry's."""
        for source in (self.test, self.train):
            v = source.get(metric)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                return float(v)
        return None


def mean_of(runs: list[RunResult], metric: str) -> float | None:
    """The mean of ``metric`` over the runs that recorded it (seeds of one model), or None when none did."""
    values = [v for v in (r.value(metric) for r in runs) if v is not None]
    return sum(values) / len(values) if values else None


def read_metrics(path: Path, stage: str, task: str) -> dict:
    """A task's ``metrics.json`` written by ``stage`` (``train`` or ``evaluate``): ``{}`` when the stage has not run
    for the task (no folder), else its object. Garbage (not JSON, not an object) or a file deleted from its stage's
    folder is a one-line error naming the file and the stage that writes it: read as "no results", it would make a
    summary or a report that silently drops the task."""
    path = Path(path)
    rerun = f"rerun `dvc repro {stage}@{task}` (or python -m pipelines.{stage} --task {task})"
    if not path.is_file():
        if path.parent.is_dir():
            raise SwarmlabError(f"{path} is missing from its folder: the {stage} stage writes it: {rerun}")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SwarmlabError(f"{path} is not text (not UTF-8 JSON): the {stage} stage writes it: {rerun}") from None
    except ValueError as exc:
        raise SwarmlabError(
            f"{path} is not JSON ({exc.msg}, line {exc.lineno}): the {stage} stage writes it: {rerun}"
        ) from None
    if not isinstance(data, dict):
        raise SwarmlabError(f"{path} holds a JSON {type(data).__name__}, not the {stage} stage's object: {rerun}")
    return data


def _split(key: str, entry: dict, default_seed: int) -> tuple[str, int]:
    if "model" in entry and "seed" in entry:
        return str(entry["model"]), int(entry["seed"])
    return key, default_seed  # the layout before seeds: keyed by model


def read_task(reports: Path, task: str, default_seed: int = 0) -> list[RunResult]:
    """Every run of ``task`` that has an evaluate or a train entry, ordered by model then seed."""
    reports = Path(reports)
    ev_dir, tr_dir = reports / "evaluate" / task, reports / "train" / task
    evaluate = read_metrics(ev_dir / "metrics.json", "evaluate", task)
    train = read_metrics(tr_dir / "metrics.json", "train", task)
    return runs_from(task, evaluate, train, ev_dir / ITEMS, default_seed)


def runs_from(task: str, evaluate: dict, train: dict, items_dir: Path, default_seed: int = 0) -> list[RunResult]:
    """The runs of one evaluate and one train metrics mapping (a task's, or an ablation point's), items from
    ``items_dir``."""
    runs: dict[tuple[str, int], dict] = {}
    for source, data in (("test", evaluate), ("train", train)):
        for key, entry in data.items():
            if not isinstance(entry, dict):
                continue
            model, seed = _split(key, entry, default_seed)
            runs.setdefault((model, seed), {"test": {}, "train": {}})[source] = entry
    out = []
    for (model, seed), parts in sorted(runs.items()):
        run = f"{model}-seed{seed}"
        items = read_items(Path(items_dir) / f"{run}.npz")
        reconstructed = False
        if items is None:
            items = _rebuilt(parts["test"])
            reconstructed = items is not None
        out.append(
            RunResult(
                task,
                run,
                model,
                seed,
                parts["test"],
                parts["train"],
                items,
                reconstructed,
                provenance(parts["test"] or parts["train"], None),
                provenance(parts["train"], None),
            )
        )
    return out


def _rebuilt(entry: dict) -> dict | None:
    """0/1 items of a legacy run's accuracies: k ones and n - k zeros (the interval of a mean of 0/1 items depends
    only on k and n)."""
    n = entry.get("test_rows")
    if not isinstance(n, int) or n <= 0:
        return None
    items = {}
    for name in COUNTED:
        acc = entry.get(f"test_{name}")
        if isinstance(acc, (int, float)):
            k = round(acc * n)
            if abs(k - acc * n) < 1e-6 * n + 1e-9:  # a per-task mean (matched accuracy) is not a count: skip it
                items[name] = np.r_[np.ones(k), np.zeros(n - k)]
    return items or None
