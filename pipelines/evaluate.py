"""Stage `evaluate@<task>`: each trained run's best checkpoint on the test split, once, plus speed and memory.

The task's test metrics (for text classification: accuracy, precision, recall, F1, confusion matrix) and
its own figures (``task.report``), latency per batch (mean, p50, p95 after warm-up, with device
synchronisation), throughput (samples/s; on CUDA a second pass without per-batch syncs) and peak
memory (process peak RSS on CPU, ``torch.cuda.max_memory_allocated`` on GPU). Writes
``reports/evaluate/<task>/metrics.json`` (DVC metrics; keyed by run, ``<model>-seed<k>``, each entry naming its
model and seed) and ``reports/evaluate/<task>/plots/``; logs to the run's MLflow training run. Each run's read of the
test split is checked against, and recorded in, ``reports/evaluate/<task>/test_reads.json``; once the evaluation has
succeeded it is appended to the repository's log of test reads, ``reports/test_reads.jsonl``
(swarmlab/drive/report/testsplit.py; an ablation point's lines name its grid and point, ``$SWARMLAB_ABLATION_GRID`` and
``$SWARMLAB_ABLATION_POINT``). A read the record refuses (the same run under other training settings) needs ``--retest``,
except inside ``dvc exp run``, where it is exploratory: logged with the experiment's name, and it decides no claim.

The runs go through the same scheduler as training (swarmlab/drive/schedule/scheduler.py: in this process, or fanned out
over Ray, each in a fresh worker process so that its peak memory is its own); each entry records its ``resources``.
One run: swarmlab/drive/evaluation/run.py; speed and memory: swarmlab/drive/evaluation/measure.py.

    python -m pipelines.evaluate [--task T] [--profile P] [--parallel N] [--address HOST:PORT] [--no-tracking]
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from swarmlab.engine import BEST, resolve_device
from swarmlab.errors import SwarmlabError, cli
from swarmlab.drive.evaluation.run import TRAIN_ROOT
from swarmlab.io import atomic_dir
from swarmlab.paths import REPORTS_DIR, git_commit
from swarmlab.drive.report.testsplit import (
    append_reads,
    check_reads,
    experiment,
    load_reads,
    log_line,
    read_entry,
    read_result,
    where,
    write_reads,
)
from swarmlab.drive.run_config import build_model
from swarmlab.drive.runs import report_dir, task_writer, train_dir, write_skipped
from swarmlab.drive.schedule.scheduler import Job, Scheduler
from swarmlab.drive.spec import resolve
from swarmlab.drive.stage_cli import add_schedule_arguments, add_task_argument, params_from, stage_parser
from swarmlab.tracking import check_tracking_uri


def evaluate(
    params: dict,
    task_name: str | None = None,
    *,
    options: dict | None = None,
    train_root: Path = TRAIN_ROOT,
    report_root: Path = REPORTS_DIR,
    tracking: bool = True,
    retest: bool = False,
    parallel: int | None = None,
    address: str | None = None,
) -> dict:
    spec = resolve(
        params, "evaluate", task_name, options=options, tracking=tracking, parallel=parallel, address=address
    )
    task = spec.task.build()
    task_name = task.key
    if spec.skip:
        earlier = load_reads(report_dir("evaluate", task_name, report_root))  # the test-read record outlives a skip
        with atomic_dir(report_dir("evaluate", task_name, report_root)) as tmp:
            (tmp / "plots").mkdir()
            (tmp / "items").mkdir()
            write_reads(tmp, earlier)
        return write_skipped("evaluate", task_name, spec.skip, report_root=report_root)
    runs = list(spec.runs)
    for run in {r.model: r for r in runs}.values():  # every model's config, once, before any test batch
        build_model(run.model, task, dict(run.overrides))
    for run in runs:  # and every checkpoint
        ckpt = train_dir(task.key, run.name, train_root) / BEST
        if not ckpt.is_file():
            raise SwarmlabError(f"{ckpt} is missing: train {run.name} on {task.key} first (dvc repro train@{task.key})")
    for device in dict.fromkeys(run.train.device for run in runs):
        resolve_device(device)
    scheduler = Scheduler(spec, task)
    if tracking:
        check_tracking_uri()
    folder = Path(report_dir("evaluate", task_name, report_root)).resolve()
    options = dataclasses.asdict(task.options)
    overrides = {r.model: dict(r.overrides) for r in runs}
    entries = [
        read_entry(
            task=task_name,
            registered=task.name,
            options=options,
            model=r.model,
            overrides=overrides[r.model],
            seed=r.seed,
            train=dataclasses.asdict(r.train),
            run=r.name,
            profile=r.profile,
            commit=git_commit(),
        )
        for r in runs
    ]
    # a second look at a test split is refused unless named, or exploratory inside `dvc exp run` (decides no claim)
    reads = check_reads(folder, entries, retest=retest, experiment=experiment())
    exploratory = {r["run"]: r["experiment"] for r in reads[len(load_reads(folder)) :] if r.get("experiment")}
    train_root = Path(train_root).resolve()
    with scheduler, atomic_dir(folder) as tmp:  # all of it, or the previous reports
        jobs = [
            Job(
                run,
                dict(
                    plots_dir=tmp / "plots", train_root=train_root, tracking=tracking, resources=scheduler.record(run)
                ),
            )
            for run in runs
        ]
        results = scheduler.execute(
            "swarmlab.drive.evaluation.run:evaluate_one", jobs, tracking=tracking, fresh_workers=True
        )
        (tmp / "metrics.json").write_text(json.dumps(results, indent=2) + "\n")
        write_reads(tmp, reads)
    # the reports are in place: every read goes to the repository's log, reproductions and re-reads alike
    ablation = {k: os.environ.get(f"SWARMLAB_ABLATION_{k.upper()}") for k in ("grid", "point")}  # ablation_runs.py
    fingerprint = task.data_fingerprint()
    append_reads(
        [
            log_line(
                entry,
                task=task_name,
                registered=task.name,
                options=options,
                data_fingerprint=fingerprint,
                overrides=overrides[r.model],
                where=where(folder),
                result=read_result(results.get(r.name)),
                train_commit=train_commit(train_dir(task.key, r.name, train_root)),
                **{k: v for k, v in ablation.items() if v},
                **({"experiment": exploratory[r.name]} if r.name in exploratory else {}),
            )
            for r, entry in zip(runs, entries)
        ]
    )
    return results


def train_commit(run_dir: Path) -> str | None:
    """The commit the run was trained at, as its ``run.json`` (or its metrics entry, ``summary.json``) records it
    (swarmlab/drive/training/run.py); None for a run trained before either did. Read here, not through swarmlab.drive.records,
    whose fingerprint code is no dependency of this stage."""
    for name in ("run.json", "summary.json"):
        try:
            commit = json.loads((Path(run_dir) / name).read_text()).get("git_commit")
        except (OSError, ValueError, AttributeError):
            continue
        if commit:
            return commit
    return None


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    add_task_argument(parser, "to evaluate")
    add_schedule_arguments(parser)
    parser.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    parser.add_argument(
        "--retest",
        action="store_true",
        help="allow a second read of a test split under other training settings (counted in the report)",
    )
    args = parser.parse_args(argv)
    params = params_from(args)
    with task_writer(params, args.task, "evaluate"):
        evaluate(
            params,
            args.task,
            tracking=not args.no_tracking,
            retest=args.retest,
            parallel=args.parallel,
            address=args.address,
        )


if __name__ == "__main__":
    main()
