"""Stage `evaluate@<task>`: each trained run's best checkpoint on the test split, once, plus speed and memory.

The task's test metrics (for text classification: accuracy, precision, recall, F1, confusion matrix) and
its own figures (``task.report``), latency per batch (mean, p50, p95 after warm-up, with device
synchronisation), throughput (samples/s; on CUDA a second pass without per-batch syncs) and peak
memory (process peak RSS on CPU, ``torch.cuda.max_memory_allocated`` on GPU). Writes
``reports/evaluate/<task>/metrics.json`` (DVC metrics; keyed by run, ``<model>-seed<k>``, each entry naming its
model and seed) and ``reports/evaluate/<task>/plots/``; logs to the run's MLflow training run.

The runs go through the same scheduler as training (swarmlab/schedule/scheduler.py: in this process, or fanned out
over Ray, each in a fresh worker process so that its peak memory is its own); each entry records its ``resources``.

    python -m pipelines.evaluate [--task T] [--profile P] [--parallel N] [--address HOST:PORT] [--no-tracking]
"""

from __future__ import annotations

import dataclasses
import json
import resource
import sys
import time
from pathlib import Path

import torch

from swarmlab.stage_cli import add_schedule_arguments, params_from, stage_parser
from swarmlab.paths import OUTPUTS_DIR, REPORTS_DIR, git_commit
from swarmlab.runs import Run, default_task, make_task, report_dir, skip_reason, task_runs, train_dir, write_skipped
from swarmlab.run_config import build_model, evaluate_settings, load_best, model_overrides, train_config
from swarmlab.schedule.scheduler import Job, Scheduler
from swarmlab.tracking import check_tracking_uri, make_tracker, run_context, run_title
from swarmlab.engine import (
    BEST,
    autocast,
    batch_indices,
    compiled,
    on_device,
    resolve_amp,
    resolve_device,
    sync,
    to_device,
)
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_dir
from swarmlab.report.testsplit import check_reads, load_reads, read_entry, write_items, write_reads

TRAIN_ROOT = OUTPUTS_DIR / "train"


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
    """One pass over ``data``: task metrics plus per-batch wall time (after ``warmup_batches`` untimed ones).

    On CUDA a second pass without per-batch synchronisation gives the throughput (the first one, synchronised
    around every batch for its latency, leaves the GPU idle between batches).
    """
    model.eval()
    batches = batch_indices(len(data), batch_size, shuffle=False)
    for idx in batches[:warmup_batches]:  # warm-up: allocator, kernels, caches, compiled graphs
        with autocast(device, amp):
            task.forward(model, to_device(data.get_batch(idx), device))
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    meter, times = task.new_metrics(), []
    meter.keep_items = True  # per-item test scores for the ledger's intervals (swarmlab.report.testsplit)
    for idx in batches:
        batch = to_device(data.get_batch(idx), device)
        sync(device)
        t0 = time.perf_counter()
        with autocast(device, amp):
            out = task.forward(model, batch)
        sync(device)
        times.append(time.perf_counter() - t0)
        meter.update(out, batch, task.loss(out, batch))
    throughput = len(data) / sum(times)
    if device.type == "cuda":
        t0 = time.perf_counter()
        for idx in batches:
            with autocast(device, amp):
                task.forward(model, to_device(data.get_batch(idx), device))
        sync(device)
        throughput = len(data) / (time.perf_counter() - t0)
    meter.batch_times = times
    ordered = sorted(times)
    speed = {
        "latency_ms_mean": 1000 * sum(times) / len(times),
        "latency_ms_p50": 1000 * percentile(ordered, 0.50),
        "latency_ms_p95": 1000 * percentile(ordered, 0.95),
        "throughput_samples_per_s": throughput,
        "batch_size": batch_size,
        "batches": len(times),
    }
    return meter.compute(), meter, speed


def evaluate_one(
    task,
    run: Run,
    params: dict,
    *,
    plots_dir: Path,
    train_root: Path = TRAIN_ROOT,
    tracking: bool = True,
    resources: dict | None = None,
) -> dict:
    """The test metrics, speed and memory of one run; its figures go to ``plots_dir``; ``resources`` (what the
    scheduler gave it) are recorded in its entry."""
    name = run.name
    cfg = train_config(params, task.key, run.model, seed=run.seed)
    model = load_best(params, task, run, train_root)
    device = resolve_device(cfg.device)
    amp = resolve_amp(cfg.amp, device)
    if cfg.num_threads:  # as fit: the latency is measured with the threads the model trained with
        torch.set_num_threads(cfg.num_threads)
    model.to(device)
    test_ds = on_device(task.eval_data("test", model.cfg), device)
    ev = evaluate_settings(params, task.key)
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
        **({"resources": resources} if resources else {}),
    }
    plots = task.report(meter, plots_dir, title=name, name=name)
    write_items(plots_dir.parent, name, meter, meter.batch_times)
    if tracking:
        run_file = train_dir(task.key, name, train_root) / "run.json"
        run_id = json.loads(run_file.read_text()).get("run_id") if run_file.is_file() else None
        context = {} if run_id else run_context(params)  # names a run only when there is no train run to resume
        tracker = make_tracker(
            True,
            task.key,
            run_title(name, params["profile"], context),
            run_id=run_id,
            tags={
                "profile": params["profile"],
                "model": run.model,
                "run": name,
                "stage": "evaluate",
                "task": task.key,
                "seed": run.seed,
                **context,
            },
        )
        tracker.log_metrics(
            {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        )
        tracker.set_tags(
            {"git_commit": result["git_commit"], "num_params": result["num_params"], "device": str(device)}
        )
        for plot in plots:
            tracker.log_artifact(plot)
        tracker.finish()
    shown = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k in (task.monitor, "loss", "f1"))
    print(
        f"evaluate {task.key}/{name}: test {shown}  latency p50 {speed['latency_ms_p50']:.1f} ms / batch of "
        f"{ev['batch_size']}  {speed['throughput_samples_per_s']:.0f} samples/s  peak {memory_mb:.0f} MB ({memory_kind})",
        flush=True,
    )
    return result


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
    task_name = default_task(params, task_name)
    task = make_task(params, task_name, options=options)
    if skip_reason(params, task_name):
        earlier = load_reads(report_dir("evaluate", task_name, report_root))  # the test-read record outlives a skip
        with atomic_dir(report_dir("evaluate", task_name, report_root)) as tmp:
            (tmp / "plots").mkdir()
            (tmp / "items").mkdir()
            write_reads(tmp, earlier)
        return write_skipped("evaluate", task_name, skip_reason(params, task_name), report_root=report_root)
    runs = task_runs(params, task_name)
    for run in runs:  # every setting and checkpoint before the first test batch is read
        build_model(run.model, task, model_overrides(params, task_name, run.model))
        ckpt = train_dir(task.key, run.name, train_root) / BEST
        if not ckpt.is_file():
            raise SwarmlabError(f"{ckpt} is missing: train {run.name} on {task.key} first (dvc repro train@{task.key})")
    resolve_device(train_config(params, task_name).device)
    evaluate_settings(params, task_name)
    scheduler = Scheduler("evaluate", params, task, runs, parallel=parallel, address=address)
    if tracking:
        check_tracking_uri()
    folder = Path(report_dir("evaluate", task_name, report_root)).resolve()
    reads = check_reads(
        folder,
        [
            read_entry(
                task=task_name,
                registered=task.name,
                options=dataclasses.asdict(task.options),
                model=r.model,
                overrides=model_overrides(params, task_name, r.model),
                seed=r.seed,
                train=dataclasses.asdict(train_config(params, task_name, r.model, seed=r.seed)),
                run=r.name,
                profile=params["profile"],
                commit=git_commit(),
            )
            for r in runs
        ],
        retest=retest,
    )  # a second look at a test split is refused unless named (--retest)
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
        results = scheduler.execute("pipelines.evaluate:evaluate_one", jobs, tracking=tracking, fresh_workers=True)
        (tmp / "metrics.json").write_text(json.dumps(results, indent=2) + "\n")
        write_reads(tmp, reads)
    return results


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--task", default=None, help="registered task with a tasks.<task> section (default: params `task`)"
    )
    add_schedule_arguments(parser)
    parser.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    parser.add_argument(
        "--retest",
        action="store_true",
        help="allow a second read of a test split under other training settings (counted in the report)",
    )
    args = parser.parse_args(argv)
    evaluate(
        params_from(args),
        args.task,
        tracking=not args.no_tracking,
        retest=args.retest,
        parallel=args.parallel,
        address=args.address,
    )


if __name__ == "__main__":
    main()
