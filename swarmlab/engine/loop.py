"""``fit``: one loop over optimizer steps, for finite data (epochs of shuffled batches) and endless sources alike.

Each step: a batch, the learning rate in force, forward and loss under autocast, backward, clipping, the optimizer
step; then the limits (``max_steps``, ``max_epochs``) and ``on_step_end`` of the callbacks say whether the run ends
here. At the end of a stretch (every ``eval_every`` steps, each epoch's end, or the stop) the loop validates, keeps
the best weights by the task's monitored metric, lets the callbacks answer (backtracking, early stopping), writes the
checkpoint and the history row, logs, and calls ``on_checkpoint``. See ``swarmlab.engine.callbacks`` for the hooks.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn as nn

from swarmlab.batches import batch_len, is_endless
from swarmlab.engine.callbacks import Callback, FunctionCallback, NonFiniteLossError, default_callbacks
from swarmlab.engine.checkpoint import BEST, CHECKPOINT, restore, save, save_checkpoint
from swarmlab.engine.config import TrainConfig
from swarmlab.engine.device import autocast, compiled, on_device, resolve_amp, resolve_device, sync, to_device
from swarmlab.engine.evaluation import evaluate
from swarmlab.engine.graphstep import GraphStep, plain_lr, set_lr
from swarmlab.engine.optim import lr_multiplier, make_optimizer
from swarmlab.engine.plan import check_plan, epoch_plan, planned_steps
from swarmlab.engine.state import Loop, Progress, TrainState
from swarmlab.heartbeat import Heartbeat
from swarmlab.log import get_logger
from swarmlab.progress import progress
from swarmlab.seeds import set_seeds
from swarmlab.tracking import NullTracker

logger = get_logger(__name__)
HEARTBEAT_S = 30.0  # at most this long without a line during training, when no progress bar is shown
NOT_CURVES = ("evaluation", "step", "event", "backtracks")  # history.csv columns MLflow gets no curve of
LOSS_STRIDE, LOSS_EVERY_S = 10, 2.0  # the per-step loss curve: a point at a multiple of 10 steps, at most every 2 s


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


def _epoch_value(p: Progress, plan_len: int | None, endless: bool):
    if endless:
        return 0
    if p.pos == 0:
        return p.epoch - 1  # at an epoch end: the whole number of epochs done
    return round(p.epoch - 1 + p.pos / plan_len, 4)


def _still_stopped(p: Progress, cfg: TrainConfig, callbacks: Sequence[Callback]) -> str:
    """The stop reason of a resumed run, cleared when the raised limit lets it go on."""
    if p.stopped == "max_epochs" and (not cfg.max_epochs or p.epoch <= cfg.max_epochs):
        return ""
    if p.stopped == "max_steps" and (not cfg.max_steps or p.step < cfg.max_steps):
        return ""
    if any(cb.reason == p.stopped and not cb.still_stopped(p) for cb in callbacks if cb.reason):
        return ""
    return p.stopped


def _first(answers) -> str:
    """The first non-empty answer of the callbacks asked (every one of them is asked)."""
    return next((a for a in list(answers) if a), "")


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
    callbacks: Sequence[Callback | Callable[[TrainState], bool | None]] = (),
    desc: str = "",
    lr_schedule: Callable[[int], float] | None = None,
    identity: dict | None = None,
) -> FitResult:
    """Train ``model`` on ``train_data`` (finite or endless), select on ``val_data``; checkpoints in ``out_dir``.

    Args:
        resume: ``True`` continues from ``out_dir/last.pt`` when it exists; a path continues from that file.
        callbacks: ``Callback`` objects, or functions called as ``cb(state: TrainState)`` after each evaluation's
            checkpoint is written, whose True stops training (a sweep scheduler's decision, say); called after
            the callbacks the settings ask for (``default_callbacks``).
        lr_schedule: ``step -> multiplier`` of the learning rate (default: ``lr_decay_at``/``lr_decay_factor``);
            ``warmup_steps`` multiplies either.
        identity: what the run is (model config, task options, data); kept in the checkpoint, and a resume of
            a run whose identity or training settings differ is refused (``check_resume``).
    """
    run = _Fit(model, task, train_data, val_data, cfg, Path(out_dir), tracker or NullTracker(), desc, identity)
    run.start(resume, callbacks, lr_schedule)
    while not run.p.stopped:
        epoch_end = run.train_step()
        stop = run.limit(epoch_end)
        if run.stretch_ends(stop, epoch_end):
            run.end_stretch(stop)
    return run.finish()


class _Fit:
    """One call of ``fit``, in the steps a reader can hold: ``start`` (device, seeds, optimizer, plan, resume),
    ``train_step`` (one optimizer step), ``limit`` and ``stretch_ends`` (does the run or the stretch end here),
    ``end_stretch`` (validate, select, let the callbacks answer, checkpoint, log) and ``finish``."""

    def __init__(self, model, task, train_data, val_data, cfg: TrainConfig, out_dir: Path, tracker, desc, identity):
        self.model, self.task, self.cfg, self.out_dir = model, task, cfg, out_dir
        self.train_data, self.val_data = train_data, val_data
        self.tracker, self.desc, self.identity = tracker, desc, identity

    # ---------------------------------------------------------------------------------------------- setup
    def start(self, resume, callbacks, lr_schedule) -> None:
        cfg, model = self.cfg, self.model
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.device = device = resolve_device(cfg.device)
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        set_seeds(cfg.seed)
        self.amp = resolve_amp(cfg.amp, device)
        model.to(device)
        self.optimizer = make_optimizer(model, cfg, device)
        # graph: inductor's kernels inside one CUDA graph of the whole step (swarmlab.engine.graphstep)
        self.net = compiled(model, "default" if cfg.compile == "graph" else cfg.compile)
        self.graph = GraphStep(self._compute, self.optimizer, device) if cfg.compile == "graph" else None
        self.num_params = sum(p.numel() for p in model.parameters())
        self.callbacks = [
            *default_callbacks(cfg),
            *(cb if isinstance(cb, Callback) else FunctionCallback(cb) for cb in callbacks),
        ]
        self.endless = is_endless(self.train_data)
        steps_per_epoch = check_plan(cfg, self.train_data)
        self.train_data, self.val_data = on_device(self.train_data, device), on_device(self.val_data, device)
        self.schedule = lr_multiplier(cfg, planned_steps(cfg, steps_per_epoch), lr_schedule)

        self.p = Progress()
        ckpt_path = Path(resume) if isinstance(resume, (str, Path)) else self.out_dir / CHECKPOINT
        if resume and ckpt_path.is_file():
            self.p = restore(ckpt_path, model, self.optimizer, cfg, self.identity, device, self.out_dir)
            self.p.stopped = _still_stopped(self.p, cfg, self.callbacks)
            logger.info(
                f"{self.desc}resuming after step {self.p.step} (evaluation {self.p.evaluation}) from {ckpt_path}"
            )
        else:
            self.tracker.log_params({"train": asdict(cfg), "num_params": self.num_params, "bf16_autocast": self.amp})
        if self.graph is not None:
            self.graph.check()  # device-tensor learning rates, capturable groups (a resumed state included)
        else:
            plain_lr(self.optimizer, device)  # a graph run's checkpoint resumed without graphs
        self.loop = Loop(
            model=model,
            optimizer=self.optimizer,
            task=self.task,
            device=device,
            out_dir=self.out_dir,
            progress=self.p,
            desc=self.desc,
        )
        self.plan, self.loss_sum = None, torch.zeros((), device=device)
        # the training loss as a curve per step (MLflow's chart of `train_loss_step`): the mean of the steps since the
        # last point, logged at a step that is a multiple of LOSS_STRIDE once LOSS_EVERY_S have passed (one device read
        # and one store write per point: a run of fast steps is not slowed by its store); tracked runs only
        self.stride_sum = None if isinstance(self.tracker, NullTracker) else torch.zeros((), device=device)
        self.stride_n, self.stride_t = 0, time.perf_counter()
        self.meter, self.rows = self.task.new_metrics(), 0
        planned = planned_steps(cfg, steps_per_epoch)
        self.bar = progress(total=planned, initial=self.p.step, desc=f"{self.desc}train")
        # where the bar is off (a log: DVC, CI, a Ray worker) a line every HEARTBEAT_S between the evaluations' lines
        self.beat = (
            Heartbeat(f"{self.desc}train", planned or 0, "steps", every_s=HEARTBEAT_S).beat
            if self.bar.disable
            else None
        )
        model.train()
        self.loop.t0 = time.perf_counter()

    # ------------------------------------------------------------------------------------ one training step
    def train_step(self) -> bool:
        """One optimizer step on the next batch; returns whether it ended an epoch."""
        cfg, p, loop, optimizer = self.cfg, self.p, self.loop, self.optimizer
        if self.endless:
            batch = self.train_data.batch(p.step, cfg.batch_size, cfg.seed)
        else:
            if self.plan is None:
                self.plan = epoch_plan(self.train_data, cfg, p.epoch)
            batch = self.train_data.get_batch(self.plan[p.pos])
        batch = to_device(batch, self.device)
        new_lr = cfg.lr * p.lr_scale * self.schedule(p.step)
        if new_lr != loop.lr:
            set_lr(optimizer, new_lr)
            loop.lr = new_lr
        if self.graph is not None:
            out, loss = self.graph.step(batch)
        else:
            optimizer.zero_grad(set_to_none=True)
            out, loss = self._compute(batch)
        self.loss_sum += loss.detach().float()  # on the device: NaN/inf show up in the sum, read only at checks
        if self.stride_sum is not None:
            self.stride_sum += loss.detach().float()
            self.stride_n += 1
        self.meter.update(out, batch, loss)
        self.rows += batch_len(batch)
        p.step += 1
        if (
            self.stride_sum is not None
            and p.step % LOSS_STRIDE == 0
            and time.perf_counter() - self.stride_t >= LOSS_EVERY_S
        ):
            self.tracker.log_metrics({"train_loss_step": float(self.stride_sum) / self.stride_n}, step=p.step)
            self.stride_sum.zero_()
            self.stride_n, self.stride_t = 0, time.perf_counter()
        self.bar.update(1)
        if self.beat is not None:
            self.beat(p.step)  # reads the clock only: no device sync
        if not self.bar.disable and p.step % 10 == 0:
            self.bar.set_postfix(loss=f"{loss.item():.4f}")

        epoch_end = False
        if not self.endless:
            p.pos += 1
            if p.pos == len(self.plan):
                epoch_end, self.plan = True, None
                p.epoch, p.pos = p.epoch + 1, 0
        return epoch_end

    def _compute(self, batch, autocast_cache: bool = True):
        """Forward and loss under autocast, backward, clipping, the optimizer step: ``(out, loss)``. The gradients
        must be zeroed (or None) before. ``autocast_cache`` off while a CUDA graph captures it (PyTorch's rule)."""
        with autocast(self.device, self.amp, autocast_cache):
            out = self.task.forward(self.net, batch)
            loss = self.task.loss(out, batch)
        loss.backward()
        if self.cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        return out, loss

    def limit(self, epoch_end: bool) -> str:
        """Why the run ends after this step (a limit, or a callback's ``on_step_end``), or ""."""
        cfg, p = self.cfg, self.p
        if cfg.max_steps and p.step >= cfg.max_steps:
            return "max_steps"
        if epoch_end and cfg.max_epochs and p.epoch > cfg.max_epochs:
            return "max_epochs"
        return _first(cb.on_step_end(self.loop) for cb in self.callbacks)  # only when no limit ends the run: the
        # time budget reads the clock

    def stretch_ends(self, stop: str, epoch_end: bool) -> bool:
        """Whether the training stretch ends here: a stop, ``eval_every``, an epoch's end, or a non-finite loss."""
        cfg, p = self.cfg, self.p
        due = bool(stop) or (cfg.eval_every and p.step % cfg.eval_every == 0) or (not cfg.eval_every and epoch_end)
        if not due and cfg.check_finite_every and p.step % cfg.check_finite_every == 0:
            due = not bool(torch.isfinite(self.loss_sum))  # a non-finite loss is handled at once, as at an evaluation
        return bool(due)

    # ------------------------------------------------------------ end of a training stretch: evaluate
    def end_stretch(self, stop: str) -> None:
        """Validate, keep the best weights, let the callbacks answer, write the checkpoint and the history row."""
        cfg, p, loop, task, desc = self.cfg, self.p, self.loop, self.task, self.desc
        sync(self.device)
        stretch_s = time.perf_counter() - loop.t0
        p.train_time_s += stretch_s
        row = {
            "evaluation": p.evaluation + 1,
            "step": p.step,
            "epoch": _epoch_value(p, len(self.plan) if self.plan else None, self.endless),
        }
        val, event = self._validate(row)
        score = val[task.monitor]
        p.evaluation += 1
        event = self._select(score, val, row, stop, event)
        best_score = p.best["metrics"][task.monitor] if p.best else score
        p.recorded.append(best_score if event else score)  # what backtracking records, kept under any plateau
        reason = _first(cb.on_evaluation_end(loop) for cb in self.callbacks)
        stop = stop or reason
        row.update(
            {
                "lr": loop.lr,
                "train_time_s": round(p.train_time_s, 3),
                "train_samples_per_s": self.rows / stretch_s if stretch_s > 0 else 0.0,
                "backtracks": p.backtracks,
            }
        )
        if event:
            row["event"] = event
        p.history.append(row)
        p.stopped = stop
        save_checkpoint(loop, cfg, self.identity)
        # curves on the optimizer step; the history's counters (evaluation, backtracks so far) and its event are not
        # curves: a run's backtracks is one tag at its end (swarmlab/drive/training/run.py)
        self.tracker.log_metrics({k: v for k, v in row.items() if k not in NOT_CURVES}, step=p.step)
        logger.info(
            f"{desc}eval {p.evaluation}  step {p.step}"
            + ("" if self.endless else f"  epoch {row['epoch']}")
            + (f"  train_loss {row['train_loss']:.4f}" if "train_loss" in row else "")
            + f"  val_loss {val.get('loss', math.nan):.4f}"
            + (f"  val_{task.monitor} {score:.4f}" if task.monitor != "loss" else "")
            + f"  ({stretch_s:.1f} s, {row['train_samples_per_s']:.0f} samples/s)"
            + (f"  [{event}]" if event else "")
        )
        state = TrainState(
            model=self.model,
            optimizer=self.optimizer,
            out_dir=self.out_dir,
            step=p.step,
            epoch=row["epoch"],
            evaluation=p.evaluation,
            row=row,
            history=p.history,
            best=p.best,
        )
        for cb in self.callbacks:
            if cb.on_checkpoint(state) and not p.stopped:
                p.stopped = "callback"
        if self.graph is not None:
            self.graph.check()  # a callback that reloaded the optimizer's state: capture again
        self.meter, self.rows = task.new_metrics(), 0
        self.model.train()
        loop.t0 = time.perf_counter()

    def _validate(self, row: dict) -> tuple[dict, str]:
        """The stretch's training metrics and the validation metrics, into ``row``; after a non-finite training loss
        the callbacks answer first (``event``: backtracking restored the best weights, whose validation is known)."""
        p, desc = self.p, self.desc
        first, last = p.history[-1]["step"] + 1 if p.history else 1, p.step
        finite = bool(torch.isfinite(self.loss_sum))
        self.loss_sum.zero_()
        event = ""
        if not finite:
            event = _first(cb.on_nonfinite(self.loop, "training loss") for cb in self.callbacks)
            if not event:
                raise NonFiniteLossError(
                    f"{desc}non-finite training loss in steps {first}..{last}"
                    + (f" (epoch {p.epoch})" if not self.endless else "")
                    + f" at lr {self.loop.lr:.3g}: lower train.lr, use train.amp fp32, check the data, or set train.plateau: backtrack"
                )
            val = dict(p.best["metrics"])  # the restored weights are the best ones: their validation is known
            row.update({f"val_{k}": v for k, v in val.items()})
        else:
            row.update({f"train_{k}": v for k, v in self.meter.compute().items()})
            val, _ = evaluate(
                self.net,
                self.task,
                self.val_data,
                batch_size=self.cfg.eval_batch_size,
                device=self.device,
                amp=self.amp,
                desc=f"{desc}validate",
            )
            row.update({f"val_{k}": v for k, v in val.items()})
        return val, event

    def _select(self, score: float, val: dict, row: dict, stop: str, event: str) -> str:
        """Keep the best weights by the monitored metric; a non-finite or unimproved score goes to the callbacks."""
        p, task = self.p, self.task
        if not event and not math.isfinite(score):
            event = _first(cb.on_nonfinite(self.loop, "validation") for cb in self.callbacks)
            if not event:
                raise NonFiniteLossError(
                    f"{self.desc}non-finite validation {task.monitor} at step {p.step}: lower train.lr, "
                    f"use train.amp fp32, or set train.plateau: backtrack"
                )
        elif not event and task.is_better(score, p.best.get("metrics", {}).get(task.monitor)):
            p.best = {"evaluation": p.evaluation, "step": p.step, "epoch": row["epoch"], "metrics": dict(val)}
            p.bad_evals = 0
            save(self.model.state_dict(), self.out_dir / BEST)
            for cb in self.callbacks:
                cb.on_improvement(self.loop)
        elif not event:
            p.bad_evals += 1
            event = _first(cb.on_no_improvement(self.loop, score, stop) for cb in self.callbacks)
        return event

    def finish(self) -> FitResult:
        self.bar.close()
        p = self.p
        return FitResult(
            best=p.best,
            history=p.history,
            stopped=p.stopped,
            out_dir=self.out_dir,
            num_params=self.num_params,
            train_time_s=p.train_time_s,
            steps=p.step,
            backtracks=p.backtracks,
            extra={"bf16_autocast": self.amp, **(self.graph.counts() if self.graph is not None else {})},
        )
