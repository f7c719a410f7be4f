"""Stage `sample@<task>`: samples from each trained model's best checkpoint, drawn and written by the task.

For every model of ``tasks.<task>.models`` the stage loads ``outputs/train/<task>/<model>/best.pt`` (as the
evaluate stage does) and calls ``Task.sample`` with an empty folder ``reports/sample/<task>/<model>/`` (for
image generation: ``samples.png``, one row per class, and ``samples.npz``), then writes
``reports/sample/<task>/summary.json``. The whole ``reports/sample/<task>/`` folder is built in a temporary
sibling and swapped in on success, so a failed run leaves the previous samples as they were. Settings: the
``sample`` section (num_samples, temperature, num_threads); the draws are seeded with ``seed``; the device is
``train.device``. Each model's samples (its whole folder) are then logged to its MLflow training run (the run id its
``run.json`` records; a run trained without tracking gets a run of its own), under ``samples/``.

    python -m pipelines.sample [--task T] [--profile P] [--no-tracking]
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import torch

from swarmlab.drive.stage_cli import add_task_argument, params_from, stage_parser
from swarmlab.paths import OUTPUTS_DIR, REPORTS_DIR, git_commit
from swarmlab.drive.runs import check_stage_serves, default_task, report_dir
from swarmlab.drive.run_config import load_best, training_run_tracker
from swarmlab.drive.sections import section, seed
from swarmlab.drive.spec import resolve
from swarmlab.engine import resolve_device
from swarmlab.errors import cli
from swarmlab.io import atomic_dir, atomic_write_text
from swarmlab.tracking import check_tracking_uri
from tasks.base import Task

TRAIN_ROOT = OUTPUTS_DIR / "train"


def sample(
    params: dict,
    task_key: str | None = None,
    *,
    options: dict | None = None,
    train_root: Path = TRAIN_ROOT,
    report_root: Path = REPORTS_DIR,
    tracking: bool = True,
) -> dict:
    # a task that keeps the contract's default `sample` generates nothing
    generative = lambda cls: cls.sample is not Task.sample  # noqa: E731
    check_stage_serves(params, default_task(params, task_key), "sample", generative, "generative")
    spec = resolve(params, "sample", task_key, options=options, tracking=False, schedule=False)
    task = spec.task.build()
    settings = dataclasses.asdict(section(params, "sample"))  # every value checked before a checkpoint is read
    task.check_sample_count(settings["num_samples"])
    if tracking:
        check_tracking_uri()
    devices = {run.name: resolve_device(run.train.device) for run in spec.runs}  # where each run trained
    if settings["num_threads"]:
        # the incremental sampler runs thousands of tiny steps: on a CPU more threads mostly add overhead
        torch.set_num_threads(settings["num_threads"])
    models = {run.name: load_best(task, run, train_root) for run in spec.runs}  # every checkpoint first
    summaries = {}
    with atomic_dir(report_dir("sample", task.key, report_root)) as tmp:
        for name, model in models.items():
            device = devices[name]
            model.to(device).eval()
            (tmp / name).mkdir()
            t0 = time.perf_counter()
            summary = task.sample(
                model,
                tmp / name,
                num_samples=settings["num_samples"],
                temperature=settings["temperature"],
                seed=seed(params),
                device=device,
                name=name,
            )
            summaries[name] = {
                **summary,
                "seconds": round(time.perf_counter() - t0, 2),
                "device": str(device),
                "num_threads": torch.get_num_threads(),
                "git_commit": git_commit(),
            }
            print(
                f"sample {task.key}/{name}: {summary.get('samples', '?')} samples in {summaries[name]['seconds']:.1f} s "
                f"-> {report_dir('sample', task.key, report_root) / name}",
                flush=True,
            )
        atomic_write_text(tmp / "summary.json", json.dumps(summaries, indent=2) + "\n")
    if tracking:  # the samples are in place: each model's go to its training run
        for run in spec.runs:
            log_samples(task, run, report_dir("sample", task.key, report_root) / run.name, train_root)
    return summaries


def log_samples(task, run, folder: Path, train_root: Path) -> None:
    """``folder``'s files as artifacts (``samples/``) of the run's MLflow training run (named in its ``run.json``), or
    of a new run named as training names it when the run recorded none."""
    tracker = training_run_tracker(task.key, run, run.name, train_root)
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        tracker.log_artifact(path, "samples")
    tracker.set_tags({"samples": str(folder)})
    tracker.finish()


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    add_task_argument(parser, "whose trained models to sample")
    parser.add_argument("--no-tracking", action="store_true", help="do not log the samples to MLflow")
    args = parser.parse_args(argv)
    sample(params_from(args), args.task, tracking=not args.no_tracking)


if __name__ == "__main__":
    main()
