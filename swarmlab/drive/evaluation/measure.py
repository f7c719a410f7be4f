"""Speed and memory of a model on one split: latency per batch (mean, p50, p95 after warm-up, with device
synchronisation), throughput (samples/s; on CUDA a second pass without per-batch syncs) and peak memory (process
peak RSS on CPU, ``torch.cuda.max_memory_allocated`` on GPU), measured in the same pass as the task's metrics.
"""

from __future__ import annotations

import resource
import sys
import time

import torch

from swarmlab.engine import autocast, batch_indices, sync, to_device


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
    meter.keep_items = True  # per-item test scores for the ledger's intervals (swarmlab.drive.report.testsplit)
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
