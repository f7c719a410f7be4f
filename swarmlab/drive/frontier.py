"""Paper 003 Figure 2's points: per model family, the validation score against the parameter count, and which points are
on the family's frontier (no model of the family with at most as many parameters scores better). The frontier stage
(``pipelines/frontier.py``) writes them; the points come from the train stage's metrics and, when present, the
task's sweep summary.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import yaml

from swarmlab.errors import SwarmlabError
from swarmlab.drive.run_config import build_model, model_overrides
from swarmlab.drive.runs import report_dir

CODE_FIELDS = ("dim_hidden", "d_model", "num_inds", "n_iter", "num_layers")  # paper 003 Table 1: a-b-c-d


def arch_code(model) -> str:
    """``model.arch_code()`` when the model defines it, else the Table 1 fields its config has: ``(192-10-1)``."""
    if hasattr(model, "arch_code"):
        return model.arch_code()
    cfg = dataclasses.asdict(model.cfg)
    return "(" + "-".join(str(cfg[f]) for f in CODE_FIELDS if f in cfg) + ")"


def parse_params(text: str) -> dict:
    """``"dim_hidden=32 lr=0.0100"`` (the sweep summary's params column) -> ``{"dim_hidden": 32, "lr": 0.01}``."""
    out = {}
    for token in (text or "").split():
        key, _, value = token.partition("=")
        out[key] = yaml.safe_load(value) if value else None
    return out


def _number(value, kind: type, where: str, fix: str):
    """``value`` as a finite ``kind`` (int or float; "1.2e5" counts as an int), else one line naming ``where``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SwarmlabError(f"{where} is {value!r}, not a number: {fix}") from None
    if not math.isfinite(number) or (kind is int and (number < 0 or number != int(number))):
        raise SwarmlabError(f"{where} is {value!r}, not a finite {'count' if kind is int else 'number'}: {fix}")
    return kind(number)


def frontier_flags(points: list[dict], score: str, mode: str) -> list[bool]:
    """Per point: True when no point of its family with at most as many parameters scores better (of equal
    points, the first one listed)."""
    sign = -1.0 if mode == "max" else 1.0
    flags = [False] * len(points)
    for family in dict.fromkeys(p["family"] for p in points):
        own = sorted(
            (i for i, p in enumerate(points) if p["family"] == family),
            key=lambda i: (points[i]["num_params"], sign * points[i][score], i),
        )
        best = math.inf
        for i in own:  # by size, then by score: a point is on the frontier when it beats every smaller one
            if sign * points[i][score] < best:
                flags[i], best = True, sign * points[i][score]
    return flags


def collect_points(params: dict, task, report_root: Path) -> list[dict]:
    """The train stage's models and the sweep's finished trials of ``task`` as points (family, code, params, score)."""
    score = f"val_{task.monitor}"
    train_file = report_dir("train", task.key, report_root) / "metrics.json"
    if not train_file.is_file():
        raise SwarmlabError(f"{train_file} is missing: train the task's models first (dvc repro train@{task.key})")
    points = []
    redo = f"rerun the train stage (dvc repro train@{task.key})"
    try:
        runs = json.loads(train_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" ({exc.msg} at line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise SwarmlabError(f"{train_file} is not valid JSON{where}: {redo}") from None
    if not isinstance(runs, dict) or not all(isinstance(m, dict) for m in runs.values()):
        raise SwarmlabError(f"{train_file} is not the train stage's metrics (an object of runs): {redo}")
    for run, m in runs.items():
        if m.get(score) is None:
            continue
        name = m.get("model", run)  # one point per run: the seeds of a model are its spread
        model = build_model(name, task, model_overrides(params, task.key, name))
        points.append(
            {
                "family": name,
                "source": "train",
                "code": arch_code(model),
                "num_params": _number(m.get("num_params"), int, f"{train_file}: run {run!r}: num_params", redo),
                score: _number(m[score], float, f"{train_file}: run {run!r}: {score}", redo),
            }
        )
    sweep_file = report_dir("sweep", task.key, report_root) / "summary.csv"
    if sweep_file.is_file():
        objective = f"best_val_{task.monitor}"
        again = f"rerun the sweep (dvc repro sweep@{task.key}) or delete {sweep_file}"
        for line, row in enumerate(csv.DictReader(sweep_file.open()), start=2):
            if row.get("status") != "ok" or not row.get(objective):
                continue
            name = row["model"]
            base = model_overrides(params, task.key, name)
            probe = build_model(name, task, base)
            fields = {f.name for f in dataclasses.fields(probe.cfg)}
            values = {k: v for k, v in parse_params(row.get("params", "")).items() if k in fields}
            model = build_model(name, task, {**{k: v for k, v in base.items() if k in fields}, **values})
            n = (
                _number(row["num_params"], int, f"{sweep_file}:{line}: num_params", again)
                if row.get("num_params")
                else model.get_num_params()
            )
            points.append(
                {
                    "family": name,
                    "source": f"sweep {row.get('trial', '')}".strip(),
                    "code": arch_code(model),
                    "num_params": n,
                    score: _number(row[objective], float, f"{sweep_file}:{line}: {objective}", again),
                }
            )
    if not points:
        raise SwarmlabError(f"{train_file} holds no model with a {score}: nothing to plot")
    return points


def best_per_family(points: list[dict], score: str, mode: str) -> dict[str, dict]:
    """Each family's best point (code, parameters, score, where it came from, how many points it has), best first."""
    pick = max if mode == "max" else min
    best = {}
    for family in dict.fromkeys(p["family"] for p in points):
        own = [p for p in points if p["family"] == family]
        b = pick(own, key=lambda p: p[score])
        best[family] = {
            "code": b["code"],
            "num_params": b["num_params"],
            score: b[score],
            "source": b["source"],
            "points": len(own),
        }
    return dict(sorted(best.items(), key=lambda kv: kv[1][score], reverse=mode == "max"))
