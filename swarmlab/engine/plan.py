"""What a run will do over its training data, known before the first step: the batches of each epoch, the planned
number of steps, and the settings this data cannot train with (``PlanError``)."""

from __future__ import annotations

import torch

from swarmlab.seeds import epoch_generator
from swarmlab.engine.config import TrainConfig
from swarmlab.errors import SwarmlabError
from swarmlab.batches import is_endless


class PlanError(SwarmlabError, ValueError):
    """Settings the engine cannot train with on this data (eval_every on endless data, lr_decay_at without a planned
    number of steps, an empty split). ``check_plan`` finds them before any output is written; still a ValueError
    for callers that catch bad values."""


def batch_indices(n: int, batch_size: int, *, shuffle: bool, seed: int = 0, epoch: int = 0) -> list[torch.Tensor]:
    order = torch.randperm(n, generator=epoch_generator(seed, epoch)) if shuffle else torch.arange(n)
    return list(order.split(batch_size))


def epoch_plan(data, cfg: TrainConfig, epoch: int) -> list[torch.Tensor]:
    """The batches of ``epoch`` (1-based): the data's own ``batch_plan`` if it has one, else a shuffle."""
    if hasattr(data, "batch_plan"):
        plan = list(data.batch_plan(cfg.batch_size, epoch_generator(cfg.seed, epoch)))
    else:
        plan = batch_indices(len(data), cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch)
    return plan[: cfg.max_batches_per_epoch] if cfg.max_batches_per_epoch else plan


def planned_steps(cfg: TrainConfig, steps_per_epoch: int | None) -> int | None:
    """Optimizer steps the run will take when it is not stopped earlier; None when only time bounds it."""
    bounds = [cfg.max_steps] if cfg.max_steps else []
    if cfg.max_epochs and steps_per_epoch:
        bounds.append(cfg.max_epochs * steps_per_epoch)
    return min(bounds) if bounds else None


def check_plan(cfg: TrainConfig, train_data) -> int | None:
    """Refuse settings this training data cannot run with (``PlanError``); returns the steps per epoch (None for
    endless data). ``fit`` calls it first; the train stage calls it for every model before the first run starts."""
    endless = is_endless(train_data)
    if endless and not cfg.eval_every:
        raise PlanError(
            "train.eval_every is 0, but endless training data has no epochs to validate after: set "
            "eval_every (steps between validations)"
        )
    if endless and not (cfg.max_steps or cfg.time_budget_s):
        raise PlanError("endless training data needs train.max_steps or train.time_budget_s: training would never end")
    steps_per_epoch = None if endless else len(epoch_plan(train_data, cfg, 1))
    if steps_per_epoch == 0:
        raise PlanError("the training split is empty")
    planned = planned_steps(cfg, steps_per_epoch)
    if cfg.eval_every and planned is not None and cfg.eval_every > planned:
        raise PlanError(
            f"train.eval_every is {cfg.eval_every}, but the run stops after {planned} step(s): it would validate only "
            f"at its end; set eval_every to at most {planned} (or 0 for the end of each epoch, on finite data)"
        )
    if cfg.lr_decay_at and planned is None:
        raise PlanError(
            "train.lr_decay_at needs a planned number of steps: set max_steps (or max_epochs with finite "
            "data), or lr_decay_at: 0"
        )
    return steps_per_epoch
