"""What the benchmarks under ``benchmarks/`` share: one timed call, and one training step built the same way for
every model they time, so that two benchmarks timing "a train step" time the same thing."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F


def timed(fn: Callable[[], object]) -> float:
    """Wall seconds of one call."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def train_step(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    labels: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    *,
    amp: bool = False,
    clip: float | None = None,
) -> Callable[[], None]:
    """A closure doing one classifier training step: forward (bf16 autocast on CPU when ``amp``), cross-entropy in
    fp32 over every position the logits have (``(B, C)`` or per element ``(B, N, C)``), backward, optional gradient
    clipping at ``clip``, optimizer step."""

    def step() -> None:
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(*inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()

    return step
