"""Resolve once: at the stage boundary, params, a task key and the command line become frozen, typed specs, and
nothing below the stage reads ``params`` again.

* ``TaskSpec`` (swarmlab.drive.runs): the section's key, the registered task it runs, its options (the section's, with the
  command line's on top) and the work folder. ``build()`` makes the task, its key set at construction.
* ``RunSpec``: one model under one seed: the model's config overrides (``tasks.<key>.model_overrides`` for it),
  its engine settings (``TrainConfig``, seed included), the ``evaluate`` settings, the profile and where the run
  comes from (DVC's experiment, the overrides: ``tracking.run_context``). Its ``name`` is ``<model>-seed<k>``. The
  scheduler, training, evaluation, the dry run and ``load_best`` take it; it is logged whole to the run's MLflow run
  (``run_spec.yaml``) as the run's configuration.
* ``StageSpec``: the stage, the task, its runs in order, why the profile skips the task (or ""), the ``schedule``
  settings (with ``--parallel`` / ``--address`` on top) and the run context.
* ``SweepSpec`` (swarmlab/drive/sweep/spec.py: ``resolve_sweep``): the same for a sweep.

``resolve`` reads ``params`` through the checked sections (``swarmlab.drive.sections``, ``swarmlab.drive.run_config``) and
refuses anything wrong before a stage touches data or outputs: an unknown task or model, a model of another kind, a
setting out of bounds. What the data fixes (a model's vocabulary, its ``seq_len``) is not here: the dry run builds each
model once against the task's data (swarmlab/drive/guard.py) and hands its config on. A spec is plain data
(``to_dict`` / ``from_dict``): a Ray worker gets the same run its driver resolved.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from swarmlab.engine import TrainConfig
from swarmlab.errors import SwarmlabError
from swarmlab.paths import WORK_ROOT
from swarmlab.settings import models_twice
from swarmlab.drive.run_config import check_model_kind, evaluate_settings, model_overrides, train_config
from swarmlab.drive.runs import Run, TaskSpec, default_task, model_names, skip_reason, task_seeds, task_spec
from swarmlab.drive.schedule.scheduler import ScheduleConfig, schedule_settings
from swarmlab.drive.tuning import apply_chosen
from swarmlab.tracking import run_context
from tasks import task_class


@dataclasses.dataclass(frozen=True)
class RunSpec:
    task: TaskSpec
    model: str
    seed: int
    overrides: Mapping[str, Any]  # the model's config fields from tasks.<key>.model_overrides
    train: TrainConfig  # the engine's settings, this run's seed included
    evaluate: Mapping[str, Any]
    profile: str
    context: Mapping[str, str]  # where the run comes from (DVC's experiment, the params overrides)
    tuning: str = "pinned"  # how its settings were chosen (swarmlab/drive/tuning.py: describe)

    @property
    def run(self) -> Run:
        return Run(self.model, self.seed)

    @property
    def name(self) -> str:
        return self.run.name

    def to_dict(self) -> dict:
        return {
            "task": dataclasses.asdict(self.task),
            "model": self.model,
            "seed": self.seed,
            "overrides": dict(self.overrides),
            "train": dataclasses.asdict(self.train),
            "evaluate": dict(self.evaluate),
            "profile": self.profile,
            "context": dict(self.context),
            "tuning": self.tuning,
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunSpec:
        return cls(
            task=TaskSpec(**d["task"]),
            model=d["model"],
            seed=d["seed"],
            overrides=d["overrides"],
            train=TrainConfig(**d["train"]),
            evaluate=d["evaluate"],
            profile=d["profile"],
            context=d["context"],
            tuning=d.get("tuning", "pinned"),
        )


@dataclasses.dataclass(frozen=True)
class StageSpec:
    stage: str
    task: TaskSpec
    runs: tuple[RunSpec, ...]
    skip: str  # why the profile runs no model of the task ("" when it runs them)
    schedule: ScheduleConfig | None  # None for a stage that schedules nothing
    context: Mapping[str, str]


def resolve(
    params: dict,
    stage: str,
    task_key: str | None = None,
    *,
    models: list[str] | None = None,
    options: dict | None = None,
    root: Path = WORK_ROOT,
    tracking: bool = True,
    schedule: bool = True,
    parallel: int | None = None,
    address: str | None = None,
) -> StageSpec:
    """The stage's spec: every run of ``task_key`` (``models``: a subset), each setting checked once, here.
    ``schedule``: resolve the ``schedule`` section too (with ``parallel`` and ``address`` on top)."""
    key = default_task(params, task_key)
    task = task_spec(params, key, options=options, root=root)  # an unknown task or a bad section: one line
    params, tuning = apply_chosen(params, key, root)  # a swept task: each model's chosen settings, as its own
    skip = skip_reason(params, key)
    context = run_context(params) if tracking else {}
    names = models or ([] if skip else model_names(params, key))
    if models_twice(names, "--models"):
        raise SwarmlabError(models_twice(names, "--models"))
    kind = task_class(task.name).model_kind
    for model in names:  # an unknown model or one of another kind, before any setting of it is read
        check_model_kind(model, kind, task.name, f"tasks.{key}")
    evaluate = evaluate_settings(params, key)
    runs = tuple(
        RunSpec(
            task=task,
            model=model,
            seed=seed,
            overrides=model_overrides(params, key, model),
            train=train_config(params, key, model, seed=seed),
            evaluate=evaluate,
            profile=str(params.get("profile")),
            context=context,
            tuning=tuning.get(model, "pinned"),
        )
        for model in names
        for seed in task_seeds(params, key)
    )
    settings = schedule_settings(params, parallel=parallel, address=address) if schedule else None
    return StageSpec(stage, task, runs, skip, settings, context)
