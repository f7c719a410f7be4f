"""The one training engine: every task and every model, driven by a DVC stage, a sweep or a test.

``fit`` runs one loop over optimizer steps for both kinds of training data a task may give: a finite
split (epochs of shuffled batches; each epoch's order depends only on (seed, epoch)) or an endless
source (a fresh batch per step). It validates every ``eval_every`` steps (default: at the end of each
epoch), keeps the best weights by the task's validation metric (the test split is never seen here),
answers a plateau by stopping early or by backtracking (seed 003 §4.1.3), stops at ``max_epochs``,
``max_steps`` or a net-time budget, and checkpoints at every evaluation with every RNG state, so that
``fit(..., resume=True)`` after a crash ends exactly where the uninterrupted run ends.

The training step never waits on the host: metrics accumulate on the device, the loss is checked for
NaN/inf only at evaluations (or every ``check_finite_every`` steps), optimizers are fused on CUDA,
batches are copied from pinned memory without blocking, a split that can live on the GPU does, and
``compile`` runs the model through ``torch.compile`` (``reduce-overhead``: CUDA graphs).

Needs only torch; tracking goes through a tracker object (``NullTracker`` when off).
"""

from __future__ import annotations

import csv
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn as nn

from pipelines.common.progress import progress
from pipelines.common.seeds import epoch_generator, set_seeds
from pipelines.common.tracking import NullTracker
from swarmlab.errors import SwarmlabError
from swarmlab.settings import SettingsError, check, flatten, setting
from tasks.base import batch_len, is_endless

CHECKPOINT = "last.pt"  # full training state, written at every evaluation
BEST = "best.pt"  # model state dict of the best evaluation
BEST_OPTIMIZER = "best_optimizer.pt"  # optimizer state of the best evaluation (written when plateau = backtrack)
HISTORY = "history.csv"  # one row per evaluation (a DVC plot)
AMP_CHOICES = ("fp32", "bf16", "auto")
# "eager" = no torch.compile. Not "off": YAML 1.1 reads a bare `off` as false, and `dvc exp run -S` writes values bare.
COMPILE_CHOICES = ("eager", "default", "reduce-overhead")
PLATEAU_CHOICES = ("stop", "backtrack")
OPTIMIZER_CHOICES = ("adamw", "adam")


@dataclass
class TrainConfig:
    batch_size: int = setting(48, ge=1)  # seed 000 best config
    lr: float = setting(4.74e-4, gt=0)  # seed 000 best config
    weight_decay: float = setting(0.0381, ge=0)  # seed 000 best config (AdamW: decoupled; Adam: L2)
    optimizer: str = setting("adamw", choices=OPTIMIZER_CHOICES)  # seed 003 trains with Adam
    max_epochs: int = setting(20, ge=0)  # passes over finite data; 0 = no limit (max_steps or time_budget_s end it)
    max_steps: int = setting(0, ge=0)  # optimizer steps; 0 = no limit
    eval_every: int = setting(0, ge=0)  # steps between validations; 0 = at the end of every epoch (finite data only)
    patience: int = setting(5, ge=0)  # stop after this many evaluations without a better validation metric; 0 = never
    # What a plateau triggers: "stop" (early stopping after `patience`) or "backtrack": seed 003 §4.1.3, restore the
    # best weights and optimizer state and multiply the learning rate by backtrack_alpha when the latest evaluations
    # that are all better than the current one outnumber backtrack_beta of all evaluations (never in the first
    # backtrack_warmup); a non-finite loss then backtracks instead of stopping the run.
    plateau: str = setting("stop", choices=PLATEAU_CHOICES)
    backtrack_alpha: float = setting(0.9, gt=0, le=1)  # seed 003: learning-rate discount per backtrack
    backtrack_beta: float = setting(0.2, ge=0, lt=1)  # seed 003: horizon, a share of the evaluations so far
    backtrack_warmup: int = setting(5, ge=0)  # seed 003: the first 5 epochs are never backtracked
    lr_decay_at: float = setting(
        0.0, ge=0, lt=1
    )  # share of the planned steps after which lr x lr_decay_factor; 0 = off
    lr_decay_factor: float = setting(0.1, gt=0, le=1)  # seed 003's MoG experiment: lr x 0.1 at 70% of the steps
    warmup_steps: int = setting(0, ge=0)  # lr rises linearly over the first steps (lr/n, 2 lr/n, ..., lr); 0 = off
    grad_clip: float = setting(1.0, ge=0)  # max global grad norm, as the SwarmFormer authors; 0 = off
    seed: int = setting(0, ge=0)
    device: str = "auto"  # auto = cuda when available, else cpu; "cuda" needs a CUDA device (checked by check_device)
    # bf16 autocast (the authors trained with mixed precision on GPU): "fp32" (off), "bf16" (on), or "auto":
    # on where the device computes bf16 natively (CUDA with bf16, a CPU with AVX512-BF16 or AMX), since on
    # other CPUs autocast emulates it and a SwarmFormer-Small train step ran ~10x slower than in fp32.
    # True / False mean "bf16" / "fp32".
    amp: bool | str = "fp32"
    compile: str = setting("eager", choices=COMPILE_CHOICES)  # torch.compile: eager (none) | default | reduce-overhead
    max_batches_per_epoch: int = setting(0, ge=0)  # cap on training batches per epoch; 0 = the whole split
    time_budget_s: float = setting(0.0, ge=0)  # net training seconds (no validation, checkpoints, logging); 0 = off
    check_finite_every: int = setting(
        0, ge=0
    )  # steps between NaN/inf checks of the loss (a host sync); 0 = at evaluations
    eval_batch_size: int = setting(256, ge=1)
    num_threads: int = setting(0, ge=0)  # torch intra-op threads; 0 = torch's default

    def __post_init__(self):
        if self.compile in ("off", False):  # accepted spellings of "no compilation"
            self.compile = "eager"
        try:
            check(self, "")
        except SettingsError as exc:
            raise ValueError(str(exc)) from None
        _check_amp(self.amp)
        if not (self.max_epochs or self.max_steps or self.time_budget_s):
            raise ValueError("max_epochs, max_steps and time_budget_s are all 0: training would never end")


class NonFiniteLossError(SwarmlabError):
    """The training or validation loss became NaN or inf (and there was no best checkpoint to go back to, or
    backtracking ran out: ``MAX_NONFINITE_BACKTRACKS`` in a row)."""


class PlanError(SwarmlabError, ValueError):
    """Settings the engine cannot train with on this data (eval_every on endless data, lr_decay_at without a planned
    number of steps, an empty split). ``check_plan`` finds them before any output is written; still a ValueError
    for callers that catch bad values."""


# A run whose loss is non-finite at this many evaluations in a row, each answered by a backtrack, has run out of
# backtracking: the learning rate has been cut by backtrack_alpha ** 5 and the loss still blows up.
MAX_NONFINITE_BACKTRACKS = 5


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


@dataclass
class FitResult:
    best: dict  # {"evaluation", "step", "epoch", "metrics"}: the selected checkpoint
    history: list[dict]
    stopped: str  # why training ended: max_epochs, max_steps, early_stopping, time_budget, callback
    out_dir: Path
    num_params: int
    train_time_s: float
    steps: int
    backtracks: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def best_val(self) -> dict:
        return self.best.get("metrics", {})

    @property
    def best_epoch(self):
        return self.best.get("epoch")

    @property
    def best_step(self) -> int:
        return self.best.get("step", 0)

    @property
    def best_checkpoint(self) -> Path:
        return self.out_dir / BEST


# ---------------------------------------------------------------------------------------------- devices


def resolve_device(name: str) -> torch.device:
    """``auto`` (cuda when available, else cpu) or a device that exists here; anything else is one line."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise SwarmlabError(f"train.device {name!r} is not a device: use auto, cpu or cuda[:N]") from None
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        have = f"{torch.cuda.device_count()} CUDA device(s)" if torch.cuda.is_available() else "no CUDA device"
        raise SwarmlabError(f"train.device {name!r} but this machine has {have}: use auto or cpu")
    if device.type not in ("cpu", "cuda"):
        raise SwarmlabError(f"train.device {name!r}: only cpu and cuda are supported")
    return device


def _check_amp(amp: bool | str) -> None:
    if not isinstance(amp, bool) and amp not in AMP_CHOICES:
        raise ValueError(f"amp must be one of {', '.join(AMP_CHOICES)} (or a bool), got {amp!r}")


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 in hardware (autocast there is a speed-up, not an emulation)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":  # torch's own CPU feature probes (torch is pinned: these exist in 2.13)
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return False


def resolve_amp(amp: bool | str, device: torch.device) -> bool:
    """``TrainConfig.amp`` as a yes/no for ``device``."""
    _check_amp(amp)
    if isinstance(amp, bool):
        return amp
    return amp == "bf16" or (amp == "auto" and native_bf16(device))


def to_device(batch: dict, device: torch.device) -> dict:
    """A batch on ``device``; on CUDA through pinned memory without blocking the host."""
    if device.type != "cuda":
        return batch
    # a split already on the GPU (on_device) hands out CUDA tensors, whose device reads cuda:0 where ``device``
    # may read cuda: only CPU tensors are pinned
    return {
        k: (v.to(device, non_blocking=True) if v.is_cuda else v.pin_memory().to(device, non_blocking=True))
        if torch.is_tensor(v)
        else v
        for k, v in batch.items()
    }


def on_device(data, device: torch.device):
    """``data.to(device)`` for a split that can live on a CUDA device; else ``data`` itself."""
    if device.type == "cuda" and hasattr(data, "to"):
        return data.to(device)
    return data


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, enabled: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def compiled(model: nn.Module, mode: str) -> nn.Module:
    """The module to call: ``model`` itself, or ``torch.compile(model)`` sharing its parameters."""
    if mode == "eager":
        return model
    # dynamic=False: one graph per input shape (a smaller last batch adds one), the static shapes CUDA graphs need
    return torch.compile(model, mode=None if mode == "default" else mode, dynamic=False)


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


# ----------------------------------------------------------------------------------------------- batches


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
    if cfg.lr_decay_at and planned_steps(cfg, steps_per_epoch) is None:
        raise PlanError(
            "train.lr_decay_at needs a planned number of steps: set max_steps (or max_epochs with finite "
            "data), or lr_decay_at: 0"
        )
    return steps_per_epoch


def planned_evaluations(cfg: TrainConfig, steps_per_epoch: int | None) -> int | None:
    """Evaluations the run will make when it is not stopped earlier (ASHA's max_t); None when unbounded."""
    total = planned_steps(cfg, steps_per_epoch)
    if total is None:
        return None
    if cfg.eval_every:
        return -(-total // cfg.eval_every)
    return -(-total // steps_per_epoch)


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


# -------------------------------------------------------------------------------------------- evaluation


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


# ------------------------------------------------------------------------------------------ backtracking


def should_backtrack(
    earlier: list[float], current: float, *, better: Callable[[float, float], bool], beta: float, warmup: int
) -> bool:
    """Seed 003 §4.1.3: backtrack after evaluation e = len(earlier) + 1 when the most recent evaluations
    that are all better than ``current`` are more than ``beta * e``; never in the first ``warmup``.

    ``earlier`` holds the validation results of the evaluations before this one as the heuristic records
    them (after a backtrack: the best result, not the discarded one); ``better(a, b)`` says a beats b.
    """
    e = len(earlier) + 1
    if e <= warmup:
        return False
    run = 0
    for value in reversed(earlier):
        if not better(value, current):
            break
        run += 1
    return run > beta * e


# ------------------------------------------------------------------------------------------- checkpoints


def _rng_state(device: torch.device) -> dict:
    """Every generator a model or a data source may draw from, as tensors and plain values (weights_only-safe)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
        "random": random.getstate(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if "random" in state:
        version, internal, gauss = state["random"]
        random.setstate((version, tuple(internal), gauss))
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _write_history(path: Path, history: list[dict]) -> None:
    if not history:
        return
    fields = list(dict.fromkeys(k for row in history for k in row))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(history)
    tmp.replace(path)


def _save(obj, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    tmp.replace(path)


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    """``torch.load(path, weights_only=True)``; a missing, damaged, foreign or unsafe file is one line."""
    import pickle

    path = Path(path)
    if not path.is_file():
        raise SwarmlabError(f"checkpoint {path} is missing: train first (or drop --resume)")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise SwarmlabError(
            f"checkpoint {path} was refused: it holds objects other than tensors and plain values, "
            f"which weights_only loading never runs; it is not a swarmlab checkpoint (or was tampered "
            f"with): delete it and retrain"
        ) from None
    except (RuntimeError, EOFError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise SwarmlabError(
            f"checkpoint {path} is damaged or not a torch checkpoint ({first}): delete it and retrain"
        ) from None


def load_weights(model: nn.Module, state: dict, path: Path) -> None:
    """``model.load_state_dict(state)``; a checkpoint of another model or size is one line naming the keys."""
    if not isinstance(state, dict) or not all(isinstance(k, str) and torch.is_tensor(v) for k, v in state.items()):
        raise SwarmlabError(f"checkpoint {path} holds no model weights (expected a state dict of tensors)")
    own = model.state_dict()
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    resized = sorted(k for k in set(own) & set(state) if own[k].shape != state[k].shape)
    if missing or unexpected or resized:
        parts = [
            f"{len(missing)} missing (e.g. {missing[0]})" if missing else "",
            f"{len(unexpected)} unexpected (e.g. {unexpected[0]})" if unexpected else "",
            f"{len(resized)} of another shape (e.g. {resized[0]}: {tuple(state[resized[0]].shape)} here "
            f"{tuple(own[resized[0]].shape)})"
            if resized
            else "",
        ]
        raise SwarmlabError(
            f"checkpoint {path} does not fit {type(model).__name__}: "
            f"{', '.join(p for p in parts if p)} keys: it belongs to another model or configuration"
        )
    model.load_state_dict(state)


@dataclass
class _Progress:
    """The loop's position and memory; saved in every checkpoint."""

    step: int = 0
    epoch: int = 1  # the epoch in progress (finite data)
    pos: int = 0  # batches of it done
    evaluation: int = 0
    history: list = field(default_factory=list)
    best: dict = field(default_factory=dict)
    bad_evals: int = 0
    train_time_s: float = 0.0
    stopped: str = ""
    lr_scale: float = 1.0  # product of the backtracking discounts
    recorded: list = field(default_factory=list)  # the monitored value per evaluation, as backtracking records it
    backtracks: int = 0
    nonfinite_streak: int = 0  # evaluations in a row answered by a backtrack on a non-finite loss


def _check_streak(p: _Progress, lr: float, desc: str) -> None:
    """Count a backtrack on a non-finite loss; the ``MAX_NONFINITE_BACKTRACKS``-th in a row ends the run."""
    p.nonfinite_streak += 1
    if p.nonfinite_streak >= MAX_NONFINITE_BACKTRACKS:
        raise NonFiniteLossError(
            f"{desc}backtracking ran out: the loss was non-finite at {p.nonfinite_streak} evaluations "
            f"in a row, each backtracked (lr now {lr:.3g}): lower train.lr, use train.amp fp32 or "
            f"check the data"
        )


def _epoch_value(p: _Progress, plan_len: int | None, endless: bool):
    if endless:
        return 0
    if p.pos == 0:
        return p.epoch - 1  # at an epoch end: the whole number of epochs done
    return round(p.epoch - 1 + p.pos / plan_len, 4)


# ---------------------------------------------------------------------------------------------------- resume

# Settings a resumed run may change: when to stop, and where/how fast it runs (not what it computes).
RESUMABLE_CHANGES = frozenset(
    {
        "max_epochs",
        "max_steps",
        "time_budget_s",
        "patience",
        "device",
        "num_threads",
        "compile",
        "eval_batch_size",
        "check_finite_every",
    }
)


def check_resume(state: dict, cfg: TrainConfig, identity: dict | None, path: Path) -> None:
    """Refuse, in one line naming the differences, to resume a run whose model, data or training settings differ."""
    before = {f"train.{k}": v for k, v in state["config"].items() if k not in RESUMABLE_CHANGES}
    now = {f"train.{k}": v for k, v in asdict(cfg).items() if k not in RESUMABLE_CHANGES}
    if identity is not None and "identity" in state:
        before.update(flatten(state["identity"]))
        now.update(flatten(identity))
    diff = [
        f"{k} {before.get(k, '(unset)')!r} -> {now.get(k, '(unset)')!r}"
        for k in sorted(set(before) | set(now))
        if before.get(k) != now.get(k)
    ]
    if diff:
        shown = "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
        raise SwarmlabError(
            f"--resume refused: the run in {path.parent} was made with other settings ({shown}): "
            f"put them back, or start over with --restart"
        )


def _still_stopped(p: _Progress, cfg: TrainConfig) -> str:
    """The stop reason of a resumed run, cleared when the raised limit lets it go on."""
    if p.stopped == "max_epochs" and (not cfg.max_epochs or p.epoch <= cfg.max_epochs):
        return ""
    if p.stopped == "max_steps" and (not cfg.max_steps or p.step < cfg.max_steps):
        return ""
    if p.stopped == "time_budget" and (not cfg.time_budget_s or p.train_time_s < cfg.time_budget_s):
        return ""
    if p.stopped == "early_stopping" and (not cfg.patience or p.bad_evals < cfg.patience):
        return ""
    return p.stopped


# ----------------------------------------------------------------------------------------------------- fit


def fit(
    model: nn.Module,
    task,
    train_data,
    val_data,
    cfg: TrainConfig,
    out_dir: str | Path,
    *,
    resume: bool | str | Path = False,
    tracker=None,
    callbacks: tuple[Callable[[TrainState], bool | None], ...] = (),
    desc: str = "",
    lr_schedule: Callable[[int], float] | None = None,
    identity: dict | None = None,
) -> FitResult:
    """Train ``model`` on ``train_data`` (finite or endless), select on ``val_data``; checkpoints in ``out_dir``.

    Args:
        resume: ``True`` continues from ``out_dir/last.pt`` when it exists; a path continues from that file.
        callbacks: called as ``cb(state: TrainState)`` after each evaluation's checkpoint is written;
            returning True stops training (a sweep scheduler's decision, say).
        lr_schedule: ``step -> multiplier`` of the learning rate (default: ``lr_decay_at``/``lr_decay_factor``);
            ``warmup_steps`` multiplies either.
        identity: what the run is (model config, task options, data); kept in the checkpoint, and a resume of
            a run whose identity or training settings differ is refused (``check_resume``).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tracker = tracker or NullTracker()
    device = resolve_device(cfg.device)
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    set_seeds(cfg.seed)
    amp = resolve_amp(cfg.amp, device)
    model.to(device)
    optimizer = make_optimizer(model, cfg, device)
    net = compiled(model, cfg.compile)
    num_params = sum(p.numel() for p in model.parameters())

    endless = is_endless(train_data)
    steps_per_epoch = check_plan(cfg, train_data)
    train_data, val_data = on_device(train_data, device), on_device(val_data, device)
    schedule = with_warmup(
        lr_schedule or step_decay(cfg, planned_steps(cfg, steps_per_epoch)) or (lambda step: 1.0), cfg.warmup_steps
    )

    p = _Progress()
    ckpt_path = Path(resume) if isinstance(resume, (str, Path)) else out_dir / CHECKPOINT
    if resume and ckpt_path.is_file():
        state = load_checkpoint(ckpt_path, map_location=device)
        if not isinstance(state, dict) or not {"model", "optimizer", "progress", "rng", "config"} <= set(state):
            raise SwarmlabError(
                f"{ckpt_path} is not a training checkpoint of this engine: delete it, or run without --resume"
            )
        check_resume(state, cfg, identity, ckpt_path)
        load_weights(model, state["model"], ckpt_path)
        optimizer.load_state_dict(state["optimizer"])
        p = _Progress(**state["progress"])
        p.stopped = _still_stopped(p, cfg)
        _set_rng_state(state["rng"], device)
        if ckpt_path.parent != out_dir:  # resuming from elsewhere (a sweep's restored checkpoint)
            for name in (BEST, BEST_OPTIMIZER):
                if (ckpt_path.parent / name).is_file():
                    (out_dir / name).write_bytes((ckpt_path.parent / name).read_bytes())
        print(f"{desc}resuming after step {p.step} (evaluation {p.evaluation}) from {ckpt_path}", flush=True)
    else:
        tracker.log_params({"train": asdict(cfg), "num_params": num_params, "bf16_autocast": amp})

    def better(a: float, b: float) -> bool:
        return task.is_better(a, b)

    def checkpoint() -> None:
        _save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "progress": asdict(p),
                "rng": _rng_state(device),
                "config": asdict(cfg),
                "identity": identity or {},
            },
            out_dir / CHECKPOINT,
        )
        _write_history(out_dir / HISTORY, p.history)

    def backtrack() -> None:
        """Restore the best weights and optimizer state; the learning rate in force times alpha."""
        load_weights(model, load_checkpoint(out_dir / BEST, map_location=device), out_dir / BEST)
        optimizer.load_state_dict(load_checkpoint(out_dir / BEST_OPTIMIZER, map_location=device))
        p.lr_scale *= cfg.backtrack_alpha
        p.backtracks += 1

    plan, loss_sum = None, torch.zeros((), device=device)
    meter, rows, lr = task.new_metrics(), 0, None
    bar = progress(total=planned_steps(cfg, steps_per_epoch), initial=p.step, desc=f"{desc}train")
    model.train()
    t0 = time.perf_counter()
    while not p.stopped:
        # ---------------------------------------------------------------------------- one training step
        if endless:
            batch = train_data.batch(p.step, cfg.batch_size, cfg.seed)
        else:
            if plan is None:
                plan = epoch_plan(train_data, cfg, p.epoch)
            batch = train_data.get_batch(plan[p.pos])
        batch = to_device(batch, device)
        new_lr = cfg.lr * p.lr_scale * schedule(p.step)
        if new_lr != lr:
            for group in optimizer.param_groups:
                group["lr"] = new_lr
            lr = new_lr
        with autocast(device, amp):
            out = task.forward(net, batch)
            loss = task.loss(out, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        loss_sum += loss.detach().float()  # on the device: NaN/inf show up in the sum, read only at checks
        meter.update(out, batch, loss)
        rows += batch_len(batch)
        p.step += 1
        bar.update(1)
        if not bar.disable and p.step % 10 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")

        epoch_end = False
        if not endless:
            p.pos += 1
            if p.pos == len(plan):
                epoch_end, plan = True, None
                p.epoch, p.pos = p.epoch + 1, 0
        stop = ""
        if cfg.max_steps and p.step >= cfg.max_steps:
            stop = "max_steps"
        elif epoch_end and cfg.max_epochs and p.epoch > cfg.max_epochs:
            stop = "max_epochs"
        elif cfg.time_budget_s and p.train_time_s + time.perf_counter() - t0 >= cfg.time_budget_s:
            stop = "time_budget"
        due = bool(stop) or (cfg.eval_every and p.step % cfg.eval_every == 0) or (not cfg.eval_every and epoch_end)
        if not due and cfg.check_finite_every and p.step % cfg.check_finite_every == 0:
            due = not bool(torch.isfinite(loss_sum))  # a non-finite loss is handled at once, as at an evaluation
        if not due:
            continue

        # ------------------------------------------------------------ end of a training stretch: evaluate
        sync(device)
        stretch_s = time.perf_counter() - t0
        p.train_time_s += stretch_s
        first, last = p.history[-1]["step"] + 1 if p.history else 1, p.step
        finite = bool(torch.isfinite(loss_sum))
        loss_sum.zero_()
        row = {
            "evaluation": p.evaluation + 1,
            "step": p.step,
            "epoch": _epoch_value(p, len(plan) if plan else None, endless),
        }
        event = ""
        if not finite:
            if cfg.plateau != "backtrack" or not p.best:
                raise NonFiniteLossError(
                    f"{desc}non-finite training loss in steps {first}..{last}"
                    + (f" (epoch {p.epoch})" if not endless else "")
                    + f" at lr {lr:.3g}: lower train.lr, use train.amp fp32, check the data, or set train.plateau: backtrack"
                )
            _check_streak(p, lr, desc)
            backtrack()
            event = "backtrack: non-finite training loss"
            val = dict(p.best["metrics"])  # the restored weights are the best ones: their validation is known
            row.update({f"val_{k}": v for k, v in val.items()})
        else:
            row.update({f"train_{k}": v for k, v in meter.compute().items()})
            val, _ = evaluate(
                net, task, val_data, batch_size=cfg.eval_batch_size, device=device, amp=amp, desc=f"{desc}validate"
            )
            row.update({f"val_{k}": v for k, v in val.items()})
        score = val[task.monitor]
        p.evaluation += 1
        if not event and not math.isfinite(score):
            if cfg.plateau != "backtrack" or not p.best:
                raise NonFiniteLossError(
                    f"{desc}non-finite validation {task.monitor} at step {p.step}: lower train.lr, "
                    f"use train.amp fp32, or set train.plateau: backtrack"
                )
            _check_streak(p, lr, desc)
            backtrack()
            event = "backtrack: non-finite validation"
        elif not event and better(score, p.best.get("metrics", {}).get(task.monitor)):
            p.best = {"evaluation": p.evaluation, "step": p.step, "epoch": row["epoch"], "metrics": dict(val)}
            p.bad_evals = 0
            _save(model.state_dict(), out_dir / BEST)
            if cfg.plateau == "backtrack":
                _save(optimizer.state_dict(), out_dir / BEST_OPTIMIZER)
        elif not event:
            p.bad_evals += 1
            if (
                cfg.plateau == "backtrack"
                and stop not in ("time_budget", "max_steps", "max_epochs")
                and should_backtrack(
                    p.recorded, score, better=better, beta=cfg.backtrack_beta, warmup=cfg.backtrack_warmup
                )
            ):
                backtrack()
                event = "backtrack"
        if not event.startswith("backtrack: non-finite"):
            p.nonfinite_streak = 0
        best_score = p.best["metrics"][task.monitor] if p.best else score
        p.recorded.append(best_score if event else score)
        if not stop and cfg.patience and p.bad_evals >= cfg.patience:
            stop = "early_stopping"
        row.update(
            {
                "lr": lr,
                "train_time_s": round(p.train_time_s, 3),
                "train_samples_per_s": rows / stretch_s if stretch_s > 0 else 0.0,
                "backtracks": p.backtracks,
            }
        )
        if event:
            row["event"] = event
        p.history.append(row)
        p.stopped = stop
        checkpoint()
        tracker.log_metrics({k: v for k, v in row.items() if k not in ("evaluation", "step", "event")}, step=p.step)
        print(
            f"{desc}eval {p.evaluation}  step {p.step}"
            + ("" if endless else f"  epoch {row['epoch']}")
            + (f"  train_loss {row['train_loss']:.4f}" if "train_loss" in row else "")
            + f"  val_loss {val.get('loss', math.nan):.4f}"
            + (f"  val_{task.monitor} {score:.4f}" if task.monitor != "loss" else "")
            + f"  ({stretch_s:.1f} s, {row['train_samples_per_s']:.0f} samples/s)"
            + (f"  [{event}]" if event else ""),
            flush=True,
        )
        state = TrainState(
            model=model,
            optimizer=optimizer,
            out_dir=out_dir,
            step=p.step,
            epoch=row["epoch"],
            evaluation=p.evaluation,
            row=row,
            history=p.history,
            best=p.best,
        )
        for cb in callbacks:
            if cb(state) and not p.stopped:
                p.stopped = "callback"
        meter, rows = task.new_metrics(), 0
        model.train()
        t0 = time.perf_counter()
    bar.close()
    return FitResult(
        best=p.best,
        history=p.history,
        stopped=p.stopped,
        out_dir=out_dir,
        num_params=num_params,
        train_time_s=p.train_time_s,
        steps=p.step,
        backtracks=p.backtracks,
        extra={"bf16_autocast": amp},
    )
