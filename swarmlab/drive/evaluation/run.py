"""One trained run on the test split, as the scheduler hands it out (in this process or a fresh Ray worker): its
best checkpoint, the task's test metrics and figures, per-item scores for the report's intervals, speed and memory,
logged to the run's MLflow training run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from swarmlab.engine import compiled, on_device, resolve_amp, resolve_device
from swarmlab.drive.evaluation.measure import measure, peak_memory_mb
from swarmlab.log import get_logger
from swarmlab.paths import OUTPUTS_DIR, git_commit
from swarmlab.drive.report.testsplit import write_items
from swarmlab.drive.run_config import load_best, training_run_tracker
from swarmlab.drive.runs import train_dir

logger = get_logger(__name__)

if TYPE_CHECKING:
    from swarmlab.drive.spec import RunSpec

TRAIN_ROOT = OUTPUTS_DIR / "train"


# the numbers of an evaluation that are its settings or its model's size, not measurements
EVALUATE_CONSTANTS = ("seed", "num_params", "test_rows", "batch_size", "batches")


def evaluate_one(
    task,
    run: RunSpec,
    *,
    plots_dir: Path,
    train_root: Path = TRAIN_ROOT,
    tracking: bool = True,
    resources: dict | None = None,
) -> dict:
    """The test metrics, speed and memory of one run (``run``: its resolved spec, swarmlab.drive.spec); its figures go to ``plots_dir``; ``resources`` (what the
    scheduler gave it) are recorded in its entry."""
    name = run.name
    cfg = run.train
    model = load_best(task, run, train_root)  # checks best.pt against the SHA-256 its run.json sealed
    sealed = json.loads((train_dir(task.key, name, train_root) / "run.json").read_text()).get("best_sha256")
    device = resolve_device(cfg.device)
    amp = resolve_amp(cfg.amp, device)
    if cfg.num_threads:  # as fit: the latency is measured with the threads the model trained with
        torch.set_num_threads(cfg.num_threads)
    model.to(device)
    test_ds = on_device(task.eval_data("test", model.cfg), device)
    ev = run.evaluate
    metrics, meter, speed = measure(
        compiled(model, cfg.compile),
        task,
        test_ds,
        batch_size=ev["batch_size"],
        warmup_batches=ev["warmup_batches"],
        device=device,
        amp=amp,
    )
    memory_mb, memory_kind = peak_memory_mb(device)
    result = {
        "model": run.model,
        "seed": run.seed,
        **{f"test_{k}": v for k, v in metrics.items()},
        **speed,
        "peak_memory_mb": round(memory_mb, 1),
        "peak_memory_kind": memory_kind,
        "device": str(device),
        "bf16_autocast": amp,
        "num_params": model.get_num_params(),
        "test_rows": len(test_ds),
        **meter.extras(),
        "git_commit": git_commit(),
        "best_sha256": sealed,  # the checkpoint read: a run parked without it keeps this result (pipelines/evaluate.py)
        **({"resources": resources} if resources else {}),
    }
    plots = task.report(meter, plots_dir, title=name, name=name)
    write_items(plots_dir.parent, name, meter, meter.batch_times)
    if tracking:
        tracker = training_run_tracker(task.key, run, name, train_root, stage="evaluate")
        numbers = {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        # what the evaluation was run with is a param (MLflow's charts would draw each as a bar of one value)
        tracker.log_params({"evaluate": {k: numbers.pop(k) for k in EVALUATE_CONSTANTS if k in numbers}})
        tracker.log_metrics(numbers)
        tracker.set_tags(
            {"git_commit": result["git_commit"], "num_params": result["num_params"], "device": str(device)}
        )
        for plot in plots:
            tracker.log_artifact(plot)
        tracker.finish()
    shown = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k in (task.monitor, "loss", "f1"))
    logger.info(
        f"evaluate {task.key}/{name}: test {shown}  latency p50 {speed['latency_ms_p50']:.1f} ms / batch of "
        f"{ev['batch_size']}  {speed['throughput_samples_per_s']:.0f} samples/s  peak {memory_mb:.0f} MB ({memory_kind})"
    )
    return result
