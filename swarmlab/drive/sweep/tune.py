"""The Ray Tune plumbing of a sweep: per model one Tune experiment in ``outputs/sweep/<task>/ray/<model>`` (Optuna's
TPE, seeded; ASHA; a crashed trial restarts from its checkpoint; ``--resume`` restores the searcher's state), its
MLflow parent run ``sweep-<model>``, and the sweep's state file; ``sweep_models`` runs every model on one Ray.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from swarmlab.errors import SwarmlabError
from swarmlab.io import atomic_write_text
from swarmlab.log import get_logger
from swarmlab.paths import git_commit
from swarmlab.drive.schedule.cluster import absolute_tracking_uri, connect_ray, resolve_address
from swarmlab.drive.sections import SweepConfig
from swarmlab.drive.sweep.orphans import close_orphan_runs
from swarmlab.drive.sweep.search_space import ResolvedSpace
from swarmlab.drive.sweep.setup import max_evaluations, trial_resources
from swarmlab.drive.sweep.tables import rank
from swarmlab.drive.tuning import SWEEP_STATE

logger = get_logger(__name__)

if TYPE_CHECKING:
    from swarmlab.drive.sweep.spec import SweepModelSpec, SweepSpec

STATE_FILE = SWEEP_STATE
# the sweep's own settings (the section but its models, address and search spaces), as SweepConfig declares them
SETTINGS = tuple(f.name for f in dataclasses.fields(SweepConfig) if f.name not in ("models", "address", "spaces"))


def _experiment_trials(grid) -> list:
    return list(grid._experiment_analysis.trials)  # the only place Tune exposes each trial's status


def _persisted_status(exp_dir: Path) -> dict[str, str]:
    """Trial id -> status in the newest experiment state Tune wrote.

    On SIGINT (Ctrl-C) ``Tuner.fit`` swallows the signal, snapshots the experiment state once more and only then stops
    the trials still running, which sets them TERMINATED in memory: a trial cut at evaluation 20 of 150 then looks as
    finished as one ASHA stopped. The snapshot still says RUNNING (or PENDING) for the cut ones, and TERMINATED for
    those the scheduler or their last evaluation ended; the same snapshot is what ``--resume`` continues from."""
    state_file = _newest(exp_dir, "experiment_state-*.json")
    if state_file is None:
        return {}
    try:
        return _read_statuses(state_file)
    except (OSError, ValueError, KeyError, TypeError):  # unreadable: fall back on the statuses in memory
        return {}


def _newest(exp_dir: Path, pattern: str) -> Path | None:
    files = sorted(exp_dir.glob(pattern))  # Tune names each by its session's start time
    return files[-1] if files else None


def _read_statuses(state_file: Path) -> dict[str, str]:
    """Trial id -> status in one experiment state file; raises what reading or parsing it raises."""
    state = json.loads(state_file.read_text())
    trials = [json.loads(t[0]) if isinstance(t, list) else t for t in state["trial_data"]]
    return {t["trial_id"]: t["status"] for t in trials}


def resume_problem(exp_dir: Path) -> str | None:
    """Why the Tune state in ``exp_dir`` cannot continue the same search, or None when it can (or holds none).

    Tune writes its state to a staging folder and copies it into ``exp_dir`` in the background, file by file and
    in place. A driver killed during a copy leaves the trials' statuses of one snapshot beside the searcher's
    record of an older one, or a searcher file missing or cut. Restored from that, the searcher either has no
    search space (Ray stops at the first proposal) or has forgotten trials and proposes them again. So a resume
    needs the searcher's files to load and to know every trial the experiment state lists, the finished ones as
    finished."""
    import pickle

    state_file = _newest(exp_dir, "experiment_state-*.json")
    if state_file is None:
        return None  # nothing to restore: the model's search starts afresh
    try:
        status = _read_statuses(state_file)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{state_file.name} does not load ({type(e).__name__})"
    gen, base = _newest(exp_dir, "search_gen_state-*.json"), _newest(exp_dir, "searcher-state-*.pkl")
    if gen is None or base is None:
        return f"the searcher's state ({'search_gen_state' if gen is None else 'searcher-state'}-*) is missing"
    from ray import cloudpickle  # Tune writes search_gen_state with it

    try:
        with gen.open("rb") as f:
            cloudpickle.load(f)
        with base.open("rb") as f:
            searcher = pickle.load(f)  # what OptunaSearch.save wrote: its attributes
    except Exception as e:  # a cut pickle raises any of several errors
        return f"the searcher's state does not load ({type(e).__name__}: {e})"
    if not isinstance(searcher, dict) or not searcher.get("_space"):
        return f"{base.name} holds no search space"
    known, done = set(searcher.get("_ot_trials", {})), set(searcher.get("_completed_trials", ()))
    unknown = sorted(t for t in status if t not in known)
    unended = sorted(t for t, s in status.items() if s in ("TERMINATED", "ERROR") and t in known and t not in done)
    if unknown or unended:
        return (
            f"{base.name} is older than {state_file.name}: it does not know trial(s) {', '.join(unknown) or '-'} "
            f"and not as finished {', '.join(unended) or '-'}"
        )
    return None


def check_resumable(ray_dir: Path, models) -> None:
    """Before Ray starts: every model's saved Tune state can continue its search (``resume_problem``)."""
    for name in models:
        if problem := resume_problem(ray_dir / name):
            raise SwarmlabError(
                f"--resume: the search of {name} cannot continue: {problem}. The sweep was killed while Tune copied "
                f"its state into {ray_dir / name}; rerun without --resume to start the sweep afresh"
            )


def _unfinished(trials, exp_dir: Path) -> set[str]:
    """The ids of the trials an interrupt cut (neither ended by their schedule nor failed for good)."""
    persisted = _persisted_status(exp_dir)
    done = ("TERMINATED", "ERROR")
    return {t.trial_id for t in trials if t.status not in done or persisted.get(t.trial_id, t.status) not in done}


def _trial_name(trial) -> str:
    return f"trial_{trial.trial_id}"


def sweep_model(
    model: SweepModelSpec,
    space: ResolvedSpace,
    *,
    task,
    spec: SweepSpec,
    ray_dir: Path,
    state: dict,
    resources: dict,
    resume: bool,
    tracking: bool,
    lines: bool,
    callbacks=(),
    num_samples: int | None = None,
) -> dict:
    """Run (or continue) the Tune experiment of one model; returns its trials and its best trial.

    In four steps: the model's MLflow parent run (``_parent_run``), what every trial is told (``_trial_context``),
    the Tune experiment, new or restored (``_tuner``), and its trials ranked into the result (``_results``)."""
    import optuna  # optuna, ray: heavy, and only a sweep needs them
    from ray import tune

    from swarmlab.drive.sweep.trial import run_trial

    name, cfg = model.model, spec.settings
    entry = state["models"].setdefault(name, {})
    settings = {k: cfg[k] for k in SETTINGS} | ({"num_samples": num_samples} if num_samples else {})
    uri = absolute_tracking_uri() if tracking else None
    parent = _parent_run(name, space, task, spec.profile, state, entry, settings, uri)
    entry["parent_run_id"] = parent.run_id
    atomic_write_text(ray_dir.parent / STATE_FILE, json.dumps(state, indent=2) + "\n")

    ctx = _trial_context(model, space, task, spec, state, uri, parent.run_id)
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
        tuner = _tuner(
            name, space, task, cfg, settings, ctx, trainable, ray_dir, exp_dir, state, uri, resume, lines, callbacks
        )
        grid = tuner.fit()
    except BaseException:
        parent.finish("FAILED")
        raise
    return _results(name, space, task, grid, parent, exp_dir, uri, tracking)


def _parent_run(name, space, task, profile, state, entry, settings, uri):
    """The model's MLflow parent run ``sweep-<model> | <profile> | sweep <id>`` (its settings and space logged once;
    continued on resume): the name says which sweep of which profile, like a training run's."""
    from swarmlab.tracking import MlflowTracker, NullTracker

    if uri is None:
        return NullTracker()
    # the driver creates the experiment (artifact location beside the store) before any trial
    parent = MlflowTracker(
        f"{task.key}-sweep",
        f"sweep-{name} | {profile} | sweep {state['sweep_id']}",
        run_id=entry.get("parent_run_id"),
        uri=uri,
        tags={
            "stage": "sweep",
            "model": name,
            "task": task.key,
            "sweep_id": state["sweep_id"],
            "profile": profile,
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
    return parent


def _trial_context(model, space, task, spec, state, uri, parent_run_id):
    """What every trial of the model is told: the task to build, the model, its space and training settings."""
    from swarmlab.drive.sweep.trial import TrialContext

    return TrialContext(
        task=task.name,
        key=task.key,
        options=dataclasses.asdict(task.options),
        root=str(task.root),
        model=model.model,
        space=space,
        train=dict(model.train),
        monitor=task.monitor,
        mode=task.mode,
        cpus_per_trial=spec.settings["cpus_per_trial"],
        sweep_id=state["sweep_id"],
        tracking_uri=uri,
        experiment=f"{task.key}-sweep",
        parent_run_id=parent_run_id,
        tags={"profile": spec.profile, "git_commit": git_commit()},
    )


def _tuner(name, space, task, cfg, settings, ctx, trainable, ray_dir, exp_dir, state, uri, resume, lines, callbacks):
    """The model's Tune experiment: restored under ``--resume`` (its searcher's state too), else a new one (Optuna
    TPE seeded, ASHA on evaluations, one checkpoint kept per trial, failed trials restarted)."""
    import optuna
    from ray.tune import CheckpointConfig, FailureConfig, RunConfig, TuneConfig, Tuner
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    from swarmlab.drive.sweep.trial import TrialLog, objective

    label = f"{task.key}/{name}"
    if resume and Tuner.can_restore(str(exp_dir)):
        logger.info(f"[{label}] resuming {exp_dir}")
        return Tuner.restore(str(exp_dir), trainable=trainable, resume_errored=True)
    shutil.rmtree(exp_dir, ignore_errors=True)
    max_t = max_evaluations(ctx.train)
    sampler = optuna.samplers.TPESampler(seed=cfg["seed"], n_startup_trials=cfg["startup_trials"])
    tuner = Tuner(
        trainable,
        param_space=space.tune_space(),
        tune_config=TuneConfig(
            metric=objective(task.monitor),
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
                    experiment=f"{task.key}-sweep",
                    sweep_id=state["sweep_id"],
                    max_failures=cfg["max_failures"],
                    trial_timeout_s=cfg["trial_timeout_s"],
                ),
                *callbacks,
            ],
        ),
    )
    logger.info(f"[{label}] {settings['num_samples']} trials, space {space.describe()}")
    for note in space.notes:
        logger.info(f"[{label}] note: {note}")
    if space.dropped:
        logger.info(
            f"[{label}] note: {name} has no field(s) {', '.join(space.dropped)} of the generic space: not searched"
        )
    return tuner


def _results(name, space, task, grid, parent, exp_dir, uri, tracking) -> dict:
    """The experiment's trials, ranked; the best one logged to the parent run. An interrupted experiment has no best
    trial (its cut trials are ``interrupted``, the parent run says KILLED); a wholly failed one is a one-line error."""
    from swarmlab.drive.sweep.trial import objective

    metric = objective(task.monitor)
    known = _experiment_trials(grid)
    if tracking:
        close_orphan_runs(uri, parent.run_id, {t.trial_id for t in known})
    unfinished = _unfinished(known, exp_dir)
    rows = []
    for result in grid:
        m = result.metrics or {}
        config = result.config or {}  # None for a trial that died before its first report (a node killed under it)
        values = space.decode(config) if all(d.name in config for d in space.dims) else {}
        trial_id = Path(result.path).name.removeprefix("trial_")
        rows.append(
            {
                "model": name,
                "trial": trial_id,
                "status": "interrupted" if trial_id in unfinished else "error" if result.error else "ok",
                metric: m.get(metric),
                "num_params": m.get("num_params"),
                "best_step": m.get("best_step"),
                "best_epoch": m.get("best_epoch"),
                "evaluations": m.get("evaluation"),
                "steps": m.get("step"),  # its last reported step: how far its budget (or ASHA) let it train
                "mlflow_run_id": m.get("mlflow_run_id") or None,
                "checkpoint": str(Path(result.checkpoint.path) / "best.pt") if result.checkpoint else None,
                "metrics": {k: v for k, v in m.items() if k.startswith("best_val_")},
                "params": values,
                "error": str(result.error).strip().splitlines()[-1][:300] if result.error else None,
            }
        )
    rows = rank(rows, metric, task.mode)
    if unfinished:  # its rows go to the summaries, marked; it has no best trial and best_params.json is not written
        parent.finish("KILLED")
        return {"rows": rows, "best": None, "unfinished": len(unfinished), "parent_run_id": parent.run_id}
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
            "trials": len(rows),
            "trials_failed": sum(r["status"] == "error" for r in rows),
        }
    )
    parent.set_tags(
        {"best_trial_id": best["trial"], "best_run_id": best["mlflow_run_id"] or "", "best_step": best["best_step"]}
    )
    parent.finish()
    train_kw, model_kw = space.split(best["params"])
    return {
        "rows": rows,
        "best": best,
        "unfinished": 0,
        "train": train_kw,
        "model_overrides": model_kw,
        "parent_run_id": parent.run_id,
    }


def load_state(out_dir: Path, task_key: str, resume: bool) -> dict:
    """The sweep's state (its id, each model's MLflow parent run): the interrupted sweep's under ``--resume``."""
    state_path = out_dir / STATE_FILE
    if resume:
        if not state_path.is_file():
            raise SwarmlabError(f"--resume: no sweep of {task_key} to continue in {out_dir}; run without --resume")
        return json.loads(state_path.read_text())
    return {"sweep_id": f"{task_key}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}", "models": {}}


def sweep_models(
    spec: SweepSpec,
    spaces: dict[str, ResolvedSpace],
    *,
    task,
    ray_dir: Path,
    state: dict,
    address: str | None,
    num_cpus: int | None,
    **kwargs,
) -> dict:
    """Connect to Ray (or start a local one, shut down again at the end) and sweep each of the spec's models in
    turn; ``kwargs`` go to ``sweep_model``. Returns each model's trials and best trial."""
    import ray  # ray: heavy, and only a sweep or a run on Ray needs it

    cfg = spec.settings
    started = connect_ray(resolve_address(address, cfg["address"]), num_cpus=num_cpus)
    try:
        ray_dir.mkdir(parents=True, exist_ok=True)
        resources = trial_resources(ray.nodes(), cfg["cpus_per_trial"], cfg["gpus_per_trial"])
        t0 = time.perf_counter()
        results = {}
        for model in spec.models:
            results[model.model] = sweep_model(
                model,
                spaces[model.model],
                task=task,
                spec=spec,
                ray_dir=ray_dir,
                state=state,
                resources=resources,
                **kwargs,
            )
            if results[model.model]["unfinished"]:  # Tune swallowed a Ctrl-C: the next models do not start either
                break
        logger.info(
            f"sweep of {task.key}: {sum(len(r['rows']) for r in results.values())} trials of {len(spec.models)} model(s) "
            f"in {time.perf_counter() - t0:.1f} s (resources per trial: {resources})"
        )
    finally:
        if started:
            ray.shutdown()
    return results
