"""Ablation grids as data: the points of a grid under ``ablations:`` in params.yaml, and each point's params (the
grid's ``set`` values, then the point's own, applied to the resolved params). Shared by the ``ablate`` command
(which runs them) and the report (which lists the points not run yet), so that neither imports the other."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import yaml

from swarmlab.errors import SwarmlabError

# a task's sections whose mapping-valued entries are one model's (or a glob's) own settings (swarmlab.drive.run_config)
PER_MODEL_SECTIONS = ("train", "model_overrides")


def grid_spec(params: dict, name: str) -> dict:
    grids = params.get("ablations") or {}
    if name not in grids:
        raise SwarmlabError(
            f"no grid {name!r} under ablations in params.yaml; grids: {', '.join(sorted(grids)) or 'none'}"
        )
    spec = dict(grids[name])
    if not spec.get("task"):
        raise SwarmlabError(f"ablations.{name}.task is empty: name the task section the grid trains")
    if spec["task"] not in (params.get("tasks") or {}):
        raise SwarmlabError(f"ablations.{name}.task: no section tasks.{spec['task']} in params.yaml")
    vary = spec.get("vary") or {}
    for key, values in vary.items():
        if not isinstance(values, list) or not values:
            raise SwarmlabError(f"ablations.{name}.vary.{key} must be a non-empty list of values")
    if not spec.get("models") and not vary:
        raise SwarmlabError(f"ablations.{name}: give `models` or `vary` (a grid needs at least two points)")
    return spec


def _value_label(value) -> str:
    return (
        json.dumps(value, separators=(",", ":"))
        if isinstance(value, (list, dict))
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )


def grid_points(params: dict, name: str) -> list[dict]:
    """The grid's points, in order: ``{point, label, model, overrides}``; ``point`` is a folder-safe name."""
    spec = grid_spec(params, name)
    models = list(spec.get("models") or []) or [None]
    vary = spec.get("vary") or {}
    keys = list(vary)
    points = []
    for model in models:
        for combo in itertools.product(*(vary[k] for k in keys)) if keys else [()]:
            overrides = dict(zip(keys, combo))
            parts = ([model] if model and len(models) > 1 else []) + [
                f"{k.rsplit('.', 1)[-1]}={_value_label(v)}" for k, v in overrides.items()
            ]
            label = ", ".join(parts) or (model or "base")
            folder = "__".join(parts) or (model or "base")
            points.append(
                {
                    "point": "".join(c if c.isalnum() or c in "=._-" else "_" for c in folder),
                    "label": label,
                    "model": model,
                    "overrides": overrides,
                }
            )
    return points


def set_dotted(params: dict, dotted: str, value, where: str) -> None:
    """``params[a][b][c] = value`` for ``dotted`` = ``a.b.c``. A value a grid sets or varies is the one its points run
    with, for every model: set in a task's ``train`` or ``model_overrides``, it also replaces the same key in that
    section's per-model mappings (``{lr: ..., hsw_small: {lr: ...}}``), which would otherwise win over it."""
    node, parts = params, dotted.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            raise SwarmlabError(f"{where}: {dotted!r} does not name a params section ({part!r} is not a mapping)")
        node = node[part]
    key = parts[-1]
    node[key] = copy.deepcopy(value)
    if len(parts) == 4 and parts[0] == "tasks" and parts[2] in PER_MODEL_SECTIONS and not isinstance(value, dict):
        for mapping in node.values():  # the section's per-model mappings: its mapping-valued entries
            if isinstance(mapping, dict):
                mapping.pop(key, None)


def point_params(params: dict, spec: dict, point: dict, grid: str) -> dict:
    out = copy.deepcopy(params)
    for dotted, value in (spec.get("set") or {}).items():  # what every point shares (a budget, a length): not in labels
        set_dotted(out, dotted, value, f"ablations.{grid}.set")
    for dotted, value in point["overrides"].items():
        set_dotted(out, dotted, value, f"ablations.{grid}.vary")
    if point["model"]:
        out["tasks"][spec["task"]]["models"] = [point["model"]]
    return out


def write_params_file(params: dict, path: Path) -> None:
    """A params.yaml whose defaults are ``params`` as resolved, under a profile of the same name with no overrides."""
    profile = params.get("profile") or "ablation"
    defaults = {k: v for k, v in params.items() if k not in ("profile", "paths", "schedule")}
    path.write_text(
        yaml.safe_dump(
            {
                "profile": profile,
                "paths": params.get("paths") or {},
                "defaults": defaults,
                "profiles": {profile: {}},
                "schedule": params.get("schedule") or {},
            },
            sort_keys=False,
        )
    )
