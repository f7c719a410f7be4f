"""Stage `evaluate`: each trained model's best checkpoint on the test split, once, plus speed and memory.

Test metrics (accuracy, precision, recall, F1, confusion matrix) and latency per batch (mean, p50, p95
after warm-up, with device synchronisation), throughput (samples/s) and peak memory (process peak RSS
on CPU, ``torch.cuda.max_memory_allocated`` on GPU). Writes ``reports/evaluate/metrics.json`` (DVC
metrics) and ``reports/evaluate/confusion_<model>.png``; logs to the model's MLflow training run.
"""
from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import torch

from pipelines.common.cli import params_from, stage_parser
from pipelines.common.engine import BEST, batch_indices, load_checkpoint, resolve_amp, resolve_device
from pipelines.common.errors import SwarmlabError, atomic_write_text, cli
from pipelines.common.paths import REPORTS_DIR, git_commit
from pipelines.common.tracking import make_tracker
from pipelines.train import TOKENIZED_DIR, TRAIN_DIR, build_model, run_name

REPORT_DIR = REPORTS_DIR / "evaluate"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_mb(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_memory_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return (rss / 2**20 if sys.platform == "darwin" else rss / 2**10), "process_peak_rss"


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile of an ascending list."""
    pos = (len(sorted_values) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@torch.no_grad()
def measure(model, task, data, *, batch_size: int, warmup_batches: int, device: torch.device, amp: bool = False):
    """One pass over ``data``: task metrics plus per-batch wall time (after ``warmup_batches`` untimed ones)."""
    model.eval().to(device)
    batches = batch_indices(len(data), batch_size, shuffle=False)
    for idx in batches[:warmup_batches]:  # warm-up: allocator, kernels, caches
        batch = {k: v.to(device) for k, v in data.get_batch(idx).items()}
        task.forward(model, batch)
    _sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    meter, times = task.new_metrics(), []
    for idx in batches:
        batch = {k: v.to(device) for k, v in data.get_batch(idx).items()}
        _sync(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            out = task.forward(model, batch)
        _sync(device)
        times.append(time.perf_counter() - t0)
        meter.update(out.float(), batch, task.loss(out, batch))
    ordered = sorted(times)
    speed = {
        "latency_ms_mean": 1000 * sum(times) / len(times),
        "latency_ms_p50": 1000 * percentile(ordered, 0.50),
        "latency_ms_p95": 1000 * percentile(ordered, 0.95),
        "throughput_samples_per_s": len(data) / sum(times),
        "batch_size": batch_size,
        "batches": len(times),
    }
    return meter.compute(), meter, speed


def evaluate_one(name: str, params: dict, *, data_dir: Path = TOKENIZED_DIR, train_root: Path = TRAIN_DIR,
                 report_dir: Path = REPORT_DIR, tracking: bool = True) -> dict:
    from tasks import get_task

    task = get_task(params["task"])
    ckpt = train_root / name / BEST
    if not ckpt.is_file():
        raise SwarmlabError(f"{ckpt} is missing: train {name} first (dvc repro train)")
    meta = json.loads((data_dir / "meta.json").read_text())
    model = build_model(name, task, meta, params["train"]["model_overrides"])
    model.load_state_dict(load_checkpoint(ckpt))
    device = resolve_device(params["train"]["device"])
    amp = resolve_amp(params["train"]["amp"], device)
    test_ds = task.load_split(data_dir, "test", model.cfg.seq_len)
    ev = params["evaluate"]
    metrics, meter, speed = measure(model, task, test_ds, batch_size=ev["batch_size"], warmup_batches=ev["warmup_batches"],
                                    device=device, amp=amp)
    memory_mb, memory_kind = peak_memory_mb(device)
    result = {**{f"test_{k}": v for k, v in metrics.items()}, **speed, "peak_memory_mb": round(memory_mb, 1),
              "peak_memory_kind": memory_kind, "device": str(device), "bf16_autocast": amp, "num_params": model.get_num_params(),
              "test_rows": len(test_ds), "confusion_matrix": meter.matrix.tolist(), "git_commit": git_commit()}
    report_dir.mkdir(parents=True, exist_ok=True)
    from pipelines.common.plots import confusion_matrix

    (report_dir / "plots").mkdir(exist_ok=True)
    plot = confusion_matrix(meter.matrix, list(task.class_names), report_dir / "plots" / f"confusion_{name}.png",
                            f"{name}: test accuracy {metrics['accuracy']:.4f}")
    if tracking:
        run_file = train_root / name / "run.json"
        run_id = json.loads(run_file.read_text()).get("run_id") if run_file.is_file() else None
        tracker = make_tracker(True, task.name, run_name(name, params["seed"]), run_id=run_id,
                               tags={"profile": params["profile"], "model": name, "stage": "evaluate"})
        tracker.log_metrics({k: v for k, v in result.items() if isinstance(v, (int, float))})
        tracker.set_tags({"git_commit": result["git_commit"], "num_params": result["num_params"], "device": str(device)})
        tracker.log_artifact(plot)
        tracker.finish()
    print(f"evaluate {name}: test accuracy {metrics['accuracy']:.4f}  F1 {metrics['f1']:.4f}  "
          f"latency p50 {speed['latency_ms_p50']:.1f} ms / batch of {ev['batch_size']}  "
          f"{speed['throughput_samples_per_s']:.0f} samples/s  peak {memory_mb:.0f} MB ({memory_kind})", flush=True)
    return result


def evaluate(params: dict, **kwargs) -> dict:
    report_dir = kwargs.get("report_dir", REPORT_DIR)
    results = {name: evaluate_one(name, params, **kwargs) for name in params["train"]["models"]}
    atomic_write_text(report_dir / "metrics.json", json.dumps(results, indent=2) + "\n")
    return results


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    args = parser.parse_args(argv)
    evaluate(params_from(args), tracking=not args.no_tracking)


if __name__ == "__main__":
    main()
