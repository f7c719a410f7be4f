"""From params to a run: the task with its options, the models it trains, the engine settings, the model
itself and the run's names and folders. The train, evaluate and sweep stages all go through here, so
they mean the same thing by the same words.

params.yaml holds one section per task::

    tasks:
      imdb:
        models: [swarmformer_small]   # registered models of the task's kind
        model_overrides: {}           # config fields for every model of the task (a model lacking one is an error)
        per_model_overrides:          # optional: fields for one model (a name, or a glob pattern over names), on top
          longformer: {num_layers: 5, window_one_sided: 64}
        train: {}                     # engine settings that differ from the `train` section for this task
        evaluate: {batch_size: 32}    # optional: `evaluate` settings that differ for this task (long inputs...)
        options: {data_dir: data/tokenized}   # the task's own settings (its Options dataclass)
      mnist:
        task: image_generation        # a section may run a registered task of another name
"""
from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path

from pipelines.common.engine import TrainConfig
from pipelines.common.paths import OUTPUTS_DIR, REPORTS_DIR, WORK_ROOT
from swarmlab.errors import SwarmlabError

# TrainConfig fields read from the `train` section; seed and eval_batch_size come from `seed` and `evaluate`
ENGINE_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in ("seed", "eval_batch_size"))


def default_task(params: dict, cli_task: str | None = None) -> str:
    return cli_task or params["task"]


def task_section(params: dict, task_name: str) -> dict:
    """``tasks.<task_name>`` of the resolved params; a task without a section is a one-line error."""
    sections = params.get("tasks") or {}
    if task_name not in sections:
        from tasks import list_tasks

        known = ", ".join(sorted(sections)) or "none"
        registered = ", ".join(list_tasks())
        raise SwarmlabError(f"no section tasks.{task_name} in params.yaml (sections: {known}; registered tasks: {registered})")
    return sections[task_name]


def make_task(params: dict, key: str, *, options: dict | None = None, root: Path = WORK_ROOT):
    """The task of section ``tasks.<key>`` with its options (``options`` replace keys of them).

    A section runs the registered task of its own name, or the one its ``task:`` names, so that one task can
    run on several datasets (``mnist`` and ``fashion_mnist`` both run ``image_generation``). ``task.key`` is the
    section's name: it names the stage (train@<key>), the folders and the MLflow experiment.
    """
    from tasks import get_task, task_class

    sections = params.get("tasks") or {}
    registered = (sections.get(key) or {}).get("task") or key
    task_class(registered)  # an unknown task name first, with the nearest registered names
    section = task_section(params, key)
    task = get_task(registered, {**(section.get("options") or {}), **(options or {})}, root=root,
                    where=f"tasks.{key}.options")
    task.key = key
    return task


def model_names(params: dict, task_name: str) -> list[str]:
    names = list(task_section(params, task_name).get("models") or [])
    if not names:
        raise SwarmlabError(f"tasks.{task_name}.models is empty: list at least one registered model")
    return names


def model_overrides(params: dict, task_name: str, model_name: str | None = None) -> dict:
    """Config overrides of ``model_name`` on task ``task_name``: ``model_overrides`` (every model), then the entry
    of ``per_model_overrides`` for this model on top (see :func:`per_model_entry`); only the former without a name."""
    section = task_section(params, task_name)
    out = dict(section.get("model_overrides") or {})
    if model_name is not None:
        out.update(per_model_entry(section.get("per_model_overrides") or {}, model_name, where=f"tasks.{task_name}"))
    return out


def per_model_entry(per_model: dict, model_name: str, *, where: str) -> dict:
    """The overrides in ``per_model`` for ``model_name``: the entry named exactly so, else the first glob pattern
    (``swarmformer*``) that matches it, else none; as ``sweep.spaces`` picks a model's space.

    Every key must name a registered model or match one (a typo is a one-line error naming it), every value
    must be a mapping.
    """
    import models

    if not isinstance(per_model, dict):
        raise SwarmlabError(f"{where}.per_model_overrides must be a mapping of model name -> overrides, got {per_model!r}")
    registered = models.list_models()
    for key, value in per_model.items():
        if not any(fnmatch.fnmatchcase(m, str(key)) for m in registered):
            import difflib

            close = difflib.get_close_matches(str(key), registered, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise SwarmlabError(f"{where}.per_model_overrides: {key!r} is no registered model and matches none{hint}")
        if not isinstance(value, dict):
            raise SwarmlabError(f"{where}.per_model_overrides.{key} must be a mapping of config fields, got {value!r}")
    if model_name in per_model:
        return dict(per_model[model_name])
    key = next((k for k in per_model if fnmatch.fnmatchcase(model_name, str(k))), None)
    return dict(per_model[key]) if key is not None else {}


def train_settings(params: dict, task_name: str) -> dict:
    """TrainConfig keywords of ``task_name``: the `train` section, then ``tasks.<task>.train`` on top."""
    per_task = task_section(params, task_name).get("train") or {}
    unknown = sorted(set(per_task) - set(ENGINE_KEYS))
    if unknown:
        raise SwarmlabError(f"tasks.{task_name}.train: unknown key(s) {', '.join(map(repr, unknown))}; "
                            f"known: {', '.join(ENGINE_KEYS)}")
    settings = {k: params["train"][k] for k in ENGINE_KEYS}
    settings.update(per_task)
    settings.update(seed=params["seed"], eval_batch_size=evaluate_settings(params, task_name)["batch_size"])
    return settings


def evaluate_settings(params: dict, task_name: str) -> dict:
    """The `evaluate` section with ``tasks.<task>.evaluate`` on top (optional: e.g. a smaller batch for 4k tokens);
    its batch_size is also the validation batch of training."""
    per_task = task_section(params, task_name).get("evaluate") or {}
    base = params["evaluate"]
    unknown = sorted(set(per_task) - set(base))
    if unknown:
        raise SwarmlabError(f"tasks.{task_name}.evaluate: unknown key(s) {', '.join(map(repr, unknown))}; "
                            f"known: {', '.join(base)}")
    return {**base, **per_task}


def train_config(params: dict, task_name: str, **overrides) -> TrainConfig:
    """The engine's settings for ``task_name``; values the engine refuses become one line naming the section."""
    try:
        return TrainConfig(**{**train_settings(params, task_name), **overrides})
    except (TypeError, ValueError) as exc:
        raise SwarmlabError(f"{exc} (train / tasks.{task_name}.train)") from None


def build_model(name: str, task, overrides: dict | None = None, *, where: str = ""):
    """``models.create_model(name)`` with what the task's data fixes (vocabulary, classes, dimensions) and
    ``overrides``; an unknown model, one of another kind, or a refused config is a one-line error."""
    import models

    where = where or f"tasks.{task.key}"
    try:
        entry = models.model_entry(name)
    except KeyError as exc:
        raise SwarmlabError(f"{exc.args[0]} ({where}.models)") from None
    if entry.kind != task.model_kind:
        fitting = ", ".join(models.list_models(kind=task.model_kind)) or "none"
        raise SwarmlabError(f"model {name!r} takes {entry.kind!r} inputs but task {task.name!r} needs "
                            f"{task.model_kind!r} models: {fitting} ({where}.models)")
    try:
        return models.create_model(name, **{**task.model_kwargs(), **(overrides or {})})
    except (TypeError, ValueError) as exc:
        raise SwarmlabError(f"model {name!r}: {exc} ({where}.model_overrides / per_model_overrides)") from None


def run_name(model_name: str, seed: int) -> str:
    return f"{model_name}-seed{seed}"


def train_dir(task_name: str, model_name: str, root: Path = OUTPUTS_DIR / "train") -> Path:
    """Checkpoints of one model on one task: ``outputs/train/<task>/<model>``."""
    return Path(root) / task_name / model_name


def report_dir(stage: str, task_name: str, root: Path = REPORTS_DIR) -> Path:
    """``reports/<stage>/<task>``."""
    return Path(root) / stage / task_name
