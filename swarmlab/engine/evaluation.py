"""Validation and test passes: a model's metrics on a split, in eval mode, with one host sync at the end."""

from __future__ import annotations

import torch
import torch.nn as nn

from swarmlab.progress import progress
from swarmlab.engine.device import autocast, to_device
from swarmlab.engine.plan import batch_indices


@torch.no_grad()
def evaluate(
    model: nn.Module,
    task,
    data,
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    amp: bool = False,
    desc: str = "eval",
) -> tuple[dict, object]:
    """Metrics of ``model`` on ``data`` in eval mode; returns (metrics, the task's meter). One host sync, at the end."""
    device = torch.device(device)
    model.eval()
    meter = task.new_metrics()
    for idx in progress(batch_indices(len(data), batch_size, shuffle=False), desc=desc):
        batch = to_device(data.get_batch(idx), device)
        with autocast(device, amp):
            out = task.forward(model, batch)
            loss = task.loss(out, batch)
        meter.update(out, batch, loss)
    return meter.compute(), meter
