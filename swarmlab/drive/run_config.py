"""From params to what one run trains: its model (built from the registry with the task's overrides, and what the
data fixes), the engine's settings (the `train` section with the task's and the model's own on top) and the
`evaluate` settings; and a trained run's best model, loaded back. Above ``swarmlab.drive.runs`` (the runs and their
folders), it imports ``models`` and the engine.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import json
import typing
from pathlib import Path

import models
from swarmlab.engine import BEST, TrainConfig, load_checkpoint, load_weights
from swarmlab.errors import SwarmlabError
from swarmlab.paths import OUTPUTS_DIR
from swarmlab.drive.records import check_run
from swarmlab.drive.runs import train_dir
from swarmlab.drive.sections import EvaluateConfig, section, seed, source_of, task_section
from swarmlab.settings import check_value, parse
from swarmlab.tracking import make_tracker, run_title
from tasks import task_class

# TrainConfig fields read from the `train` section; seed and eval_batch_size come from `seed` and `evaluate`
ENGINE_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in ("seed", "eval_batch_size"))


def split_per_model(raw: dict, where: str) -> tuple[dict, dict]:
    """Split a section into its plain entries and its per-model mappings (keyed by a registered model's name or a
    glob over names); a mapping whose key names or matches no registered model is a one-line error."""
    registered = models.list_models()
    shared, per_model = {}, {}
    for key, value in raw.items():
        if not isinstance(value, dict):
            shared[key] = value
            continue
        if not any(fnmatch.fnmatchcase(m, str(key)) for m in registered):
            close = difflib.get_close_matches(str(key), registered, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise SwarmlabError(
                f"{where}.{key} is a mapping, so per-model settings, but no registered model is called "
                f"{key!r} or matches it{hint}"
            )
        per_model[key] = value
    return shared, per_model


def check_per_model_keys(per_model: dict, task_key: str, spec, where: str) -> None:
    """A per-model mapping that names or matches no model that can run on the task (a model of another kind) would
    never apply: one line. (A fitting model that a profile's shorter ``models`` list leaves out may keep the
    mapping it inherits from ``defaults``.)"""
    kind = task_class(spec.task or task_key).model_kind
    fitting = models.list_models(kind=kind)
    for key in per_model:
        if not any(fnmatch.fnmatchcase(m, str(key)) for m in fitting):
            raise SwarmlabError(
                f"{where}.{key} holds settings for {key!r}, which cannot run on this task ({kind!r} models: "
                f"{', '.join(fitting)}): remove the mapping or move it to a task of its kind"
            )


def for_model(shared: dict, per_model: dict, model: str | None) -> dict:
    """The plain entries, with ``model``'s mapping on top: the exact name wins, else the first matching pattern."""
    if model is None:
        return dict(shared)
    key = model if model in per_model else next((k for k in per_model if fnmatch.fnmatchcase(model, str(k))), None)
    return {**shared, **(dict(per_model[key]) if key is not None else {})}


def model_overrides(params: dict, task_name: str, model: str | None = None) -> dict:
    """Config fields for ``model`` from ``tasks.<task>.model_overrides``.

    Plain entries apply to every model of the task. An entry whose value is a mapping applies to one model, on top:
    its key is a registered model's name, or a glob pattern over names (``swarmformer*``); the exact name wins, else
    the first pattern that matches, as ``sweep.spaces`` picks a model's space. So models with different config
    fields share one task section: ``{dim_hidden: 8, swarm: {n_iter: 2}, set_transformer_isab: {head: pma}}``. A key
    that names or matches no registered model is a one-line error.
    """
    spec = task_section(params, task_name)
    where = f"tasks.{task_name}.model_overrides"
    shared, per_model = split_per_model(dict(spec.model_overrides), where)
    try:
        check_per_model_keys(per_model, task_name, spec, where)
    except SwarmlabError as exc:
        raise SwarmlabError(f"{exc} ({source_of(params)})") from None
    return for_model(shared, per_model, model)


def train_settings(params: dict, task_name: str, model: str | None = None) -> dict:
    """TrainConfig keywords of ``task_name``: the `train` section, then ``tasks.<task>.train`` on top; every value
    is checked where it was written (``train.lr``, ``tasks.<task>.train.lr``).

    As in ``model_overrides``, a mapping in ``tasks.<task>.train`` holds one model's (or a glob's) own settings,
    applied on top for that ``model``: ``{lr: 5e-4, hsw*: {lr: 2e-4}}``.
    """
    where_task = f"tasks.{task_name}.train"
    try:
        spec = task_section(params, task_name)
        shared, per_model = split_per_model(dict(spec.train), where_task)
        check_per_model_keys(per_model, task_name, spec, where_task)
    except SwarmlabError as exc:
        raise SwarmlabError(f"{exc} ({source_of(params)})") from None
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    hints = typing.get_type_hints(TrainConfig)
    sections = [("train", params["train"]), (where_task, shared)]
    sections += [(f"{where_task}.{key}", values) for key, values in per_model.items()]
    for where, values in sections:
        unknown = sorted(set(values) - set(ENGINE_KEYS))
        if unknown:
            raise SwarmlabError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(ENGINE_KEYS)} "
                f"({source_of(params)})"
            )
        for key, value in values.items():
            try:
                check_value(f"{where}.{key}", value, hints[key], fields[key].metadata.get("rules"))
            except SwarmlabError as exc:
                raise SwarmlabError(f"{exc} ({source_of(params)})") from None
    settings = {k: params["train"][k] for k in ENGINE_KEYS if k in params["train"]}
    settings.update(for_model(shared, per_model, model))
    settings.update(seed=seed(params), eval_batch_size=evaluate_settings(params, task_name)["batch_size"])
    return settings


def evaluate_settings(params: dict, task_name: str) -> dict:
    """The `evaluate` section with ``tasks.<task>.evaluate`` on top (e.g. a smaller batch at 4k tokens), checked as
    every setting is; its batch_size is also the validation batch of training."""
    base = dataclasses.asdict(section(params, "evaluate"))
    per_task = task_section(params, task_name).evaluate
    try:
        parse(EvaluateConfig, per_task, f"tasks.{task_name}.evaluate")
    except SwarmlabError as exc:
        raise SwarmlabError(f"{exc} ({source_of(params)})") from None
    return {**base, **per_task}


def train_config(params: dict, task_name: str, model: str | None = None, **overrides) -> TrainConfig:
    # ``overrides`` take engine fields as they are, e.g. ``seed=run.seed`` for one run of a task with several seeds
    """The engine's settings for ``task_name`` (and ``model``'s own, if any); values the engine refuses become one
    line naming the section."""
    try:
        return TrainConfig(**{**train_settings(params, task_name, model), **overrides})
    except (TypeError, ValueError) as exc:
        raise SwarmlabError(f"{exc} (train / tasks.{task_name}.train)") from None


def check_model_kind(name: str, kind: str, task_name: str, where: str) -> None:
    """An unknown model, or one taking other inputs than the task's ``kind``, is a one-line error naming ``where``."""
    try:
        entry = models.model_entry(name)
    except KeyError as exc:
        raise SwarmlabError(f"{exc.args[0]} ({where}.models)") from None
    if entry.kind != kind:
        fitting = ", ".join(models.list_models(kind=kind)) or "none"
        raise SwarmlabError(
            f"model {name!r} takes {entry.kind!r} inputs but task {task_name!r} needs "
            f"{kind!r} models: {fitting} ({where}.models)"
        )


def build_model(name: str, task, overrides: dict | None = None, *, where: str = ""):
    """``models.create_model(name)`` with what the task's data fixes (vocabulary, classes, dimensions) and
    ``overrides``; an unknown model, one of another kind, or a refused config is a one-line error."""
    where = where or f"tasks.{task.key}"
    check_model_kind(name, task.model_kind, task.name, where)
    from_data = task.model_kwargs()
    clash = sorted(k for k in (overrides or {}) if k in from_data and overrides[k] != from_data[k])
    if clash:  # a 3-class head on 2-class data, say, would train without complaint
        k = clash[0]
        raise SwarmlabError(
            f"{where}.model_overrides.{k}={overrides[k]!r} contradicts the data ({k}={from_data[k]!r} from "
            f"task {task.key!r}): remove it"
        )
    try:
        return models.create_model(name, **{**from_data, **(overrides or {})})
    except (TypeError, ValueError) as exc:
        raise SwarmlabError(f"model {name!r}: {exc} ({where}.model_overrides)") from None


def load_best(task, run, train_root: Path = OUTPUTS_DIR / "train"):
    """The model of ``run`` (a ``swarmlab.drive.spec.RunSpec``) with the weights of its best checkpoint
    (``<train_root>/<task>/<run>/best.pt``), on the CPU; a missing checkpoint is a one-line error saying which stage
    to run."""
    ckpt = train_dir(task.key, run.name, train_root) / BEST
    if not ckpt.is_file():
        raise SwarmlabError(f"{ckpt} is missing: train {run.name} on {task.key} first (dvc repro train@{task.key})")
    model = build_model(run.model, task, dict(run.overrides))
    load_weights(model, load_checkpoint(ckpt), ckpt)
    # the run's own best.pt, by this run (model, seed, task, config), trained on today's data
    check_run(task, ckpt.parent, f"dvc repro train@{task.key}", run=run, model_cfg=model.cfg)
    return model


def training_run_tracker(task_key: str, run, name: str, train_root: Path, stage: str | None = None):
    """The MLflow tracker a later stage logs into for ``run`` (a RunSpec named ``name``): its training run, as its
    ``run.json`` names it, resumed (ending when it had ended: its Duration stays its training's); or a new run named as
    training names it, when the run recorded none."""
    run_file = train_dir(task_key, name, train_root) / "run.json"
    run_id = json.loads(run_file.read_text()).get("run_id") if run_file.is_file() else None
    context = {} if run_id else dict(run.context)  # names a run only when there is no train run to resume
    tags = {"profile": run.profile, "model": run.model, "run": name, "task": task_key, "seed": run.seed, **context}
    if stage:
        tags["stage"] = stage
    return make_tracker(
        True, task_key, run_title(name, run.profile, context), run_id=run_id, tags=tags, keep_end_time=True
    )
