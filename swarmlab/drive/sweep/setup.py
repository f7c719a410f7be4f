"""What a sweep runs: the checked ``sweep`` section, the models to sweep and their search spaces, the engine
settings every trial starts from, ASHA's horizon and the resources each trial asks of the cluster.

Everything here is checked before Ray starts. The functions that take ``params`` are the sweep's resolver's
(swarmlab/drive/sweep/spec.py: ``resolve_sweep``); the rest take its spec.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from swarmlab.errors import SwarmlabError
from swarmlab.drive.runs import model_names as task_models
from swarmlab.drive.schedule.cluster import request
from swarmlab.drive.sections import section
from swarmlab.drive.sweep.search_space import ResolvedSpace, resolve_space

if TYPE_CHECKING:
    from swarmlab.drive.sweep.spec import SweepModelSpec


def check_settings(params: dict) -> dict:
    """The checked ``sweep`` section (swarmlab/drive/sections.py: SweepConfig), as a dict."""
    return dataclasses.asdict(section(params, "sweep"))


def trial_resources(nodes: list[dict], cpus: float, gpus: float) -> dict:
    """The resources each trial asks for (``tune.with_resources``), checked against the cluster's alive ``nodes``
    by the one resource check the stages' runs use too (swarmlab/drive/schedule/cluster.py: ``request``)."""
    return request(nodes, cpus, gpus, cpus_key="sweep.cpus_per_trial", gpus_key="sweep.gpus_per_trial").tune()


def sweep_model_names(requested: list[str], key: str, kind: str) -> list[str]:
    """Registered models that fit task ``key`` (whose models take ``kind`` inputs); ``all`` expands to every one."""
    import models  # torch: loaded once models are built

    fitting = models.list_models(kind=kind)
    names = []
    for name in requested:
        if name == "all":
            names += [m for m in fitting if m not in names]
            continue
        try:
            entry = models.model_entry(name)
        except KeyError as exc:
            raise SwarmlabError(f"{exc.args[0]} (--models / sweep.models)") from None
        if entry.kind != kind:
            raise SwarmlabError(
                f"model {name!r} takes {entry.kind!r} inputs but task {key!r} needs {kind!r} models: "
                f"{', '.join(fitting)}"
            )
        if name not in names:
            names.append(name)
    if not names:
        raise SwarmlabError("no models to sweep: give --models or sweep.models")
    return names


def configured_models(params: dict, key: str, kind: str) -> list[str]:
    """The models to sweep when ``--models`` is not given: the entries of ``sweep.models`` that fit the task's kind
    (``all`` = every fitting model), or, when none does (the list names another track's models), the task's own
    ``tasks.<task>.models``. Unknown names are still errors."""
    import models  # torch: loaded once models are built

    fitting = []
    for name in params["sweep"]["models"]:
        if name != "all":
            try:
                models.model_entry(name)
            except KeyError as exc:
                raise SwarmlabError(f"{exc.args[0]} (sweep.models)") from None
        if name == "all" or models.model_entry(name).kind == kind:
            fitting.append(name)
    return fitting or task_models(params, key)


def trial_train_config(params: dict, task_name: str, model: str | None = None) -> dict:
    """TrainConfig keywords every trial (of ``model``) starts from: the task's training settings, with ``sweep.max_epochs``,
    ``sweep.max_steps`` (each when > 0) and ``sweep.time_budget_s`` in place of the training ones."""
    from swarmlab.drive.run_config import train_settings  # torch: loaded once models are built

    cfg = train_settings(params, task_name, model)
    sweep_cfg = params["sweep"]
    for key in ("max_epochs", "max_steps"):
        if sweep_cfg[key]:
            cfg[key] = sweep_cfg[key]
    cfg["time_budget_s"] = sweep_cfg["time_budget_s"]
    return cfg


def max_evaluations(train: dict) -> int:
    """ASHA's ``max_t``: the evaluations a trial makes when nothing stops it (its time unit is one evaluation)."""
    if not train["eval_every"]:
        if not train["max_epochs"]:
            raise SwarmlabError(
                "a sweep needs an end in evaluations: set sweep.max_epochs (or sweep.max_steps with the "
                "task's train.eval_every)"
            )
        return train["max_epochs"]  # one evaluation per epoch
    if not train["max_steps"]:
        raise SwarmlabError(
            f"the task validates every {train['eval_every']} steps: set sweep.max_steps so that ASHA "
            f"knows how many evaluations a trial makes"
        )
    return -(-train["max_steps"] // train["eval_every"])


def model_space(model: SweepModelSpec, task, spaces: dict) -> ResolvedSpace:
    """The checked search space of ``model`` on ``task`` (the model is built once to read its config fields)."""
    from swarmlab.engine import TrainConfig  # torch: loaded once models are built
    from swarmlab.drive.run_config import build_model

    built = build_model(model.model, task, {})
    return resolve_space(
        spaces,
        task.key,
        model.model,
        model_cfg=built.cfg,
        train_fields=frozenset(f.name for f in dataclasses.fields(TrainConfig)),
        check_train=lambda kw: TrainConfig(**{**model.train, **kw}),
        data_seq_len=task.max_seq_len(),
        model_overrides=dict(model.overrides),
    )
