"""Ablation grids as data: the points of a grid under ``ablations:`` in params.yaml, and each point's params (the
grid's ``set`` values, then the point's own, applied to the resolved params). Shared by the ``ablate`` command
(which runs them) and the report (which lists the points not run yet), so that neither imports the other."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import fnmatch
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


def _nearest(word: str, known) -> str | None:
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.5)
    return close[0] if close else None


def _refuse(where: str, dotted: str, parts: list[str], depth: int, known, what: str) -> None:
    """One line: ``dotted`` names no setting; the nearest real key replaces its part ``depth``."""
    near = _nearest(parts[depth], known)
    hint = f"; nearest real key: {'.'.join([*parts[:depth], near, *parts[depth + 1 :]])}" if near else ""
    raise SwarmlabError(f"{where}: {dotted!r} names no setting ({what}){hint}")


def _model_setting_fields(section: str) -> dict:
    """The names a task's ``train`` or ``model_overrides`` entry may take, per model: TrainConfig's engine fields, or
    each model's config fields (read from its builder, nothing built)."""
    if section == "train":
        from swarmlab.drive.run_config import ENGINE_KEYS  # the engine (torch): only a grid varying training needs it

        return {None: list(ENGINE_KEYS)}
    import models

    return {m: models.config_fields(m) for m in models.list_models()}


def check_grid_keys(params: dict, spec: dict, grid: str) -> None:
    """Every dotted path the grid sets or varies must name a real setting, before any point runs: a misspelled one
    (``t_locl``) would be written into each point's params, ignored, and every point would train the same model.

    Under ``tasks.<task>.model_overrides`` a key must be a config field of every model the grid trains (or of the
    models a per-model mapping ``...model_overrides.<model>.<field>`` matches); under ``tasks.<task>.train`` a field
    of the engine's TrainConfig; under ``tasks.<task>.options`` a field of the task's options; anywhere else a key
    params.yaml has. The error names the grid, the key and the nearest real key."""
    for section in ("vary", "set"):
        where = f"ablations.{grid}.{section}"
        for dotted in spec.get(section) or {}:
            _check_key(params, spec, where, str(dotted))


def _check_key(params: dict, spec: dict, where: str, dotted: str) -> None:
    parts = dotted.split(".")
    tasks = params.get("tasks") or {}
    if len(parts) >= 4 and parts[0] == "tasks" and parts[1] in tasks and parts[2] in (*PER_MODEL_SECTIONS, "options"):
        task_key, section = parts[1], parts[2]
        if section == "options":
            if len(parts) == 4:
                from tasks import task_class  # the task registry: only a grid varying task options needs it

                options = task_class((tasks[task_key] or {}).get("task") or task_key).Options
                known = [f.name for f in dataclasses.fields(options)] if dataclasses.is_dataclass(options) else []
                if parts[3] not in known:
                    _refuse(where, dotted, parts, 3, known, f"task {task_key!r} has no option {parts[3]!r}")
                return
        elif len(parts) in (4, 5):
            fields = _model_setting_fields(section)
            what = "training setting" if section == "train" else "config field"
            grid_models = spec.get("models") or (tasks[task_key] or {}).get("models") or []
            if len(parts) == 5:  # a per-model mapping: <model or glob>.<field>
                matched = [m for m in grid_models if fnmatch.fnmatchcase(m, parts[3])]
                if not matched:
                    _refuse(where, dotted, parts, 3, grid_models, f"{parts[3]!r} is none of the models the grid trains")
                matched = [None] if section == "train" else matched
            else:
                import models

                if any(fnmatch.fnmatchcase(m, parts[3]) for m in models.list_models()):
                    return  # a whole per-model mapping (`tasks.imdb.train.swarmformer_small: {}`)
                matched = [None] if section == "train" else [m for m in grid_models if m in fields]
            for model in matched:
                if parts[-1] not in fields[model]:
                    owner = "the engine" if model is None else f"model {model!r}"
                    _refuse(where, dotted, parts, len(parts) - 1, fields[model], f"{owner} has no {what} {parts[-1]!r}")
            return
    node = params
    for depth, part in enumerate(parts):
        if not isinstance(node, dict):
            return  # a list index or a value below a leaf: set_dotted names that one
        if part not in node:
            _refuse(where, dotted, parts, depth, node, f"params.yaml has no {'.'.join(parts[: depth + 1])!r}")
        node = node[part]


def check_points_differ(params: dict, spec: dict, grid: str, points: list[dict]) -> None:
    """A grid whose points all resolve to the same params would report a null ablation as a result: refused."""
    first, *others = [point_params(params, spec, p, grid) for p in points]
    if others and all(other == first for other in others):  # == : 2 and 2.0 are the same setting
        raise SwarmlabError(
            f"ablations.{grid}: its {len(points)} points resolve to the same params (the varied values change "
            f"nothing): vary a setting the points' runs read, or give different values"
        )


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
