"""Resolve once (issue 36): at the stage boundary, params, a task key and the command line become frozen, typed specs,
and nothing below the stage reads ``params`` again.

* ``TaskSpec``: the section's key, the registered task it runs, its options (the section's, with the command line's
  on top) and the work folder. ``build()`` makes the task, its key set at construction.
* ``RunSpec``: one model under one seed: the model's config overrides (``tasks.<key>.model_overrides`` for it),
  its engine settings (``TrainConfig``, seed included), the ``evaluate`` settings, the profile and where the run
  comes from (DVC's experiment, the overrides: ``tracking.run_context``). Its ``name`` is ``<model>-seed<k>``.
* ``StageSpec``: the stage, the task, its runs in order, why the profile skips the task (or ""), and the resolved
  params themselves, kept only to be logged whole as the run's configuration.

``resolve`` reads ``params`` through the checked sections (``swarmlab.sections``, ``swarmlab.run_config``) and
refuses anything wrong before a stage touches data or outputs, as the stages did before: an unknown task or model,
a model of another kind, a setting out of bounds. A spec is plain data (``to_dict`` / ``from_dict``): a Ray worker
gets the same run its driver resolved.

Not wired in yet: the stages still pass ``params`` down (the next step of issue 36 replaces those calls).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from swarmlab.engine import TrainConfig
from swarmlab.paths import WORK_ROOT
from swarmlab.run_config import evaluate_settings, model_overrides, train_config
from swarmlab.runs import Run, default_task, model_names, skip_reason, task_seeds
from swarmlab.sections import task_section
from swarmlab.tracking import run_context
from tasks import get_task, task_class


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    key: str  # the params section: names the stage (train@<key>), the folders and the MLflow experiment
    name: str  # the registered task it runs
    options: Mapping[str, Any]
    root: str  # the work folder its relative paths resolve against

    def build(self):
        task = get_task(self.name, dict(self.options), root=Path(self.root), where=f"tasks.{self.key}.options")
        task.key = self.key
        return task


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
        )


@dataclasses.dataclass(frozen=True)
class StageSpec:
    stage: str
    task: TaskSpec
    runs: tuple[RunSpec, ...]
    skip: str  # why the profile runs no model of the task ("" when it runs them)
    params: Mapping[str, Any] = dataclasses.field(repr=False, compare=False)  # logged whole, never read below


def resolve(
    params: dict,
    stage: str,
    task_key: str | None = None,
    *,
    models: list[str] | None = None,
    options: dict | None = None,
    root: Path = WORK_ROOT,
    tracking: bool = True,
) -> StageSpec:
    """The stage's spec: every run of ``task_key`` (``models``: a subset), each setting checked once, here."""
    key = default_task(params, task_key)
    section = task_section(params, key)  # an unknown key or a bad section: one line
    name = section.task or key
    task_class(name)  # an unknown registered task: one line, with the nearest names
    task = TaskSpec(key, name, {**section.options, **(options or {})}, str(root))
    skip = skip_reason(params, key)
    context = run_context(params) if tracking else {}
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
        )
        for model in (models or ([] if skip else model_names(params, key)))
        for seed in task_seeds(params, key)
    )
    return StageSpec(stage, task, runs, skip, params)
