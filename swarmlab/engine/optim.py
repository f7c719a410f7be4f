"""The optimizer and the learning-rate schedule: AdamW/Adam with decay groups, step decay, linear warmup."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn

from swarmlab.engine.config import TrainConfig


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """AdamW or Adam; weights (ndim >= 2) decayed, biases and norms not, nor what a module's ``no_weight_decay()``
    names (timm's convention: Swin's relative-position bias tables); fused kernels on CUDA."""
    excluded = {
        f"{prefix}.{name}" if prefix else name
        for prefix, module in model.named_modules()
        if hasattr(module, "no_weight_decay")
        for name in module.no_weight_decay()
    }
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in named if p.ndim >= 2 and n not in excluded]
    no_decay = [p for n, p in named if p.ndim < 2 or n in excluded]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    return cls(groups, lr=cfg.lr, **({"fused": True} if device.type == "cuda" else {}))


def step_decay(cfg: TrainConfig, total_steps: int | None) -> Callable[[int], float] | None:
    """lr multiplier ``lr_decay_factor`` from ``lr_decay_at`` of the planned steps on; None when off."""
    if not cfg.lr_decay_at:
        return None
    if total_steps is None:
        raise ValueError("lr_decay_at needs a planned number of steps: set max_steps (or max_epochs with finite data)")
    at = int(cfg.lr_decay_at * total_steps)
    return lambda step: cfg.lr_decay_factor if step >= at else 1.0


def with_warmup(schedule: Callable[[int], float], warmup_steps: int) -> Callable[[int], float]:
    """``schedule`` times a linear warmup: step s (0-based) of the first ``warmup_steps`` gets (s + 1) / warmup_steps."""
    if not warmup_steps:
        return schedule
    return lambda step: schedule(step) * min(1.0, (step + 1) / warmup_steps)


def lr_multiplier(
    cfg: TrainConfig, total_steps: int | None, schedule: Callable[[int], float] | None = None
) -> Callable[[int], float]:
    """``step -> multiplier`` of ``cfg.lr``: ``schedule`` (default: ``step_decay``, else constant) times the warmup."""
    return with_warmup(schedule or step_decay(cfg, total_steps) or (lambda step: 1.0), cfg.warmup_steps)
