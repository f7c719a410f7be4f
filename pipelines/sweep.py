"""Stage `sweep@<task>`: hyperparameter sweeps of every model on one task with Ray Tune, compared in MLflow.

    python -m pipelines.sweep --task imdb [--models a,b | all] [--profile smoke|cpu|paper] [--num-samples N]
                              [--address RAY_ADDRESS] [--resume] [--no-tracking] [--data-dir DIR] [--out-dir DIR]

Per model, one Tune experiment in ``outputs/sweep/<task>/ray/<model>``: Optuna's TPE (seeded) proposes
configurations from the model's space in params.yaml (``sweep.spaces``), ASHA stops weak trials early,
and each trial is one training-engine ``fit`` that reports its validation metrics and a checkpoint
at every evaluation (the objective is the best validation metric; the test split is never read). A crashed trial
restarts from its last checkpoint; ``--resume`` continues an interrupted sweep without rerunning
finished trials and with the searcher's state. In MLflow (experiment ``<task>-sweep``): one parent run
``sweep-<model>`` with the best trial's params and metrics, and a nested run per trial.

Writes ``reports/sweep/<task>/best_params.json``, ``summary.md`` and ``summary.csv``.
Ray runs locally unless ``--address`` (or ``$RAY_ADDRESS``, or ``sweep.address``) names a cluster.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import shutil
import time
from pathlib import Path

from swarmlab.stage_cli import params_from, stage_parser
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_write_text
from swarmlab.schedule.cluster import absolute_tracking_uri, check_reachable, connect_ray, request, resolve_address  # noqa: F401
from swarmlab.paths import OUTPUTS_DIR, REPORTS_DIR, git_commit
from swarmlab.progress import progress_enabled
from swarmlab.sweep.search_space import ResolvedSpace, resolve_space

SWEEP_DIR = OUTPUTS_DIR / "sweep"
REPORT_DIR = REPORTS_DIR / "sweep"
STATE_FILE = "state.json"
SETTINGS = (
    "num_samples",
    "max_concurrent",
    "cpus_per_trial",
    "gpus_per_trial",
    "max_epochs",
    "time_budget_s",
    "trial_timeout_s",
    "sweep_timeout_s",
    "grace_period",
    "reduction_factor",
    "startup_trials",
    "max_failures",
    "seed",
    "max_steps",
)


# ----------------------------------------------------------------------------------------------- checks


def check_settings(params: dict) -> dict:
    """The checked ``sweep`` section (swarmlab/sections.py: SweepConfig), as a dict."""
    from swarmlab.sections import section

    return dataclasses.asdict(section(params, "sweep"))


def trial_resources(nodes: list[dict], cpus: float, gpus: float) -> dict:
    """The resources each trial asks for (``tune.with_resources``), checked against the cluster's alive ``nodes``
    by the one resource check the stages' runs use too (swarmlab/schedule/cluster.py: ``request``)."""
    return request(nodes, cpus, gpus, cpus_key="sweep.cpus_per_trial", gpus_key="sweep.gpus_per_trial").tune()


# ------------------------------------------------------------------------------------------ preparation


def model_names(requested: list[str], task) -> list[str]:
    """Registered models that fit ``task``; ``all`` expands to every one of them."""
    import models

    fitting = models.list_models(kind=task.model_kind)
    names = []
    for name in requested:
        if name == "all":
            names += [m for m in fitting if m not in names]
            continue
        try:
            entry = models.model_entry(name)
        except KeyError as exc:
            raise SwarmlabError(f"{exc.args[0]} (--models / sweep.models)") from None
        if entry.kind != task.model_kind:
            raise SwarmlabError(
                f"model {name!r} takes {entry.kind!r} inputs but task {task.key!r} ({task.name}) needs "
                f"{task.model_kind!r} models: {', '.join(fitting)}"
            )
        if name not in names:
            names.append(name)
    if not names:
        raise SwarmlabError("no models to sweep: give --models or sweep.models")
    return names


def configured_models(params: dict, task) -> list[str]:
    """The models to sweep when ``--models`` is not given: the entries of ``sweep.models`` that fit the task's kind
    (``all`` = every fitting model), or, when none does (the list names another track's models), the task's own
    ``tasks.<task>.models``. Unknown names are still errors."""
    import models

    from swarmlab.runs import model_names as task_models

    fitting = []
    for name in params["sweep"]["models"]:
        if name != "all":
            try:
                models.model_entry(name)
            except KeyError as exc:
                raise SwarmlabError(f"{exc.args[0]} (sweep.models)") from None
        if name == "all" or models.model_entry(name).kind == task.model_kind:
            fitting.append(name)
    return fitting or task_models(params, task.key)


def trial_train_config(params: dict, task_name: str, model: str | None = None) -> dict:
    """TrainConfig keywords every trial (of ``model``) starts from: the task's training settings, with ``sweep.max_epochs``,
    ``sweep.max_steps`` (each when > 0) and ``sweep.time_budget_s`` in place of the training ones."""
    from swarmlab.run_config import train_settings

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


def model_space(name: str, task, params: dict) -> ResolvedSpace:
    """The checked search space of model ``name`` (the model is built once to read its config fields)."""
    from swarmlab.engine import TrainConfig
    from swarmlab.run_config import build_model, model_overrides

    model = build_model(name, task, {})
    base_train = trial_train_config(params, task.key, name)
    return resolve_space(
        params["sweep"]["spaces"],
        task.key,
        name,
        model_cfg=model.cfg,
        train_fields=frozenset(f.name for f in dataclasses.fields(TrainConfig)),
        check_train=lambda kw: TrainConfig(**{**base_train, **kw}),
        data_seq_len=task.max_seq_len(),
        model_overrides=model_overrides(params, task.key, name),
    )


# ------------------------------------------------------------------------------------------------ tables


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) >= 1e-2 or value == 0 else f"{value:.3g}"
    return "" if value is None else str(value)


def format_table(rows: list[dict], columns: list[str], markdown: bool = False) -> str:
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells]) + "\n"
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines) + "\n"


def _rank(rows: list[dict], key: str, mode: str) -> list[dict]:
    def score(r):
        v = r.get(key)
        ok = isinstance(v, (int, float)) and math.isfinite(v)
        return (0, -v if mode == "max" else v) if ok else (1, 0)

    ranked = sorted(rows, key=score)
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    return ranked


# ------------------------------------------------------------------------------------------------ sweep


def _experiment_trials(grid) -> list:
    return list(grid._experiment_analysis.trials)  # the only place Tune exposes each trial's status


def sweep_model(
    name: str,
    space: ResolvedSpace,
    *,
    task,
    params: dict,
    ray_dir: Path,
    state: dict,
    resources: dict,
    resume: bool,
    tracking: bool,
    lines: bool,
    callbacks=(),
    num_samples: int | None = None,
) -> dict:
    """Run (or continue) the Tune experiment of one model; returns its trials and its best trial."""
    import optuna
    from ray import tune
    from ray.tune import CheckpointConfig, FailureConfig, RunConfig, TuneConfig, Tuner
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    from swarmlab.sweep.trial import TrialContext, TrialLog, objective, run_trial
    from swarmlab.tracking import MlflowTracker, NullTracker

    cfg = params["sweep"]
    metric = objective(task.monitor)
    label = f"{task.key}/{name}"
    experiment = f"{task.key}-sweep"
    uri = absolute_tracking_uri() if tracking else None
    entry = state["models"].setdefault(name, {})
    settings = {k: cfg[k] for k in SETTINGS} | ({"num_samples": num_samples} if num_samples else {})
    if tracking:  # the driver creates the experiment (artifact location beside the store) before any trial
        parent = MlflowTracker(
            experiment,
            f"sweep-{name}",
            run_id=entry.get("parent_run_id"),
            uri=uri,
            tags={
                "stage": "sweep",
                "model": name,
                "task": task.key,
                "sweep_id": state["sweep_id"],
                "profile": str(params["profile"]),
                "git_commit": git_commit(),
            },
        )
        if not entry.get("parent_run_id"):
            parent.log_params(
                {
                    "sweep": settings,
                    "space": space.describe(),
                    "space_source": space.source,
                    "task": {"name": task.name, "key": task.key, **dataclasses.asdict(task.options)},
                }
            )
    else:
        parent = NullTracker()
    entry["parent_run_id"] = parent.run_id
    atomic_write_text(ray_dir.parent / STATE_FILE, json.dumps(state, indent=2) + "\n")

    train = trial_train_config(params, task.key, name)
    max_t = max_evaluations(train)
    ctx = TrialContext(
        task=task.name,
        key=task.key,
        options=dataclasses.asdict(task.options),
        root=str(task.root),
        model=name,
        space=space,
        train=train,
        monitor=task.monitor,
        mode=task.mode,
        cpus_per_trial=cfg["cpus_per_trial"],
        sweep_id=state["sweep_id"],
        tracking_uri=uri,
        experiment=experiment,
        parent_run_id=parent.run_id,
        tags={"profile": str(params["profile"]), "git_commit": git_commit()},
    )
    trainable = tune.with_resources(tune.with_parameters(run_trial, ctx=ctx), resources)
    exp_dir = ray_dir / name
    os.environ.setdefault(
        "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0"
    )  # one checkpoint per evaluation is intended
    # Snapshot the experiment state every second (Tune's default waits >= 10 s): a trial that ended before the driver
    # died is then known as finished on --resume instead of being restored from its final checkpoint.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "1")
    if lines:  # Tune's newer console output prints banners even at verbose=0; the classic one stays quiet
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        if resume and Tuner.can_restore(str(exp_dir)):
            print(f"[{label}] resuming {exp_dir}", flush=True)
            tuner = Tuner.restore(str(exp_dir), trainable=trainable, resume_errored=True)
        else:
            shutil.rmtree(exp_dir, ignore_errors=True)
            sampler = optuna.samplers.TPESampler(seed=cfg["seed"], n_startup_trials=cfg["startup_trials"])
            tuner = Tuner(
                trainable,
                param_space=space.tune_space(),
                tune_config=TuneConfig(
                    metric=metric,
                    mode=task.mode,
                    num_samples=settings["num_samples"],
                    search_alg=OptunaSearch(sampler=sampler),
                    scheduler=ASHAScheduler(
                        time_attr="evaluation",
                        max_t=max_t,
                        grace_period=min(cfg["grace_period"], max_t),
                        reduction_factor=cfg["reduction_factor"],
                    ),
                    max_concurrent_trials=cfg["max_concurrent"] or None,
                    time_budget_s=cfg["sweep_timeout_s"] or None,
                    reuse_actors=True,
                    trial_name_creator=_trial_name,
                    trial_dirname_creator=_trial_name,
                ),
                run_config=RunConfig(
                    name=name,
                    storage_path=str(ray_dir),
                    verbose=0 if lines else 1,
                    stop={"time_total_s": cfg["trial_timeout_s"]} if cfg["trial_timeout_s"] else None,
                    failure_config=FailureConfig(max_failures=cfg["max_failures"]),
                    checkpoint_config=CheckpointConfig(num_to_keep=1),
                    callbacks=[
                        TrialLog(
                            label=label,
                            space=space,
                            monitor=task.monitor,
                            max_evaluations=max_t,
                            lines=lines,
                            tracking_uri=uri,
                            experiment=experiment,
                            sweep_id=state["sweep_id"],
                            max_failures=cfg["max_failures"],
                            trial_timeout_s=cfg["trial_timeout_s"],
                        ),
                        *callbacks,
                    ],
                ),
            )
            print(f"[{label}] {settings['num_samples']} trials, space {space.describe()}", flush=True)
            for note in space.notes:
                print(f"[{label}] note: {note}", flush=True)
            if space.dropped:
                print(
                    f"[{label}] note: {name} has no field(s) {', '.join(space.dropped)} of the generic space: not searched",
                    flush=True,
                )
        grid = tuner.fit()
    except BaseException:
        parent.finish("FAILED")
        raise
    known = _experiment_trials(grid)
    if tracking:
        close_orphan_runs(uri, parent.run_id, {t.trial_id for t in known})
    unfinished = [t.trial_id for t in known if t.status not in ("TERMINATED", "ERROR")]
    if unfinished:
        parent.finish("KILLED")
        raise SwarmlabError(
            f"the sweep of {name} was interrupted with {len(unfinished)} trial(s) unfinished: continue it "
            f"with `python -m pipelines.sweep --task {task.key} --resume`"
        )

    rows = []
    for result in grid:
        m = result.metrics or {}
        values = space.decode(result.config) if all(d.name in result.config for d in space.dims) else {}
        rows.append(
            {
                "model": name,
                "trial": Path(result.path).name.removeprefix("trial_"),
                "status": "error" if result.error else "ok",
                metric: m.get(metric),
                "num_params": m.get("num_params"),
                "best_step": m.get("best_step"),
                "best_epoch": m.get("best_epoch"),
                "evaluations": m.get("evaluation"),
                "mlflow_run_id": m.get("mlflow_run_id") or None,
                "checkpoint": str(Path(result.checkpoint.path) / "best.pt") if result.checkpoint else None,
                "metrics": {k: v for k, v in m.items() if k.startswith("best_val_")},
                "params": values,
                "error": str(result.error).strip().splitlines()[-1][:300] if result.error else None,
            }
        )
    rows = _rank(rows, metric, task.mode)
    best = next((r for r in rows if r["status"] == "ok" and r[metric] is not None), None)
    if best is None:
        first = next((r for r in rows if r["error"]), None)
        parent.finish("FAILED")
        raise SwarmlabError(
            f"every trial of {name} failed"
            + (f", e.g. trial {first['trial']}: {first['error']} (details under {exp_dir})" if first else "")
        )
    parent.log_params(best["params"])
    parent.log_metrics(
        {
            **best["metrics"],
            "best_step": best["best_step"],
            "trials": len(rows),
            "trials_failed": sum(r["status"] == "error" for r in rows),
        }
    )
    parent.set_tags({"best_trial_id": best["trial"], "best_run_id": best["mlflow_run_id"] or ""})
    parent.finish()
    train_kw, model_kw = space.split(best["params"])
    return {"rows": rows, "best": best, "train": train_kw, "model_overrides": model_kw, "parent_run_id": parent.run_id}


def close_orphan_runs(uri: str, parent_run_id: str, trial_ids: set[str]) -> None:
    """Mark KILLED the trial runs of a killed driver whose trials Tune had not recorded (it replaces them)."""
    from mlflow.tracking import MlflowClient

    from swarmlab.sweep.trial import TRIAL_TAG

    client = MlflowClient(tracking_uri=uri)
    exp_id = client.get_run(parent_run_id).info.experiment_id
    for run in client.search_runs(
        [exp_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}' and attributes.status = 'RUNNING'"
    ):
        if run.data.tags.get(TRIAL_TAG) not in trial_ids:
            client.set_tag(run.info.run_id, "stopped", "orphaned")
            client.set_terminated(run.info.run_id, status="KILLED")


def _trial_name(trial) -> str:
    return f"trial_{trial.trial_id}"


def write_reports(report_dir: Path, *, task, params: dict, state: dict, results: dict) -> dict:
    """``best_params.json``, ``summary.md`` and ``summary.csv`` (every trial of every model, ranked)."""
    from swarmlab.sweep.trial import objective

    metric = objective(task.monitor)
    per_model = {}
    for name, res in results.items():
        b = res["best"]
        per_model[name] = {
            "params": b["params"],
            "train": res["train"],
            "model_overrides": res["model_overrides"],
            metric: b[metric],
            "metrics": b["metrics"],
            "best_step": b["best_step"],
            "best_epoch": b["best_epoch"],
            "trial_id": b["trial"],
            "mlflow_run_id": b["mlflow_run_id"],
            "mlflow_parent_run_id": res["parent_run_id"],
            "checkpoint": b["checkpoint"],
            "trials": len(res["rows"]),
            "trials_failed": sum(r["status"] == "error" for r in res["rows"]),
        }
    model_rows = _rank([{"model": n, **v} for n, v in per_model.items()], metric, task.mode)
    best_params = {
        "task": task.key,
        "profile": params["profile"],
        "sweep_id": state["sweep_id"],
        "metric": metric,
        "mode": task.mode,
        "best_model": model_rows[0]["model"],
        "models": per_model,
    }
    trial_rows = _rank([dict(r) for res in results.values() for r in res["rows"]], metric, task.mode)
    for r in trial_rows:
        r["params"] = " ".join(f"{k}={_fmt(v)}" for k, v in r["params"].items())
    for r in model_rows:
        r["params"] = " ".join(f"{k}={_fmt(v)}" for k, v in r["params"].items())

    model_cols = ["rank", "model", metric, "best_step", "best_epoch", "trials", "trials_failed", "params"]
    trial_cols = [
        "rank",
        "model",
        "trial",
        "status",
        metric,
        "num_params",
        "best_step",
        "best_epoch",
        "evaluations",
        "params",
    ]
    md = (
        f"# Sweep of {task.key} ({params['profile']} profile, sweep {state['sweep_id']})\n\n"
        f"Objective: {metric} ({task.mode}), the best validation score of each trial.\n\n## Models\n\n"
        + format_table(model_rows, model_cols, markdown=True)
        + "\n## Trials\n\n"
        + format_table(trial_rows, trial_cols, markdown=True)
    )
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=trial_cols + ["mlflow_run_id", "error"], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(trial_rows)
    report_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(report_dir / "best_params.json", json.dumps(best_params, indent=2) + "\n")
    atomic_write_text(report_dir / "summary.md", md)
    atomic_write_text(report_dir / "summary.csv", buf.getvalue())
    print("\n" + format_table(trial_rows, trial_cols), end="", flush=True)
    print(
        f"best: {model_rows[0]['model']} {metric} {_fmt(model_rows[0][metric])}  ->  {report_dir / 'best_params.json'}",
        flush=True,
    )
    return best_params


def sweep(
    params: dict,
    *,
    task_name: str | None = None,
    models: list[str] | None = None,
    num_samples: int | None = None,
    address: str | None = None,
    resume: bool = False,
    tracking: bool = True,
    options: dict | None = None,
    out_root: Path = SWEEP_DIR,
    report_root: Path = REPORT_DIR,
    callbacks=(),
    lines: bool | None = None,
    num_cpus: int | None = None,
) -> dict:
    """Sweep every requested model on one task; returns the content of ``best_params.json``.

    Everything that can be checked without Ray (task, models, spaces, data) is checked before Ray starts.
    ``options`` replace keys of the task's options (``--data-dir`` sets ``data_dir``).
    """
    from swarmlab.runs import default_task, make_task

    task = make_task(params, default_task(params, task_name), options=options)
    task.root = task.root.resolve()
    cfg = check_settings(params)
    if num_samples is not None and num_samples < 1:
        raise SwarmlabError(f"--num-samples must be >= 1, got {num_samples}")
    names = model_names(models or configured_models(params, task), task)
    task.model_kwargs()  # the data's facts (a missing data folder is the first error)
    spaces = {name: model_space(name, task, params) for name in names}
    max_evaluations(trial_train_config(params, task.key))

    out_dir = Path(out_root).resolve() / task.key
    ray_dir = out_dir / "ray"
    state_path = out_dir / STATE_FILE
    if resume:
        if not state_path.is_file():
            raise SwarmlabError(f"--resume: no sweep of {task.key} to continue in {out_dir}; run without --resume")
        state = json.loads(state_path.read_text())
    else:
        state = {"sweep_id": f"{task.key}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}", "models": {}}
    lines = (not progress_enabled()) if lines is None else lines
    if tracking:
        from swarmlab.tracking import check_tracking_uri

        check_tracking_uri()

    import ray

    started = connect_ray(resolve_address(address, params["sweep"]["address"]), num_cpus=num_cpus)
    try:
        ray_dir.mkdir(parents=True, exist_ok=True)
        resources = trial_resources(ray.nodes(), cfg["cpus_per_trial"], cfg["gpus_per_trial"])
        t0 = time.perf_counter()
        results = {
            name: sweep_model(
                name,
                spaces[name],
                task=task,
                params=params,
                ray_dir=ray_dir,
                state=state,
                resources=resources,
                resume=resume,
                tracking=tracking,
                lines=lines,
                callbacks=callbacks,
                num_samples=num_samples,
            )
            for name in names
        }
        print(
            f"sweep of {task.key}: {sum(len(r['rows']) for r in results.values())} trials of {len(names)} model(s) "
            f"in {time.perf_counter() - t0:.1f} s (resources per trial: {resources})",
            flush=True,
        )
    finally:
        if started:
            ray.shutdown()
    return write_reports(Path(report_root).resolve() / task.key, task=task, params=params, state=state, results=results)


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument("--task", default=None, help="registered task to sweep (default: params `task`)")
    parser.add_argument(
        "--models",
        default=None,
        help="comma-separated registered models, or `all` for every model "
        "that fits the task (default: the entries of sweep.models that fit "
        "the task, else tasks.<task>.models)",
    )
    parser.add_argument("--num-samples", type=int, default=None, help="trials per model (default: sweep.num_samples)")
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to join, e.g. 127.0.0.1:6379 or auto "
        "(default: $RAY_ADDRESS, else sweep.address, else a local Ray)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted sweep of this task: finished "
        "trials are kept, unfinished ones continue from their checkpoints",
    )
    parser.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="the task's data folder (its `data_dir` option; default: tasks.<task>.options.data_dir)",
    )
    parser.add_argument(
        "--out-dir", default=str(SWEEP_DIR), help="Tune experiments go to <out-dir>/<task>/ray (default: outputs/sweep)"
    )
    parser.add_argument(
        "--report-dir",
        default=str(REPORT_DIR),
        help="best_params.json and summaries go to <report-dir>/<task> (default: reports/sweep)",
    )
    args = parser.parse_args(argv)
    params = params_from(args)
    sweep(
        params,
        task_name=args.task,
        models=args.models.split(",") if args.models else None,
        num_samples=args.num_samples,
        address=args.address,
        resume=args.resume,
        tracking=not args.no_tracking,
        options={"data_dir": str(Path(args.data_dir).resolve())} if args.data_dir else None,
        out_root=Path(args.out_dir),
        report_root=Path(args.report_dir),
    )


if __name__ == "__main__":
    main()
