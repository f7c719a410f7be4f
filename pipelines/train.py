"""Stage `train@<task>`: every model of ``tasks.<task>.models`` under each of ``tasks.<task>.seeds``, selected on validation.

Per run (``<model>-seed<k>``; the seeds default to the top-level ``seed`` alone): ``outputs/train/<task>/<run>/``
(last.pt, best.pt, history.csv, run.json), an MLflow run of that name in the task's experiment,
``reports/train/<task>/history/<run>.csv`` (DVC plot) and an entry of ``reports/train/<task>/metrics.json``
(DVC metrics; each entry names its model and seed, and the resources it ran with). The test split is not touched here.

The runs go through the scheduler (swarmlab/schedule/scheduler.py): one after another in this process, or fanned out
over a local Ray or a cluster (top-level ``schedule:`` in params.yaml, ``--parallel``, ``--address``, ``$RAY_ADDRESS``;
docs/ray.md). metrics.json is assembled from the finished runs' own records (``summary.json`` in each run folder), so
a rerun keeps every finished run whose settings, code and data are unchanged and continues an interrupted one from
its last checkpoint (swarmlab/records.py); ``--restart`` trains every run over.

    python -m pipelines.train [--task T] [--profile P] [--models a,b] [--resume | --restart] [--parallel N]
                              [--address HOST:PORT] [--no-tracking]
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import yaml

from swarmlab.stage_cli import add_schedule_arguments, params_from, stage_parser
from swarmlab.guard import check_outcome, dry_run, seal_run, start_record
from swarmlab.paths import OUTPUTS_DIR, REPORTS_DIR, git_commit
from swarmlab.records import RUN_FILE, SUMMARY, data_hash, finished_summary, run_fingerprint, same_unfinished
from swarmlab.runs import (
    Run,
    default_task,
    make_task,
    model_names,
    report_dir,
    skip_reason,
    task_runs,
    train_dir,
    write_skipped,
)
from swarmlab.run_config import build_model, model_overrides, train_config
from swarmlab.schedule.scheduler import Job, Scheduler
from swarmlab.seeds import set_seeds
from swarmlab.tracking import check_tracking_uri, make_tracker, run_context, run_title
from swarmlab.batches import is_endless
from swarmlab.engine import CHECKPOINT, fit, resolve_device
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_write_text, swap_into_place

TRAIN_ROOT = OUTPUTS_DIR / "train"
REPORT_ROOT = REPORTS_DIR


def in_progress_dir(final: Path) -> Path:
    """Where a run of ``final`` (outputs/train/<task>/<model>) writes until it succeeds: a hidden sibling."""
    return final.parent / f".{final.name}.run"


def train_one(
    task,
    run: Run,
    params: dict,
    *,
    out_root: Path = TRAIN_ROOT,
    report_root: Path = REPORT_ROOT,
    resume: bool = False,
    tracking: bool = True,
    fingerprint: str = "",
    resources: dict | None = None,
    baseline: float | None = None,
) -> dict:
    """Train one model under one seed; its folder is replaced only when the run succeeds.

    The run writes into ``.<run>.run/`` beside ``<run>/`` and is renamed into place at the end, so a failed
    or killed run leaves the previous checkpoints exactly as they were. ``resume`` continues the interrupted
    run in ``.<run>.run/`` (or, for a finished one given more epochs or steps, a copy of ``<run>/``) and
    refuses one whose settings differ. ``fingerprint`` (swarmlab/records.py) and ``resources`` (what the
    scheduler gave the run) are recorded in the run folder (run.json, summary.json). A run that diverged
    (``guard.check_outcome``; ``baseline``: the model's loss at initialisation, from the dry run) is refused and
    leaves the previous run in place too.
    """
    name = run.model
    cfg = train_config(params, task.key, name, seed=run.seed)
    set_seeds(run.seed)  # initial weights follow the run's seed, whatever ran before in this process
    model = build_model(name, task, model_overrides(params, task.key, name))
    train_ds = task.train_data(model.cfg)
    val_ds = task.eval_data("val", model.cfg)
    if not is_endless(train_ds) and cfg.batch_size > len(train_ds):
        raise SwarmlabError(
            f"train.batch_size={cfg.batch_size} is larger than the training split "
            f"({len(train_ds)} {task.item_name}): lower it (train or tasks.{task.key}.train)"
        )
    final = train_dir(task.key, run.name, out_root)
    work = in_progress_dir(final)
    created = not work.exists()  # removed again if this call fails with a user error (a kill -9 keeps it for --resume)
    try:
        return _train_in(
            task,
            run,
            params,
            cfg,
            model,
            train_ds,
            val_ds,
            final,
            work,
            report_root=report_root,
            resume=resume,
            tracking=tracking,
            fingerprint=fingerprint,
            resources=resources,
            baseline=baseline,
        )
    except SwarmlabError:
        if created:
            shutil.rmtree(work, ignore_errors=True)
        raise


def _train_in(
    task,
    run: Run,
    params,
    cfg,
    model,
    train_ds,
    val_ds,
    final: Path,
    work: Path,
    *,
    report_root: Path,
    resume: bool,
    tracking: bool,
    fingerprint: str = "",
    resources: dict | None = None,
    baseline: float | None = None,
) -> dict:
    name = run.model
    if resume and not (work / CHECKPOINT).is_file() and (final / CHECKPOINT).is_file():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(final, work)  # a finished run given more epochs/steps goes on from its last checkpoint
    elif not resume:
        shutil.rmtree(work, ignore_errors=True)  # a fresh run starts clean
    if resume and not (work / CHECKPOINT).is_file():
        print(f"train {task.key}/{run.name}: nothing to resume in {work} or {final}: starting a fresh run", flush=True)
    work.mkdir(parents=True, exist_ok=True)

    run_file = work / RUN_FILE
    previous = json.loads(run_file.read_text()) if resume and run_file.is_file() else {}
    context = run_context(params) if tracking else {}  # the DVC experiment and the overrides (run names, tracking.py)
    tracker = make_tracker(
        tracking,
        task.key,
        run_title(run.name, params["profile"], context),
        run_id=previous.get("run_id"),
        tags={
            "profile": params["profile"],
            "git_commit": git_commit(),
            "model": name,
            "run": run.name,
            "stage": "train",
            "task": task.key,
            "seed": run.seed,
            **context,
        },
    )
    atomic_write_text(
        run_file,
        json.dumps(
            {
                "run_id": tracker.run_id,
                "model": name,
                "task": task.key,
                "seed": run.seed,
                "fingerprint": fingerprint,
                **start_record(task),
            }
        )
        + "\n",
    )
    data = task.describe_data(train_ds, val_ds)
    identity = {
        "model": {"name": name, **asdict(model.cfg)},
        "task": {"name": task.name, **asdict(task.options)},
        "data": data,
    }
    if not previous:
        tracker.log_params(
            {**identity, "task": {**identity["task"], "key": task.key}, "profile": params["profile"], "seed": run.seed}
        )
    sizes = ", ".join(f"{k} {v}" for k, v in data.items())
    print(
        f"train {task.key}/{run.name}: {model.get_num_params():,} parameters; {task.item_name}: {sizes}; "
        f"profile {params['profile']}",
        flush=True,
    )
    try:
        result = fit(
            model,
            task,
            train_ds,
            val_ds,
            cfg,
            work,
            resume=resume,
            tracker=tracker,
            desc=f"[{run.name}] ",
            identity=identity,
        )
        check_outcome(result, task, cfg, run.name, baseline)  # a diverged run never replaces the previous one
    except BaseException:
        tracker.finish("FAILED")
        raise
    out_dir = work  # renamed to `final` once the reports are written

    rates = [r["train_samples_per_s"] for r in result.history if r.get("train_samples_per_s")]
    summary = {
        "model": name,
        "seed": run.seed,
        "best_step": result.best_step,
        "best_epoch": result.best_epoch,
        "steps": result.steps,
        "evaluations": len(result.history),
        "stopped": result.stopped,
        "backtracks": result.backtracks,
        "num_params": result.num_params,
        "train_time_s": round(result.train_time_s, 1),
        "train_samples_per_s": round(sum(rates) / len(rates), 1) if rates else 0.0,
        "bf16_autocast": result.extra["bf16_autocast"],
        **{f"val_{k}": v for k, v in result.best_val.items()},
        "data": data,  # the task's facts about its data (sizes; for MNIST: approximate training images)
        **({"resources": resources} if resources else {}),  # CPUs, GPUs, threads, runs at once (the report states them)
    }
    if tracking:
        from swarmlab.plots import training_curve

        with tempfile.TemporaryDirectory() as tmp:
            curve = training_curve(
                result.history, Path(tmp) / "training_curve.png", f"{task.key}: {run.name}", task.monitor
            )
            shutil.copy(curve, out_dir / "training_curve.png")
            resolved = Path(tmp) / "params_resolved.yaml"
            resolved.write_text(yaml.safe_dump(params, sort_keys=False))
            tracker.log_artifact(curve)
            tracker.log_artifact(resolved)
        tracker.log_artifact(out_dir / "best.pt", "checkpoint")
        tracker.log_artifact(out_dir / "history.csv")
        tracker.log_metrics(
            {
                "best_step": result.best_step,
                "backtracks": result.backtracks,
                **{f"best_val_{k}": v for k, v in result.best_val.items()},
            }
        )
        tracker.set_tags({"stopped": result.stopped})
    atomic_write_text(out_dir / SUMMARY, json.dumps(summary, indent=2) + "\n")  # the record metrics.json is made of
    seal_run(work)  # run.json: best.pt's hash, which evaluate and sample check
    swap_into_place(work, final)  # the new run replaces the previous one only now
    # the DVC plot's copy of the history, only once the run is in place (a rerun copies it again for a kept run)
    atomic_write_text(
        report_dir("train", task.key, report_root) / "history" / f"{run.name}.csv", (final / "history.csv").read_text()
    )
    tracker.finish()
    return summary


def train_run(task, run: Run, params: dict, *, resume: bool | str = "auto", work: Path | None = None, **kwargs) -> dict:
    """One run as the scheduler hands it out (in this process or in a Ray worker): ``train_one``, where ``resume="auto"``
    continues the interrupted run in ``.<run>.run/`` when it has a checkpoint and the same fingerprint, and starts
    fresh otherwise. So a run whose worker died is retried from its last checkpoint."""
    if resume == "auto":
        resume = work is not None and same_unfinished(work, kwargs.get("fingerprint", ""), CHECKPOINT)
    return train_one(task, run, params, resume=resume, **kwargs)


def train(
    params: dict,
    task_name: str | None = None,
    models: list[str] | None = None,
    *,
    options: dict | None = None,
    out_root: Path = TRAIN_ROOT,
    report_root: Path = REPORT_ROOT,
    resume: bool = False,
    restart: bool = False,
    tracking: bool = True,
    parallel: int | None = None,
    address: str | None = None,
) -> dict:
    """Train every requested model of one task under each of its seeds; returns (and writes)
    ``reports/train/<task>/metrics.json``, keyed by run name (``<model>-seed<k>``), assembled from the runs' records.

    A finished run whose fingerprint (settings, threads, code, data) is unchanged is kept; an interrupted one with an
    unchanged fingerprint continues from its checkpoint; every other run trains from scratch. ``restart`` trains all
    over; ``resume`` continues every run (a finished one given more epochs or steps, too) and refuses changed settings.
    ``parallel`` and ``address`` override the ``schedule`` section.

    Everything is checked before any data is read or any output touched: the task, its models and their
    configs, the engine's settings, the device, the schedule and the tracking store.
    """
    task_name = default_task(params, task_name)
    task = make_task(params, task_name, options=options)
    if skip_reason(params, task_name):
        return write_skipped(
            "train",
            task_name,
            skip_reason(params, task_name),
            report_root=report_root,
            folders=(Path(out_root) / task_name, report_dir("train", task_name, report_root) / "history"),
        )
    names = models or model_names(params, task_name)
    cfg = train_config(params, task_name)  # refuse bad engine settings before any data is read or any model trained
    resolve_device(cfg.device)
    model_cfgs = {}
    for name in names:  # and unknown models, refused configs or per-model settings before the first one trains
        model_cfgs[name] = build_model(name, task, model_overrides(params, task_name, name)).cfg
        train_config(params, task_name, name)
    if resume and restart:
        raise SwarmlabError("--resume and --restart contradict each other: pick one")
    runs = task_runs(params, task_name, names)
    scheduler = Scheduler("train", params, task, runs, parallel=parallel, address=address)
    if tracking:
        check_tracking_uri()
    baselines = dry_run(task, params, names)  # every model, one tiny batch each, before the first run starts
    out_root, report_root = Path(out_root).resolve(), Path(report_root).resolve()
    root = out_root / task_name
    reports = report_dir("train", task_name, report_root)
    metrics_path = reports / "metrics.json"
    data = data_hash(task)
    with scheduler:
        if (
            not resume and root.is_dir()
        ):  # what killed runs left behind (an interrupted run and its log are kept to go on)
            for stale in [
                *root.glob(".*.old"),
                *(root.glob(".*.run") if restart else []),
                *(root.glob(".*.log") if restart else []),
            ]:
                shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
        summaries = json.loads(metrics_path.read_text()) if models and metrics_path.is_file() else {}
        jobs = []
        for run in runs:
            final = train_dir(task_name, run.name, out_root)
            work = in_progress_dir(final)
            record = scheduler.record(run)
            fingerprint = run_fingerprint(
                run=run,
                model_cfg=model_cfgs[run.model],
                task=task,
                train_cfg=train_config(params, task_name, run.model, seed=run.seed),
                threads=record["threads"],
                data=data,
                resources={k: v for k, v in record.items() if k != "parallel"},
            )
            kept = None if (resume or restart) else finished_summary(final, fingerprint)
            if kept is not None:
                summaries[run.name] = kept
                atomic_write_text(reports / "history" / f"{run.name}.csv", (final / "history.csv").read_text())
                print(
                    f"[train {task_name}] keep  {run.name}: finished with the same settings, code and data", flush=True
                )
                continue
            if not resume and work.is_dir() and not same_unfinished(work, fingerprint, CHECKPOINT):
                shutil.rmtree(work)  # interrupted under other settings: it cannot be continued
                (root / f".{run.name}.log").unlink(missing_ok=True)
            rows = len((work / "history.csv").read_text().splitlines()) - 1 if (work / "history.csv").is_file() else 0
            jobs.append(
                Job(
                    run,
                    dict(
                        out_root=out_root,
                        report_root=report_root,
                        resume=True if resume else "auto",
                        work=work,
                        tracking=tracking,
                        fingerprint=fingerprint,
                        resources=record,
                        baseline=baselines.get(run.model),
                    ),
                    log=root / f".{run.name}.log",
                    keep_log=final / "log.txt",
                    history=work / "history.csv",
                    note=f"continues after evaluation {rows}" if rows > 0 and not restart else "",
                )
            )

        def done(job: Job, summary: dict) -> None:
            summaries[job.run.name] = summary
            write_metrics(metrics_path, summaries, runs)

        scheduler.execute("pipelines.train:train_run", jobs, tracking=tracking, on_done=done)
    if models is None:  # the task's whole list ran: folders of runs no longer listed go (the output persists in DVC)
        current = {run.name for run in runs}
        for entry in [*(root.iterdir() if root.is_dir() else []), *((reports / "history").glob("*.csv"))]:
            if entry.name not in current and entry.name.removesuffix(".csv") not in current:
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
    return write_metrics(metrics_path, summaries, runs)


def write_metrics(path: Path, summaries: dict, runs: list[Run]) -> dict:
    """``metrics.json``: the runs' records in the order of the task's runs (others, of a ``--models`` rerun, after)."""
    order = [r.name for r in runs]
    ordered = {k: summaries[k] for k in order if k in summaries} | {
        k: v for k, v in summaries.items() if k not in order
    }
    atomic_write_text(path, json.dumps(ordered, indent=2) + "\n")
    return ordered


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--task", default=None, help="registered task with a tasks.<task> section (default: params `task`)"
    )
    parser.add_argument(
        "--models", default=None, help="comma-separated subset of registered models (default: tasks.<task>.models)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue each model's interrupted run (or its finished run, "
        "given more epochs or steps); refused when settings differ",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="train every run over, discarding finished and interrupted "
        "runs (default: keep finished runs whose settings, code and "
        "data are unchanged, continue interrupted ones)",
    )
    add_schedule_arguments(parser)
    parser.add_argument("--no-tracking", action="store_true", help="do not log to MLflow (torch + pyarrow only)")
    args = parser.parse_args(argv)
    if args.resume and args.restart:
        raise SwarmlabError("--resume and --restart contradict each other: pick one")
    params = params_from(args)
    models = args.models.split(",") if args.models else None
    train(
        params,
        args.task,
        models,
        resume=args.resume,
        restart=args.restart,
        tracking=not args.no_tracking,
        parallel=args.parallel,
        address=args.address,
    )


if __name__ == "__main__":
    main()
