"""Ablation grids as data: the points of a grid under ``ablations:`` in params.yaml. Shared by the ``ablate`` command
(which runs them) and the report (which lists the points not run yet), so that neither imports the other."""

from __future__ import annotations

import itertools
import json

from swarmlab.errors import SwarmlabError


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
