"""A sweep's spec, resolved once at its stage boundary (as swarmlab/drive/spec.py does for train, evaluate and sample).

``SweepSpec``: the sweep's task (``TaskSpec``), the checked ``sweep`` section, the spaces, the profile, and per model
a ``SweepModelSpec``: the engine settings every trial starts from and the model's config overrides. The sweep's
driver, its MLflow parent runs, its trials (through their ``TrialContext``) and its tables take it, and nothing
below pipelines/sweep.py reads ``params``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from swarmlab.paths import WORK_ROOT
from swarmlab.drive.run_config import model_overrides
from swarmlab.drive.runs import TaskSpec, default_task, task_spec
from swarmlab.drive.sweep.setup import check_settings, configured_models, sweep_model_names, trial_train_config
from tasks import task_class


@dataclasses.dataclass(frozen=True)
class SweepModelSpec:
    model: str
    train: Mapping[str, Any]  # TrainConfig keywords every trial of the model starts from (sweep's ends on top)
    overrides: Mapping[str, Any]  # the model's config fields from tasks.<key>.model_overrides


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    task: TaskSpec
    models: tuple[SweepModelSpec, ...]
    settings: Mapping[str, Any]  # the checked ``sweep`` section (swarmlab/drive/sections.py: SweepConfig)
    spaces: Mapping[str, Any]  # sweep.spaces: each model's is resolved against its built config (model_space)
    horizon: Mapping[str, Any]  # the task's trial settings (no model's own): how many evaluations a trial makes
    profile: str

    def model(self, name: str) -> SweepModelSpec:
        return next(m for m in self.models if m.model == name)


def resolve_sweep(
    params: dict,
    task_key: str | None = None,
    *,
    models: list[str] | None = None,
    options: dict | None = None,
    root: Path = WORK_ROOT,
) -> SweepSpec:
    """A sweep's spec: its task (``root`` made absolute: trials run in Ray's workers), the checked ``sweep``
    section and, for each model to sweep (``models``, else sweep.models' fitting entries, else the task's), the
    settings its trials start from. An unknown task or model, or one of another kind, is refused here."""
    key = default_task(params, task_key)
    task = task_spec(params, key, options=options, root=Path(root).resolve())
    kind = task_class(task.name).model_kind
    settings = check_settings(params)
    names = sweep_model_names(models or configured_models(params, key, kind), key, kind)
    specs = tuple(
        SweepModelSpec(name, trial_train_config(params, key, name), model_overrides(params, key, name))
        for name in names
    )
    return SweepSpec(
        task=task,
        models=specs,
        settings=settings,
        spaces=params["sweep"]["spaces"],
        horizon=trial_train_config(params, key),
        profile=str(params["profile"]),
    )
