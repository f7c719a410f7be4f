"""The sweep's MLflow runs two ways, in one process run: the house's trial-side tracker against Ray Tune's own
``MLflowLoggerCallback`` (issue 36 item 4: "Ray Tune's MLflow integration for the sweep's runs; measure, keep what
wins").

The same Tune function trainable (a toy curve, ``--reports`` results per trial, one trial of the grid failing on
purpose) runs as one sweep per variant, each into its own SQLite store:

- ``house``: what ``swarmlab.drive.sweep.trial`` does: the trial opens its own ``MlflowTracker`` run, nested under the
  sweep's parent run, named ``<model>-<trial id>``, logs its settings as params and its curve per optimizer step, and
  closes it; the driver closes a run its trial could not.
- ``ray``: ``ray.air.integrations.mlflow.MLflowLoggerCallback`` at the driver: a run per trial, the config as params,
  every numeric result key as a metric at ``training_iteration``; the parent's id passed as a tag.

It prints wall seconds per sweep (the ratio is the number; the machine is shared), and what each store holds: runs,
nested runs, names, metric keys per run, constant keys logged as metrics, the step the curve is on, and the failed
trial's status.

    python benchmarks/sweep_mlflow_integration.py [--trials 4] [--reports 20] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

EXPERIMENT = "bench-sweep"
STEPS_PER_REPORT = 25


def trainable(config: dict) -> None:
    """A toy trial: ``reports`` evaluations of a decaying loss; lr 0.3 fails at its third evaluation."""
    from ray import tune

    from swarmlab.tracking import MlflowTracker, NullTracker

    trial_id = tune.get_context().get_trial_id()
    tracker = NullTracker()
    if config["variant"] == "house":
        tracker = MlflowTracker(
            EXPERIMENT,
            f"toy-{trial_id}",
            parent_run_id=config["parent"],
            tags={"trial_id": trial_id, "stage": "sweep-trial"},
            uri=config["uri"],
        )
        tracker.log_params({"lr": config["lr"], "reports": config["reports"]})
    try:
        for k in range(1, config["reports"] + 1):
            if config["lr"] == 0.3 and k == 3:
                raise RuntimeError("diverged (on purpose)")
            loss = 1.0 / (1.0 + config["lr"] * k)
            step = k * STEPS_PER_REPORT
            tracker.log_metrics({"val_loss": loss}, step=step)
            tune.report({"val_loss": loss, "step": step, "num_params": 1234, "evaluation": k})
        tracker.finish()
    except BaseException:
        tracker.finish("FAILED")
        raise


def run_sweep(variant: str, root: Path, trials: int, reports: int) -> tuple[float, str, str]:
    from ray import tune
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    from swarmlab.tracking import MlflowTracker

    uri = f"sqlite:///{root / f'{variant}.db'}"
    parent = MlflowTracker(EXPERIMENT, f"sweep-toy | {variant}", uri=uri, tags={"stage": "sweep"})
    callbacks = []
    if variant == "ray":
        callbacks = [MLflowLoggerCallback(uri, experiment_name=EXPERIMENT, tags={"mlflow.parentRunId": parent.run_id})]
    lrs = [0.3] + [0.01 * (k + 1) for k in range(trials - 1)]
    space = {"lr": tune.grid_search(lrs), "variant": variant, "uri": uri, "parent": parent.run_id, "reports": reports}
    t0 = time.perf_counter()
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space=space,
        tune_config=tune.TuneConfig(metric="val_loss", mode="min"),
        run_config=tune.RunConfig(
            name=f"{variant}-{int(t0)}",
            storage_path=str(root / "ray"),
            callbacks=callbacks,
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=0),
        ),
    )
    tuner.fit()
    seconds = time.perf_counter() - t0
    parent.finish()
    return seconds, uri, parent.run_id


def describe(uri: str, parent_id: str) -> dict:
    """What the store holds for the trials of one sweep."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.info.run_id != parent_id]
    keys = [sorted(r.data.metrics) for r in runs]
    constant = set()
    for r in runs:
        for key in r.data.metrics:
            history = client.get_metric_history(r.info.run_id, key)
            if len(history) > 1 and len({m.value for m in history}) == 1:
                constant.add(key)
    curve = client.get_metric_history(runs[0].info.run_id, "val_loss") if runs else []
    return {
        "trial runs": len(runs),
        "nested under the parent": sum(r.data.tags.get("mlflow.parentRunId") == parent_id for r in runs),
        "a run's name": runs[0].info.run_name if runs else "",
        "metric keys per run": statistics.median(len(k) for k in keys) if keys else 0,
        "constants as metrics": ", ".join(sorted(constant)) or "none",
        "curve steps": ",".join(str(m.step) for m in sorted(curve, key=lambda m: m.step)[:3]) + ",...",
        "statuses": ", ".join(sorted(r.info.status for r in runs)),
        "params per run": statistics.median(len(r.data.params) for r in runs) if runs else 0,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=4, help="trials per sweep (one of them fails on purpose)")
    parser.add_argument("--reports", type=int, default=20, help="results each trial reports")
    parser.add_argument("--repeats", type=int, default=2, help="sweeps per variant, alternated; the median counts")
    args = parser.parse_args(argv)
    if args.trials < 2 or args.reports < 3 or args.repeats < 1:
        parser.error("--trials >= 2, --reports >= 3 and --repeats >= 1")
    import ray

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    import mlflow

    from swarmlab.machine import describe_cpu

    print(f"cpu: {describe_cpu()}, {os.cpu_count()} cores; ray {ray.__version__}, mlflow {mlflow.__version__}")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    times: dict[str, list[float]] = {"house": [], "ray": []}
    facts = {}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-mlflow-") as tmp:
        for r in range(args.repeats):
            for variant in ("house", "ray"):
                root = Path(tmp) / f"{variant}{r}"
                root.mkdir()
                seconds, uri, parent = run_sweep(variant, root, args.trials, args.reports)
                times[variant].append(seconds)
                facts[variant] = describe(uri, parent)
    ray.shutdown()
    house, rayt = statistics.median(times["house"]), statistics.median(times["ray"])
    rows = [("sweep wall s (median)", f"{house:.1f}", f"{rayt:.1f}"), ("ray / house", "1.00", f"{rayt / house:.2f}")]
    rows += [(k, str(facts["house"][k]), str(facts["ray"][k])) for k in facts["house"]]
    header = ("", "house (trial-side)", "ray MLflowLoggerCallback")
    width = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    print(f"{args.trials} trials x {args.reports} reports, {args.repeats} sweeps per variant")
    for row in [header, tuple("-" * w for w in width), *rows]:
        print("| " + " | ".join(f"{c:<{w}}" for c, w in zip(row, width)) + " |")


if __name__ == "__main__":
    main()
