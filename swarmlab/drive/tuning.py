"""How each model's settings were chosen, and how the choice reaches the runs that decide: pinned, or by its sweep.

``tasks.<key>.tuning`` says which. ``pinned`` (the default): the models train the settings params.yaml gives them.
``sweep``: each model trains the settings its sweep chose on validation (``sweeps/dvc.yaml``, ``sweep@<key>``).

Either way the sweep stage writes ``reports/sweep/<key>/chosen.json`` (under a pinned task it searches nothing and
records the pins), and ``train@``, ``evaluate@`` and ``sample@`` declare that file as a dependency: a new sweep result
marks the final runs stale and ``dvc repro`` reruns them, with no hand in between. ``apply_chosen`` puts a swept
model's chosen values into ``tasks.<key>.train`` and ``tasks.<key>.model_overrides`` as that model's own mapping (the
per-model settings of ``swarmlab.drive.run_config``), so they are checked like any setting and reach every stage
that builds the run (``swarmlab.drive.spec.resolve``). Only the searched values are carried: the final runs keep the
task's own budget (steps, epochs, time), not the trials'.

A model whose best trial stayed within two standard errors of chance (``Task.chance``: always answering the most
frequent class) *did not learn at this budget*: nothing is chosen for it, no tie-break between trials at chance picks
a winner; it trains its pinned settings and its ``tuning`` says so. Every run records its ``tuning``
(``describe``): ``pinned``, ``sweep <id>: <n> trials of <budget>`` or the not-learned line, and the report shows it.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import math
from pathlib import Path

from swarmlab.errors import SwarmlabError
from swarmlab.io import atomic_write_text

CHOSEN = "chosen.json"
# a sweep's state (its id, models, trials), beside its Ray folders: outputs/sweep/<key>/state.json. Named here, not in
# swarmlab/drive/sweep, so that pipelines/claims.py reads it without importing the sweep's code (claims/dvc.yaml: a
# task or grid piece does not depend on the sweep's code)
SWEEP_STATE = "state.json"
TUNINGS = ("pinned", "sweep")
BUDGET_KEYS = ("max_steps", "max_epochs", "time_budget_s")  # what bounds one trial


def chosen_path(root: Path, key: str) -> Path:
    """``<root>/reports/sweep/<key>/chosen.json`` (``root``: the work folder)."""
    return Path(root) / "reports" / "sweep" / key / CHOSEN


def pinned_record(key: str, profile: str) -> dict:
    return {"task": key, "profile": profile, "tuning": "pinned", "models": {}}


def learned(score: float | None, chance: tuple[float, int] | None, mode: str) -> bool:
    """Whether a best validation ``score`` is more than two standard errors (of a proportion at chance, over the
    split's rows) beyond ``chance``; a task without a chance floor (``None``) always learned."""
    if chance is None:
        return True
    if score is None or not math.isfinite(score):
        return False
    p, rows = chance
    margin = 2 * math.sqrt(max(p * (1 - p), 1e-12) / max(rows, 1))
    return score > p + margin if mode == "max" else score < p - margin


def budget_text(budget: dict) -> str:
    parts = []
    if budget.get("max_steps"):
        parts.append(f"{budget['max_steps']} steps")
    if budget.get("max_epochs"):
        parts.append(f"{budget['max_epochs']} epochs")
    if budget.get("time_budget_s"):
        parts.append(f"{budget['time_budget_s']:g} s")
    return " or ".join(parts) or "no limit"


def sweep_record(
    *, key: str, profile: str, sweep_id: str, metric: str, mode: str, results: dict, spaces: dict, budget: dict, chance
) -> dict:
    """``chosen.json`` of a finished sweep: per model, the searched values of its best trial (split into engine
    settings and model config by its space), or ``learned: false`` when even that trial stayed at chance."""
    models = {}
    for name, res in results.items():
        best = res["best"]
        score = best[metric] if best else None
        entry = {"trials": len(res["rows"]), "score": score}
        if best is None or not learned(score, chance, mode):
            floor = f"; chance {chance[0]:.4f} over {chance[1]} rows" if chance else ""
            shown = f"{score:.4f}" if isinstance(score, (int, float)) else "none"
            entry.update(learned=False, why=f"did not learn at this budget: best {metric} {shown}{floor}")
        else:
            train, model = spaces[name].split(best["params"])
            entry.update(learned=True, train=train, model_overrides=model)
        models[name] = entry
    return {
        "task": key,
        "profile": profile,
        "tuning": "sweep",
        "sweep_id": sweep_id,
        "metric": metric,
        "mode": mode,
        "budget": {k: budget[k] for k in BUDGET_KEYS if budget.get(k)},
        "chance": list(chance) if chance else None,
        "models": models,
    }


def write_chosen(folder: Path, record: dict) -> Path:
    path = Path(folder) / CHOSEN
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def read_chosen(root: Path, key: str, profile: str) -> dict:
    """The sweep's choice for a task whose tuning is ``sweep``; one line when it is missing, damaged, another task's
    or a pinned record (the sweep has not run under this tuning)."""
    path = chosen_path(root, key)
    rerun = f"run its sweep first: dvc repro sweeps/dvc.yaml:sweep@{key}"
    if not path.is_file():
        raise SwarmlabError(f"tasks.{key}.tuning is sweep but {path} is missing: {rerun}")
    try:
        record = json.loads(path.read_text())
        models = record["models"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SwarmlabError(f"{path} is not a sweep's choice ({exc}): {rerun}") from None
    if record.get("task") != key or record.get("tuning") != "sweep" or not isinstance(models, dict):
        raise SwarmlabError(
            f"{path} holds {record.get('tuning')!r} settings of task {record.get('task')!r}, not a sweep of {key!r}: "
            f"{rerun}"
        )
    if record.get("profile") != profile:
        raise SwarmlabError(f"{path} was chosen under profile {record.get('profile')!r}, not {profile!r}: {rerun}")
    return record


def apply_chosen(params: dict, key: str, root: Path) -> tuple[dict, dict]:
    """``(params, tuning)``: ``params`` with each swept model's chosen values as its own mapping in
    ``tasks.<key>.train`` and ``tasks.<key>.model_overrides`` (on top of any it had), and per model of the task its
    ``describe`` line. A pinned task's params come back as they are."""
    section = (params.get("tasks") or {}).get(key) or {}
    mode = section.get("tuning", "pinned")
    if mode not in TUNINGS:
        raise SwarmlabError(f"tasks.{key}.tuning must be one of {', '.join(TUNINGS)}, got {mode!r}")
    models = list(section.get("models") or [])
    if mode == "pinned":
        return params, {m: "pinned" for m in models}
    record = read_chosen(root, key, str(params.get("profile")))
    out = copy.deepcopy(params)
    target = out["tasks"][key]
    tuning = {}
    for model in models:
        entry = record["models"].get(model)
        tuning[model] = describe(record, model)
        if not entry or not entry.get("learned"):
            continue
        for part in ("train", "model_overrides"):
            values = dict(entry.get(part) or {})
            if values:
                mappings = target.setdefault(part, {})
                mappings[model] = {**own_mapping(mappings, model), **values}
    return out, tuning


def own_mapping(mappings: dict, model: str) -> dict:
    """The per-model mapping ``run_config.for_model`` would apply to ``model``: its exact name's, else the first
    matching glob's (an exact mapping added for it must keep what a glob gave it)."""
    per_model = {k: v for k, v in mappings.items() if isinstance(v, dict)}
    if model in per_model:
        return dict(per_model[model])
    return dict(next((v for k, v in per_model.items() if fnmatch.fnmatchcase(model, str(k))), {}))


def describe(record: dict, model: str) -> str:
    """How ``model``'s settings were chosen, in one line, for its run records and the report's rows."""
    if record.get("tuning") != "sweep":
        return "pinned"
    entry = record["models"].get(model)
    if entry is None:
        return f"pinned (not in sweep {record.get('sweep_id')})"
    where = f"sweep {record.get('sweep_id')}: {entry['trials']} trials of {budget_text(record.get('budget') or {})}"
    if not entry.get("learned"):
        return f"{where}; {entry['why']} (pinned settings)"
    chosen = {**(entry.get("train") or {}), **(entry.get("model_overrides") or {})}
    return f"{where}, chosen on validation: " + ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(chosen.items())
    )
