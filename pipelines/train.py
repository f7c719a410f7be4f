"""Stage `train@<task>`: every model of ``tasks.<task>.models`` under each of ``tasks.<task>.seeds``, selected on validation.

Per run (``<model>-seed<k>``; the seeds default to the top-level ``seed`` alone): ``outputs/train/<task>/<run>/``
(last.pt, best.pt, history.csv, run.json), an MLflow run of that name in the task's experiment,
``reports/train/<task>/history/<run>.csv`` (DVC plot) and an entry of ``reports/train/<task>/metrics.json``
(DVC metrics; each entry names its model and seed, and the resources it ran with). The test split is not touched here.

The runs go through the scheduler (swarmlab/schedule/scheduler.py): one after another in this process, or fanned out
over a local Ray or a cluster (top-level ``schedule:`` in params.yaml, ``--parallel``, ``--address``, ``$RAY_ADDRESS``;
docs/ray.md). metrics.json is assembled from the finished runs' own records (``summary.json`` in each run folder), so
a rerun keeps every finished run whose settings, code and data are unchanged and continues an interrupted one from
its last checkpoint (swarmlab/records.py, swarmlab/training/task.py); ``--restart`` trains every run over.

    python -m pipelines.train [--task T] [--profile P] [--models a,b] [--resume | --restart] [--parallel N]
                              [--address HOST:PORT] [--no-tracking]
"""

from __future__ import annotations

from pathlib import Path

from swarmlab.engine import resolve_device
from swarmlab.errors import SwarmlabError, cli
from swarmlab.guard import dry_run
from swarmlab.run_config import build_model, model_overrides, train_config
from swarmlab.runs import default_task, make_task, model_names, report_dir, skip_reason, task_runs, write_skipped
from swarmlab.schedule.scheduler import Scheduler
from swarmlab.stage_cli import add_schedule_arguments, params_from, stage_parser
from swarmlab.tracking import check_tracking_uri
from swarmlab.training.run import REPORT_ROOT, TRAIN_ROOT
from swarmlab.training.task import train_task


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
    return train_task(
        params,
        task,
        runs,
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
