"""Stage `train@<task>`: every model of ``tasks.<task>.models`` under each of ``tasks.<task>.seeds``, selected on validation.

Per run (``<model>-seed<k>``; the seeds default to the top-level ``seed`` alone): ``outputs/train/<task>/<run>/``
(last.pt, best.pt, history.csv, run.json), an MLflow run of that name in the task's experiment,
``reports/train/<task>/history/<run>.csv`` (DVC plot) and an entry of ``reports/train/<task>/metrics.json``
(DVC metrics; each entry names its model and seed, and the resources it ran with). The test split is not touched here.

The runs go through the scheduler (swarmlab/drive/schedule/scheduler.py): one after another in this process, or fanned out
over a local Ray or a cluster (top-level ``schedule:`` in params.yaml, ``--parallel``, ``--address``, ``$RAY_ADDRESS``;
docs/ray.md). metrics.json is assembled from the finished runs' own records (``summary.json`` in each run folder), so
a rerun keeps every finished run whose settings, code and data are unchanged and continues an interrupted one from
its last checkpoint (swarmlab/drive/records.py, swarmlab/drive/training/task.py); ``--restart`` trains every run over.

    python -m pipelines.train [--task T] [--profile P] [--models a,b] [--resume | --restart] [--parallel N]
                              [--address HOST:PORT] [--no-tracking]
"""

from __future__ import annotations

from pathlib import Path

from swarmlab.engine import resolve_device
from swarmlab.errors import SwarmlabError, cli
from swarmlab.drive.guard import dry_run
from swarmlab.drive.runs import report_dir, task_writer, write_skipped
from swarmlab.drive.schedule.scheduler import Scheduler
from swarmlab.drive.spec import resolve
from swarmlab.drive.stage_cli import add_schedule_arguments, add_task_argument, params_from, stage_parser
from swarmlab.tracking import check_tracking_uri
from swarmlab.drive.training.run import REPORT_ROOT, TRAIN_ROOT
from swarmlab.drive.training.task import train_task


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

    Everything is checked before any data is read or any output touched: the task, its models and the engine's
    settings (resolved once, here: swarmlab.drive.spec), the device, the schedule and the tracking store; then the dry run
    builds each model once against the data and runs one tiny batch of it.
    """
    if resume and restart:
        raise SwarmlabError("--resume and --restart contradict each other: pick one")
    spec = resolve(
        params,
        "train",
        task_name,
        models=models,
        options=options,
        tracking=tracking,
        parallel=parallel,
        address=address,
    )
    task = spec.task.build()
    if spec.skip:
        return write_skipped(
            "train",
            task.key,
            spec.skip,
            report_root=report_root,
            folders=(Path(out_root) / task.key, report_dir("train", task.key, report_root) / "history"),
        )
    for device in dict.fromkeys(run.train.device for run in spec.runs):
        resolve_device(device)
    scheduler = Scheduler(spec, task)
    if tracking:
        check_tracking_uri()
    model_cfgs, baselines = dry_run(task, spec.runs)  # every model, one tiny batch each, before the first run starts
    return train_task(
        task,
        list(spec.runs),
        scheduler,
        model_cfgs=model_cfgs,
        baselines=baselines,
        models=models,
        out_root=out_root,
        report_root=report_root,
        resume=resume,
        restart=restart,
        tracking=tracking,
    )


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    add_task_argument(parser, "to train")
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
    with task_writer(params, args.task, "train"):
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
