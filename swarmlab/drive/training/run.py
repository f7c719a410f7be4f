"""One training run (a model under one seed) as the scheduler hands it out, in this process or in a Ray worker.

The run writes into ``.<run>.run/`` beside ``outputs/train/<task>/<run>/`` and is renamed into place only when it
succeeded (and did not diverge), so a failed or killed run leaves the previous one exactly as it was. Besides its
checkpoints it writes ``summary.json`` (the record the task's metrics.json is assembled from, swarmlab.drive.training.task),
an MLflow run and the DVC plot's copy of its history.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import yaml

from swarmlab import plots
from swarmlab.batches import check_batch_fits
from swarmlab.engine import BEST, CHECKPOINT, fit, load_checkpoint, load_weights
from swarmlab.errors import SwarmlabError
from swarmlab.drive.guard import check_outcome
from swarmlab.io import atomic_write_text, swap_into_place
from swarmlab.log import get_logger
from swarmlab.machine import describe_cpu
from swarmlab.paths import OUTPUTS_DIR, REPORTS_DIR, git_commit
from swarmlab.drive.records import RUN_FILE, SUMMARY, code_hash, same_unfinished, seal_run, start_record
from swarmlab.drive.run_config import build_model
from swarmlab.drive.runs import report_dir, train_dir
from swarmlab.seeds import set_seeds
from swarmlab.tracking import make_tracker, run_title

logger = get_logger(__name__)

if TYPE_CHECKING:
    from swarmlab.drive.spec import RunSpec

TRAIN_ROOT = OUTPUTS_DIR / "train"
REPORT_ROOT = REPORTS_DIR


def in_progress_dir(final: Path) -> Path:
    """Where a run of ``final`` (outputs/train/<task>/<model>) writes until it succeeds: a hidden sibling."""
    return final.parent / f".{final.name}.run"


def train_one(
    task,
    run: RunSpec,
    *,
    out_root: Path = TRAIN_ROOT,
    report_root: Path = REPORT_ROOT,
    resume: bool = False,
    tracking: bool = True,
    fingerprint: str = "",
    resources: dict | None = None,
    baseline: float | None = None,
) -> dict:
    """Train one model under one seed (``run``: its resolved spec, swarmlab.drive.spec); its folder is replaced only when
    the run succeeds.

    The run writes into ``.<run>.run/`` beside ``<run>/`` and is renamed into place at the end, so a failed
    or killed run leaves the previous checkpoints exactly as they were. ``resume`` continues the interrupted
    run in ``.<run>.run/`` (or, for a finished one given more epochs or steps, a copy of ``<run>/``) and
    refuses one whose settings differ. ``fingerprint`` (swarmlab/drive/records.py) and ``resources`` (what the
    scheduler gave the run) are recorded in the run folder (run.json, summary.json). A run that diverged
    (``guard.check_outcome``; ``baseline``: the model's loss at initialisation, from the dry run) is refused and
    leaves the previous run in place too.
    """
    cfg = run.train
    set_seeds(run.seed)  # initial weights follow the run's seed, whatever ran before in this process
    model = build_model(run.model, task, dict(run.overrides))  # built once in this process
    train_ds = task.train_data(model.cfg)
    val_ds = task.eval_data("val", model.cfg)
    check_batch_fits(cfg.batch_size, train_ds, task.item_name, task.key)
    final = train_dir(task.key, run.name, out_root)
    work = in_progress_dir(final)
    created = not work.exists()  # removed again if this call fails with a user error (a kill -9 keeps it for --resume)
    try:
        return _train_in(
            task,
            run,
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
    run: RunSpec,
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
    """One run in its work folder, in five steps: the folder (``_prepare_work``), its record and MLflow run
    (``_start_run``), ``fit``, the summary (``_summary``), and the artifacts, seal and swap (``_finish_run``)."""
    _prepare_work(task, run, final, work, resume)
    tracker, identity, data = _start_run(task, run, cfg, model, train_ds, val_ds, work, resume, tracking, fingerprint)
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
    mlflow_run_id = json.loads((work / RUN_FILE).read_text()).get("run_id")  # kept across a resume without tracking
    summary = _summary(run, result, data, resources, mlflow_run_id)
    _finish_run(task, run, result, summary, tracker, val_ds, work, final, report_root, tracking)
    return summary


def _prepare_work(task, run: RunSpec, final: Path, work: Path, resume: bool) -> None:
    """The work folder: a fresh one, the interrupted run's, or a copy of the finished run given more to do."""
    if resume and not (work / CHECKPOINT).is_file() and (final / CHECKPOINT).is_file():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(final, work)  # a finished run given more epochs/steps goes on from its last checkpoint
    elif not resume:
        shutil.rmtree(work, ignore_errors=True)  # a fresh run starts clean
    if resume and not (work / CHECKPOINT).is_file():
        logger.info(f"train {task.key}/{run.name}: nothing to resume in {work} or {final}: starting a fresh run")
    work.mkdir(parents=True, exist_ok=True)


def _start_run(task, run: RunSpec, cfg, model, train_ds, val_ds, work: Path, resume, tracking, fingerprint):
    """The run's record (run.json: its MLflow run, fingerprint and commit) and its MLflow run, continued on resume;
    returns the tracker, the run's identity (model, task, data) and the data's facts."""
    name = run.model
    run_file = work / RUN_FILE
    previous = json.loads(run_file.read_text()) if resume and run_file.is_file() else {}
    context = run.context  # the DVC experiment and the overrides (run names, tracking.py); {} without tracking
    tracker = make_tracker(
        tracking,
        task.key,
        run_title(run.name, run.profile, context),
        run_id=previous.get("run_id"),
        tags={
            "profile": run.profile,
            "git_commit": git_commit(),
            "model": name,
            "run": run.name,
            "stage": "train",
            "task": task.key,
            "seed": run.seed,
            "tuning": run.tuning,
            **context,
        },
        system_metrics=True,
    )
    atomic_write_text(
        run_file,
        json.dumps(
            {
                "run_id": tracker.run_id or previous.get("run_id"),  # a resume without tracking keeps the id
                "model": name,
                "task": task.key,
                "seed": run.seed,
                "model_cfg": json.loads(json.dumps(asdict(model.cfg), default=str)),  # evaluate checks it
                "fingerprint": fingerprint,
                "git_commit": git_commit(),  # the commit that trained it: evaluate's test-read log names it
                "tuning": run.tuning,  # how its settings were chosen (swarmlab/drive/tuning.py)
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
        digest = task.data_fingerprint()
        if digest:  # MLflow's Datasets column: the data the run trained on, by its fingerprint
            tracker.log_dataset(task.key, digest, str(task.data_dir), "training")
        tracker.log_params(
            {
                **identity,
                "task": {**identity["task"], "key": task.key},
                "train": asdict(cfg),
                "profile": run.profile,
                "seed": run.seed,
            }
        )
    sizes = ", ".join(f"{k} {v}" for k, v in data.items())
    logger.info(
        f"train {task.key}/{run.name}: {model.get_num_params():,} parameters; {task.item_name}: {sizes}; "
        f"profile {run.profile}"
    )
    return tracker, identity, data


def _summary(run: RunSpec, result, data: dict, resources: dict | None, mlflow_run_id: str | None) -> dict:
    """The run's record in the task's metrics.json: where it stopped, its best validation, what made it, where it ran
    (the CPU: bf16 autocast and equal-time budgets differ between this project's machine classes) and its MLflow run."""
    rates = [r["train_samples_per_s"] for r in result.history if r.get("train_samples_per_s")]
    return {
        "model": run.model,
        "seed": run.seed,
        "best_step": result.best_step,
        "best_epoch": result.best_epoch,
        "steps": result.steps,
        "evaluations": len(result.history),
        "stopped": result.stopped,
        "tuning": run.tuning,  # how its settings were chosen: pinned, or by its sweep (swarmlab/drive/tuning.py)
        "backtracks": result.backtracks,
        "num_params": result.num_params,
        "train_time_s": round(result.train_time_s, 1),
        "train_samples_per_s": round(sum(rates) / len(rates), 1) if rates else 0.0,
        "bf16_autocast": result.extra["bf16_autocast"],
        **{f"val_{k}": v for k, v in result.best_val.items()},
        # what the run was trained at: the commit, and the hash of the code it imports (the ledger flags a comparison
        # whose sides were trained at different code, and refuses a commit that is not in the repository's history)
        "git_commit": git_commit(),
        "code": code_hash()[:16],
        "cpu": describe_cpu(),
        "mlflow_run_id": mlflow_run_id,
        "data": data,  # the task's facts about its data (sizes; for MNIST: approximate training images)
        **({"resources": resources} if resources else {}),  # CPUs, GPUs, threads, runs at once (the report states them)
    }


def _log_model(task, run: RunSpec, result, tracker, val_ds, run_dir: Path, spec_file: Path) -> None:
    """The run's best checkpoint as an MLflow model (swarmlab/drive/training/logged_model.py), checked first: loaded
    back as MLflow will load it, it predicts what the stage's own model with those weights does on two validation
    items. Linked to the run at its best step. The RNG is left as it was. A model that fails the check is not logged,
    with a warning: the run's results do not depend on it (its checkpoint is best.pt, sealed in run.json)."""
    from swarmlab.drive.training.logged_model import CODE, checked_example  # mlflow.pyfunc: only a tracked run

    with torch.random.fork_rng():
        reference = build_model(run.model, task, dict(run.overrides))
        load_weights(reference, load_checkpoint(run_dir / BEST), run_dir / BEST)
        reference.eval()
        try:
            example, output, artifacts = checked_example(task, reference, val_ds, run_dir, spec_file)
        except SwarmlabError as exc:
            logger.warning(f"warning: train {task.key}/{run.name}: {exc}; the run goes on")
            return
    metadata = {"task": task.key, "model": run.model, "seed": run.seed, "git_commit": git_commit()}
    name = f"{task.key}-{run.name}"  # the Models page lists every task's models together: each says its task
    tracker.log_model(name, CODE, artifacts, example, output, step=result.best_step, metadata=metadata)


def _finish_run(
    task, run: RunSpec, result, summary: dict, tracker, val_ds, work: Path, final: Path, report_root, tracking
):
    """Artifacts to MLflow (curve, the run's spec, the best checkpoint as a model, history), the summary, the seal,
    then the swap into place and the DVC plot's copy of the history."""
    out_dir = work  # renamed to `final` once the reports are written
    if tracking:
        with tempfile.TemporaryDirectory() as tmp:
            curve = plots.training_curve(
                result.history, Path(tmp) / "training_curve.png", f"{task.key}: {run.name}", task.monitor
            )
            shutil.copy(curve, out_dir / "training_curve.png")
            resolved = Path(tmp) / "run_spec.yaml"  # the run's whole configuration, as the stage resolved it
            resolved.write_text(yaml.safe_dump(run.to_dict(), sort_keys=False))
            tracker.log_artifact(curve)
            tracker.log_artifact(resolved)
            _log_model(task, run, result, tracker, val_ds, out_dir, resolved)
        tracker.log_artifact(out_dir / "history.csv")
        # how the run ended are tags (MLflow draws a metric logged once as a one-bar chart); its best validation
        # results are metrics, for the runs table's columns and sorting
        tracker.log_metrics({f"best_val_{k}": v for k, v in result.best_val.items()})
        tracker.set_tags({"stopped": result.stopped, "best_step": result.best_step, "backtracks": result.backtracks})
    atomic_write_text(out_dir / SUMMARY, json.dumps(summary, indent=2) + "\n")  # the record metrics.json is made of
    seal_run(work)  # run.json: best.pt's hash, which evaluate and sample check
    swap_into_place(work, final)  # the new run replaces the previous one only now
    # the DVC plot's copy of the history, only once the run is in place (a rerun copies it again for a kept run)
    atomic_write_text(
        report_dir("train", task.key, report_root) / "history" / f"{run.name}.csv", (final / "history.csv").read_text()
    )
    tracker.finish()


def train_run(task, run: RunSpec, *, resume: bool | str = "auto", work: Path | None = None, **kwargs) -> dict:
    """One run as the scheduler hands it out (in this process or in a Ray worker): ``train_one``, where ``resume="auto"``
    continues the interrupted run in ``.<run>.run/`` when it has a checkpoint and the same fingerprint, and starts
    fresh otherwise. So a run whose worker died is retried from its last checkpoint."""
    if resume == "auto":
        resume = work is not None and same_unfinished(work, kwargs.get("fingerprint", ""), CHECKPOINT)
    return train_one(task, run, resume=resume, **kwargs)
