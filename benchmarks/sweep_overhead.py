"""Per-trial overhead of a Ray Tune sweep over calling the training engine directly, in one process run.

Runs the sweep of ``--profile`` (default smoke) with one trial at a time and no early stopping, then trains
the very same configurations with ``engine.fit`` in this process, with and without MLflow, and prints
seconds per trial and the difference. Needs the task's data (for imdb, the default task: ``dvc repro tokenize`` or
``python -m pipelines.data --task imdb --profile smoke``); ``--task toy_counting`` generates its own.

    python benchmarks/sweep_overhead.py [--profile smoke] [--task T] [--trials 2,6] [--epochs 1] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from swarmlab.engine import TrainConfig, fit
from swarmlab.drive.params import load_params
from swarmlab.drive.run_config import build_model
from swarmlab.drive.runs import make_task
from swarmlab.drive.schedule.cluster import connect_ray
from swarmlab.seeds import set_seeds
from swarmlab.drive.sweep.setup import check_settings, model_space, trial_train_config
from swarmlab.drive.sweep.trial import load_split
from swarmlab.drive.sweep.tune import load_state, sweep_models
from swarmlab.tracking import MlflowTracker, NullTracker


def direct_fits(configs: list[dict], *, space, task, params: dict, tracking_uri: str | None) -> list[float]:
    """Seconds of each ``fit`` of ``configs`` (decoded values), done the way a trial does it, in this process."""
    import torch

    experiment = f"{task.key}-direct"
    parent = MlflowTracker(experiment, "direct", uri=tracking_uri) if tracking_uri else None
    times = []
    for values in configs:
        t0 = time.perf_counter()
        train_kw, model_kw = space.split(values)
        cfg = TrainConfig(**{**trial_train_config(params, task.key, space.model), **train_kw, "num_threads": 1})
        set_seeds(cfg.seed)
        model = build_model(space.model, task, {**space.model_base, **model_kw})
        train_ds, val_ds = load_split(task, "train", model.cfg), load_split(task, "val", model.cfg)
        tracker = (
            MlflowTracker(experiment, "trial", parent_run_id=parent.run_id, uri=tracking_uri)
            if parent
            else NullTracker()
        )
        if parent:
            tracker.log_params(values)
        with tempfile.TemporaryDirectory() as out:
            result = fit(model, task, train_ds, val_ds, cfg, out, tracker=tracker)
        tracker.log_metrics({f"best_val_{k}": v for k, v in result.best_val.items()})
        tracker.finish()
        times.append(time.perf_counter() - t0)
    torch.set_num_threads(os.cpu_count() or 1)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--task", default=None, help="the task to sweep (default: params `task`)")
    parser.add_argument(
        "--trials",
        default="2,6",
        help="two sweep sizes: their difference separates the fixed cost "
        "of a sweep from the cost of each further trial",
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--data-dir", default=None, help="the task's data folder (default: its data_dir option)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.trials.split(",")]
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("SWARMLAB_PROGRESS", "0")
    options = {"data_dir": str(Path(args.data_dir).resolve())} if args.data_dir else None
    params = load_params(profile=args.profile)
    task = make_task(params, args.task or params["task"], options=options)
    params["sweep"].update(
        max_concurrent=1,
        cpus_per_trial=1,
        gpus_per_trial=0,
        max_epochs=args.epochs,
        grace_period=args.epochs,
        startup_trials=max(sizes),
    )
    model = params["sweep"]["models"][0]
    if model == "all" or model not in params["tasks"][task.key]["models"]:
        model = params["tasks"][task.key]["models"][0]  # sweep.models names another track's models
    params["sweep"]["models"] = [model]
    # a task without a space of its own (toy_counting) sweeps the learning rate alone
    params["sweep"]["spaces"].setdefault(task.key, {"default": {"lr": {"loguniform": [3.0e-4, 3.0e-3]}}})
    space = model_space(model, task, params)

    t0 = time.perf_counter()
    connect_ray(None)
    ray_init_s = time.perf_counter() - t0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # warm torch up in this process, so the direct side is not charged for it
        direct_fits(
            [space.decode({d.name: (d.values[0] if d.values else d.low) for d in space.dims})],
            space=space,
            task=task,
            params=params,
            tracking_uri=None,
        )
        for tracking in (False, True):
            uri = f"sqlite:///{tmp / f'mlruns-{tracking}.db'}"
            os.environ["MLFLOW_TRACKING_URI"] = uri
            if tracking:  # an existing store: its one-time table creation is not a per-sweep cost
                from mlflow.tracking import MlflowClient

                MlflowClient(tracking_uri=uri).search_experiments()
            for n in sizes:
                params["sweep"]["num_samples"] = n
                out = tmp / f"out-{tracking}-{n}"
                t0 = time.perf_counter()
                sweep_models(  # what `python -m pipelines.sweep` runs once its checks pass, on the Ray started above
                    [model],
                    {model: space},
                    task=task,
                    params=params,
                    cfg=check_settings(params),
                    ray_dir=out / task.key / "ray",
                    state=load_state(out / task.key, task.key, resume=False),
                    address=None,
                    num_cpus=None,
                    resume=False,
                    tracking=tracking,
                    lines=True,
                )
                tune_s = time.perf_counter() - t0
                trial_dirs = sorted((out / task.key / "ray" / model).glob("trial_*"))
                configs = [space.decode(json.loads((d / "params.json").read_text())) for d in trial_dirs]
                direct_s = sum(
                    direct_fits(configs, space=space, task=task, params=params, tracking_uri=uri if tracking else None)
                )
                rows.append(("mlflow" if tracking else "off", len(configs), direct_s, tune_s))
    import ray

    ray.shutdown()
    print(
        f"\nRay Tune vs engine.fit, profile {args.profile}, {args.epochs} epoch(s) per trial, 1 trial at a time, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; ray.init once: {ray_init_s:.1f} s (not counted)"
    )
    print(
        f"{'tracking':<9} {'trials':>6} {'direct s':>9} {'tune s':>8} {'overhead s':>11} {'per trial':>10} {'ratio':>6}"
    )
    for label, n, d, t in rows:
        print(f"{label:<9} {n:>6} {d:>9.1f} {t:>8.1f} {t - d:>11.1f} {(t - d) / n:>10.2f} {t / d:>6.2f}")
    print(f"{'tracking':<9} {'fixed per sweep s':>18} {'marginal per trial s':>21}")
    for label in ("off", "mlflow"):
        (n1, d1, t1), (n2, d2, t2) = [(n, d, t) for lab, n, d, t in rows if lab == label]
        marginal = ((t2 - d2) - (t1 - d1)) / (n2 - n1)
        print(f"{label:<9} {(t1 - d1) - marginal * n1:>18.1f} {marginal:>21.2f}")


if __name__ == "__main__":
    main()
