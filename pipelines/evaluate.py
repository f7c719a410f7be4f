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

A run whose ``best.pt`` is gone keeps the result this folder holds for it when that result read the checkpoint its
``run.json`` sealed (the same SHA-256) under the same read (identity and training settings): scripts/park.py parks a
long claims piece's evaluated runs without their checkpoints, which are too big for git, and the piece's next session
evaluates only the rest. Such a result is not read again and adds no line to the log. ``--finished`` evaluates the runs
that have finished training and leaves the others out (park.py runs it before parking).

The runs go through the same scheduler as training (swarmlab/drive/schedule/scheduler.py: in this process, or fanned out
over Ray, each in a fresh worker process so that its peak memory is its own); each entry records its ``resources``.
One run: swarmlab/drive/evaluation/run.py; speed and memory: swarmlab/drive/evaluation/measure.py.

    python -m pipelines.evaluate [--task T] [--profile P] [--parallel N] [--address HOST:PORT] [--no-tracking]
                                 [--retest] [--finished]
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

from swarmlab.engine import BEST, resolve_device
from swarmlab.errors import SwarmlabError, cli
from swarmlab.drive.evaluation.run import TRAIN_ROOT
from swarmlab.io import atomic_dir
from swarmlab.paths import REPORTS_DIR, git_commit
from swarmlab.drive.report.testsplit import (
    ITEMS,
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
    finished: bool = False,
    parallel: int | None = None,
    address: str | None = None,
) -> dict:
    """Evaluate every run of the task (``finished``: those that have finished training; at least one); returns (and
    writes) ``metrics.json``, keyed by run name, the results kept for runs parked without their checkpoints included."""
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
    folder = Path(report_dir("evaluate", task_name, report_root)).resolve()
    train_root = Path(train_root).resolve()
    options = dataclasses.asdict(task.options)
    overrides = {r.model: dict(r.overrides) for r in runs}
    entries = {
        r.name: read_entry(
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
    }
    kept = kept_results(folder, runs, entries, lambda r: train_dir(task.key, r.name, train_root))
    missing = [r for r in runs if r.name not in kept and not (train_dir(task.key, r.name, train_root) / BEST).is_file()]
    if finished and len(missing) == len(runs):
        raise SwarmlabError(
            f"no run of {task.key} has finished training under {train_root / task.key}: nothing to evaluate"
        )
    if missing and not finished:  # every checkpoint, before any test batch
        ckpt = train_dir(task.key, missing[0].name, train_root) / BEST
        raise SwarmlabError(
            f"{ckpt} is missing: train {missing[0].name} on {task.key} first (dvc repro train@{task.key}), or restore "
            "its parked evaluation (scripts/park.py)"
        )
    runs = [
        r for r in runs if r.name not in {m.name for m in missing}
    ]  # --finished: the runs still training are left out
    fresh = [r for r in runs if r.name not in kept]
    for device in dict.fromkeys(run.train.device for run in runs):
        resolve_device(device)
    scheduler = Scheduler(spec, task)
    if tracking:
        check_tracking_uri()
    # a second look at a test split is refused unless named, or exploratory inside `dvc exp run` (decides no claim)
    reads = check_reads(folder, [entries[r.name] for r in fresh], retest=retest, experiment=experiment())
    exploratory = {r["run"]: r["experiment"] for r in reads[len(load_reads(folder)) :] if r.get("experiment")}
    with scheduler, atomic_dir(folder) as tmp:  # all of it, or the previous reports
        for name in kept:  # a parked run's result, items and figures, as they were
            (tmp / ITEMS).mkdir(exist_ok=True)
            shutil.copy2(folder / ITEMS / f"{name}.npz", tmp / ITEMS / f"{name}.npz")
            for plot in (folder / "plots").glob(f"*{name}.*"):
                if plot.stem == name or plot.stem.endswith(f"_{name}"):
                    (tmp / "plots").mkdir(exist_ok=True)
                    shutil.copy2(plot, tmp / "plots" / plot.name)
        jobs = [
            Job(
                run,
                dict(
                    plots_dir=tmp / "plots", train_root=train_root, tracking=tracking, resources=scheduler.record(run)
                ),
            )
            for run in fresh
        ]
        done = scheduler.execute(
            "swarmlab.drive.evaluation.run:evaluate_one", jobs, tracking=tracking, fresh_workers=True
        )
        results = {r.name: kept[r.name] if r.name in kept else done[r.name] for r in runs}
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
            for r, entry in ((r, entries[r.name]) for r in fresh)
        ]
    )
    return results


def kept_results(folder: Path, runs: list, entries: dict, run_dir) -> dict[str, dict]:
    """The results ``folder`` holds for runs whose ``best.pt`` is gone (parked without it: scripts/park.py), by run
    name: kept only when the result read the checkpoint the run's ``run.json`` sealed, under the same read (the folder's
    record of reads has this run's identity and training settings), and its per-item scores are there. ``entries``:
    each run's read entry; ``run_dir(run)``: its training folder."""
    try:
        earlier = json.loads((folder / "metrics.json").read_text())
    except (OSError, ValueError):
        return {}
    reads = load_reads(folder)
    kept = {}
    for r in runs:
        if (run_dir(r) / BEST).is_file() or not isinstance(earlier, dict) or not isinstance(earlier.get(r.name), dict):
            continue
        try:
            sealed = json.loads((run_dir(r) / "run.json").read_text()).get("best_sha256")
        except (OSError, ValueError, AttributeError):
            continue
        e = entries[r.name]
        same_read = any(
            x.get("run") == r.name and (x["identity"], x["train"]) == (e["identity"], e["train"]) for x in reads
        )
        if (
            sealed
            and earlier[r.name].get("best_sha256") == sealed
            and same_read
            and (folder / ITEMS / f"{r.name}.npz").is_file()
        ):
            kept[r.name] = earlier[r.name]
    return kept


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
    parser.add_argument(
        "--finished",
        action="store_true",
        help="evaluate the runs that have finished training and leave the others out (scripts/park.py runs it)",
    )
    args = parser.parse_args(argv)
    params = params_from(args)
    with task_writer(params, args.task, "evaluate"):
        evaluate(
            params,
            args.task,
            tracking=not args.no_tracking,
            retest=args.retest,
            finished=args.finished,
            parallel=args.parallel,
            address=args.address,
        )


if __name__ == "__main__":
    main()
