"""Every run of one task through the scheduler, and the task's ``reports/train/<task>/metrics.json``.

metrics.json is assembled from the finished runs' own records (``summary.json`` in each run folder), so a rerun keeps
every finished run whose fingerprint (settings, threads, code, data; swarmlab/drive/records.py) is unchanged, continues an
interrupted one from its last checkpoint, and trains every other run from scratch. ``restart`` trains all over;
``resume`` continues every run (a finished one given more epochs or steps, too) and refuses changed settings.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from swarmlab.engine import CHECKPOINT
from swarmlab.io import atomic_write_text
from swarmlab.log import get_logger
from swarmlab.drive.records import data_hash, finished_summary, run_fingerprint, same_unfinished
from swarmlab.drive.runs import report_dir, train_dir
from swarmlab.drive.schedule.scheduler import Job, Scheduler
from swarmlab.drive.training.run import in_progress_dir

logger = get_logger(__name__)

if TYPE_CHECKING:
    from swarmlab.drive.spec import RunSpec


def train_task(
    task,
    runs: list[RunSpec],
    scheduler: Scheduler,
    *,
    model_cfgs: dict,
    baselines: dict,
    models: list[str] | None,
    out_root: Path,
    report_root: Path,
    resume: bool,
    restart: bool,
    tracking: bool,
) -> dict:
    """Train ``runs`` (resolved specs, swarmlab.drive.spec) of ``task`` (checked beforehand: ``model_cfgs`` are their models' configs, ``baselines`` their
    losses at initialisation from the dry run) on ``scheduler``; returns (and writes) metrics.json, keyed by run name.
    ``models``: the ``--models`` subset, or None for the task's whole list (then folders of runs no longer listed go).
    """
    task_name = task.key
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
                train_cfg=run.train,
                threads=record["threads"],
                data=data,
                resources={k: v for k, v in record.items() if k != "parallel"},
            )
            kept = None if (resume or restart) else finished_summary(final, fingerprint)
            if kept is not None:
                summaries[run.name] = kept
                atomic_write_text(reports / "history" / f"{run.name}.csv", (final / "history.csv").read_text())
                logger.info(f"[train {task_name}] keep  {run.name}: finished with the same settings, code and data")
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

        scheduler.execute("swarmlab.drive.training.run:train_run", jobs, tracking=tracking, on_done=done)
    if models is None:  # the task's whole list ran: folders of runs no longer listed go (the output persists in DVC)
        current = {run.name for run in runs}
        for entry in [*(root.iterdir() if root.is_dir() else []), *((reports / "history").glob("*.csv"))]:
            if entry.name not in current and entry.name.removesuffix(".csv") not in current:
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
    return write_metrics(metrics_path, summaries, runs)


def write_metrics(path: Path, summaries: dict, runs: list[RunSpec]) -> dict:
    """``metrics.json``: the runs' records in the order of the task's runs (others, of a ``--models`` rerun, after)."""
    order = [r.name for r in runs]
    ordered = {k: summaries[k] for k in order if k in summaries} | {
        k: v for k, v in summaries.items() if k not in order
    }
    atomic_write_text(path, json.dumps(ordered, indent=2) + "\n")
    return ordered
