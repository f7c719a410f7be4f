"""From params to a task's runs: the task with its options, the models it trains, its seeds, and the runs' names
and folders. The train, evaluate and sweep stages all go through here, so they mean the same thing by the same
words; the engine settings and the models themselves come from ``swarmlab.drive.run_config``. This module imports
neither ``models`` nor the engine, so the data stages do not depend on them.

params.yaml holds one section per task::

    tasks:
      imdb:
        models: [swarmformer_small]   # registered models of the task's kind
        model_overrides:              # config fields for every model of the task (a model lacking one is an error);
          d_model: 64                 # a mapping under a model's name (or a glob over names) is for that model only:
          longformer: {num_layers: 5, window_one_sided: 64}
        train: {}                     # engine settings that differ from the `train` section for this task
        evaluate: {}                  # `evaluate` settings that differ for this task (a small batch at 4k tokens...)
        options: {data_dir: data/tokenized}   # the task's own settings (its Options dataclass)
      mnist:
        task: image_generation        # a section may run a registered task of another name
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path

from swarmlab.errors import SwarmlabError
from swarmlab.io import atomic_write_text, one_writer
from swarmlab.log import get_logger
from swarmlab.paths import OUTPUTS_DIR, REPORTS_DIR, WORK_ROOT
from swarmlab.drive.sections import seed, task_section
from tasks import get_task, task_class

logger = get_logger(__name__)


def default_task(params: dict, cli_task: str | None = None) -> str:
    return cli_task or params["task"]


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A task as a stage resolved it: plain data, so a Ray worker builds the same task its driver checked.

    ``key``: the params section (it names the stage, train@<key>, the folders and the MLflow experiment); ``name``:
    the registered task it runs (a section's own name, or the one its ``task:`` names, so that one task runs on
    several datasets: ``mnist`` and ``fashion_mnist`` both run ``image_generation``); ``options``: the section's,
    with the command line's on top; ``root``: the work folder relative data paths resolve against.
    """

    key: str
    name: str
    options: dict
    root: str

    def build(self):
        return get_task(
            self.name, dict(self.options), root=Path(self.root), where=f"tasks.{self.key}.options", key=self.key
        )


def task_spec(params: dict, key: str, *, options: dict | None = None, root: Path = WORK_ROOT) -> TaskSpec:
    """The section ``tasks.<key>`` resolved: an unknown task first, with the nearest registered names, then the
    section's own checks; ``options`` replace keys of the section's."""
    sections = params.get("tasks") or {}
    registered = (sections.get(key) or {}).get("task") or key
    task_class(registered)
    section = task_section(params, key)
    return TaskSpec(key, registered, {**section.options, **(options or {})}, str(root))


def check_stage_serves(params: dict, key: str, stage: str, serves, what: str) -> None:
    """Refuse a stage that only some tasks have (``frontier@`` the set tasks, ``sample@`` the generative ones) for a
    task it does not serve, in one line naming the task and those it serves. ``serves(task_class) -> bool`` reads
    the task's registered class (its ``model_kind``, the methods it implements), so a new task of the right kind is
    served without a list to edit; ``what`` says in words which tasks that is."""
    sections = params.get("tasks") or {}
    fits = {k: serves(task_class((v or {}).get("task") or k)) for k, v in sections.items()}
    if key not in sections:
        task_spec(params, key)  # an unknown section: its own one line
    if not fits[key]:
        served = ", ".join(k for k, ok in fits.items() if ok) or "none in params.yaml"
        raise SwarmlabError(
            f"{stage}@{key}: the {stage} stage serves only {what} tasks ({served}), and task {key!r} is not one: "
            f"run it with --task set to one of them"
        )


def make_task(params: dict, key: str, *, options: dict | None = None, root: Path = WORK_ROOT):
    """The task of section ``tasks.<key>`` with its options (``options`` replace keys of them), built."""
    return task_spec(params, key, options=options, root=root).build()


@dataclasses.dataclass(frozen=True)
class Run:
    """One model of a task under one seed: the unit that trains, is tested, is tracked and is scheduled.

    Its name, ``<model>-seed<k>``, names its folder (``outputs/train/<task>/<name>``), its MLflow run and its entry
    in the task's metrics files.
    """

    model: str
    seed: int

    @property
    def name(self) -> str:
        return run_name(self.model, self.seed)


def task_seeds(params: dict, task_name: str) -> list[int]:
    """``tasks.<task>.seeds``, or the top-level ``seed`` alone when the section names none."""
    return list(task_section(params, task_name).seeds or [seed(params)])


def task_runs(params: dict, task_name: str, models: list[str] | None = None) -> list[Run]:
    """Every (model, seed) run of a task, models first: ``a-seed0, a-seed1, b-seed0, b-seed1``."""
    seeds = task_seeds(params, task_name)
    return [Run(name, s) for name in (models or model_names(params, task_name)) for s in seeds]


def skip_reason(params: dict, task_name: str) -> str:
    """``tasks.<task>.skip``: why the active profile runs no model of the task ("" when it runs them)."""
    return task_section(params, task_name).skip


def write_skipped(
    stage: str, task_name: str, reason: str, *, report_root: Path, folders: tuple[Path, ...] = ()
) -> dict:
    """The result of a stage that the profile skips for ``task_name``: ``reports/<stage>/<task>/metrics.json`` says
    why, and the stage's other outputs exist (empty where they did not) so that DVC records the stage as run."""
    result = {"skipped": reason}
    for folder in folders:
        Path(folder).mkdir(parents=True, exist_ok=True)
    atomic_write_text(report_dir(stage, task_name, report_root) / "metrics.json", json.dumps(result, indent=2) + "\n")
    logger.info(f"{stage} {task_name}: skipped by this profile: {reason}")
    return result


def model_names(params: dict, task_name: str) -> list[str]:
    names = list(task_section(params, task_name).models)
    if not names:
        raise SwarmlabError(f"tasks.{task_name}.models is empty: list at least one registered model")
    return names


def run_name(model_name: str, seed: int) -> str:
    return f"{model_name}-seed{seed}"


def train_dir(task_name: str, run: str, root: Path = OUTPUTS_DIR / "train") -> Path:
    """Checkpoints of one run (``<model>-seed<k>``) of one task: ``outputs/train/<task>/<run>``."""
    return Path(root) / task_name / run


def report_dir(stage: str, task_name: str, root: Path = REPORTS_DIR) -> Path:
    """``reports/<stage>/<task>``."""
    return Path(root) / stage / task_name


def lock_dir(root: Path = WORK_ROOT) -> Path:
    """Where the stages' locks of the work folder ``root`` live: outside it (the system's temporary folder, one
    sub-folder per work folder), so that taking a lock writes nothing into a work folder a refused stage must leave
    as it was. ``flock`` holds between processes of one machine (not across machines sharing a network folder)."""
    digest = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"swarmlab-locks-{os.getuid()}" / digest


def task_writer(params: dict, cli_task: str | None, stage: str):
    """The lock a stage holds while it writes a task's outputs (``lock_dir()/<stage>-<task>.lock``): a second
    ``<stage>@<task>`` on the same work folder is refused in one line (``swarmlab.io.one_writer``)."""
    key = default_task(params, cli_task)
    task_spec(params, key)  # an unknown task is its own one line (with the nearest names), before any lock is made
    return one_writer(lock_dir(), f"{stage}-{key}", f"{stage}@{key}")
