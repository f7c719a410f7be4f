"""The loop's state: ``Progress`` (its position and memory, saved in every checkpoint), ``Loop`` (what the hooks of
a callback see while training) and ``TrainState`` (what a callback sees after an evaluation's checkpoint)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn


@dataclass
class Progress:
    """The loop's position and memory; saved in every checkpoint (``asdict``: these names and this order are the
    checkpoint's ``progress`` keys). The callbacks keep what they remember here, not in themselves."""

    step: int = 0
    epoch: int = 1  # the epoch in progress (finite data)
    pos: int = 0  # batches of it done
    evaluation: int = 0
    history: list = field(default_factory=list)
    best: dict = field(default_factory=dict)
    bad_evals: int = 0  # evaluations since the best one (EarlyStopping reads it)
    train_time_s: float = 0.0
    stopped: str = ""
    lr_scale: float = 1.0  # product of the backtracking discounts
    recorded: list = field(default_factory=list)  # the monitored value per evaluation, as backtracking records it
    backtracks: int = 0
    nonfinite_streak: int = 0  # evaluations in a row answered by a backtrack on a non-finite loss


@dataclass
class Loop:
    """The running loop as a callback's hooks see it; ``progress`` is the loop's own (mutable) record."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    task: object
    device: torch.device
    out_dir: Path
    progress: Progress
    desc: str = ""  # prefix of every printed line and message
    t0: float = 0.0  # time.perf_counter() at the start of the current training stretch
    lr: float | None = None  # the learning rate in force (None before the first step)


@dataclass
class TrainState:
    """What callbacks see after each evaluation (the checkpoint of it is already on disk)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    out_dir: Path
    step: int  # optimizer steps done
    epoch: float  # epochs done (fractional between epoch ends); 0 for endless data
    evaluation: int  # evaluations done, 1-based
    row: dict  # this evaluation's history row
    history: list[dict]
    best: dict  # {"evaluation", "step", "epoch", "metrics"} of the best evaluation so far

    @property
    def best_metrics(self) -> dict:
        return self.best.get("metrics", {})
