"""The one training engine: every task and every model, driven by a DVC stage, a sweep or a test.

``fit`` trains with AdamW and gradient clipping, validates every epoch, keeps the best weights by the
task's validation metric (the test split is never seen here), stops early, checkpoints every epoch and
resumes bit-for-bit: the epoch's shuffle depends only on (seed, epoch) and the RNG state travels in the
checkpoint, so ``fit(..., resume=True)`` after a crash ends where the uninterrupted run ends.

Needs only torch; tracking goes through a tracker object (``NullTracker`` when off).
"""
from __future__ import annotations

import csv
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn

from pipelines.common.progress import progress
from pipelines.common.seeds import epoch_generator, set_seeds
from pipelines.common.tracking import NullTracker

CHECKPOINT = "last.pt"  # full training state, written every epoch
BEST = "best.pt"  # model state dict of the best validation epoch
HISTORY = "history.csv"  # one row per epoch (a DVC plot)
AMP_CHOICES = ("fp32", "bf16", "auto")


@dataclass
class TrainConfig:
    batch_size: int = 48  # seed 000 best config
    lr: float = 4.74e-4  # seed 000 best config
    weight_decay: float = 0.0381  # seed 000 best config (AdamW, decoupled)
    max_epochs: int = 20
    patience: int = 5  # stop after this many epochs without a better validation metric; 0 = never
    grad_clip: float = 1.0  # max global grad norm, as the authors; 0 = off
    seed: int = 0
    device: str = "auto"  # auto = cuda when available, else cpu
    # bf16 autocast (the authors trained with mixed precision on GPU): "fp32" (off), "bf16" (on), or "auto":
    # on where the device computes bf16 natively (CUDA with bf16, a CPU with AVX512-BF16 or AMX), since on
    # other CPUs autocast emulates it and a SwarmFormer-Small train step ran ~10x slower than in fp32.
    # True / False mean "bf16" / "fp32".
    amp: bool | str = "fp32"
    max_batches_per_epoch: int = 0  # cap on training batches per epoch; 0 = the whole split
    time_budget_s: float = 0.0  # stop after the epoch in which the training time passes this; 0 = off
    eval_batch_size: int = 256
    num_threads: int = 0  # torch intra-op threads; 0 = torch's default

    def __post_init__(self):
        if self.batch_size < 1 or self.max_epochs < 1 or self.eval_batch_size < 1:
            raise ValueError("batch_size, eval_batch_size and max_epochs must be >= 1")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        _check_amp(self.amp)


@dataclass
class FitResult:
    best_epoch: int
    best_val: dict  # validation metrics of the best epoch
    history: list[dict]
    stopped: str  # why training ended: max_epochs, early_stopping, time_budget, callback
    out_dir: Path
    num_params: int
    train_time_s: float
    extra: dict = field(default_factory=dict)

    @property
    def best_checkpoint(self) -> Path:
        return self.out_dir / BEST


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


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


def _to_device(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}


def _autocast(device: torch.device, enabled: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def batch_indices(n: int, batch_size: int, *, shuffle: bool, seed: int = 0, epoch: int = 0) -> list[torch.Tensor]:
    order = torch.randperm(n, generator=epoch_generator(seed, epoch)) if shuffle else torch.arange(n)
    return list(order.split(batch_size))


@torch.no_grad()
def evaluate(model: nn.Module, task, data, *, batch_size: int = 256, device: torch.device | str = "cpu",
             amp: bool = False, desc: str = "eval") -> tuple[dict, object]:
    """Metrics of ``model`` on ``data`` in eval mode; returns (metrics, the task's meter)."""
    device = torch.device(device)
    model.eval()
    meter = task.new_metrics()
    for idx in progress(batch_indices(len(data), batch_size, shuffle=False), desc=desc):
        batch = _to_device(data.get_batch(idx), device)
        with _autocast(device, amp):
            out = task.forward(model, batch)
            loss = task.loss(out, batch)
        meter.update(out.float(), batch, loss)
    return meter.compute(), meter


def _rng_state(device: torch.device) -> dict:
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
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


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    return torch.load(path, map_location=map_location, weights_only=True)


def fit(model: nn.Module, task, train_data, val_data, cfg: TrainConfig, out_dir: str | Path, *,
        resume: bool | str | Path = False, tracker=None,
        callbacks: tuple[Callable[[int, dict, Path], bool | None], ...] = (), desc: str = "") -> FitResult:
    """Train ``model`` on ``train_data``, select on ``val_data``; checkpoints land in ``out_dir``.

    Args:
        resume: ``True`` continues from ``out_dir/last.pt`` when it exists; a path continues from that file.
        callbacks: called as ``cb(epoch, row, out_dir)`` after each epoch's checkpoint is written;
            returning True stops training (a sweep scheduler's decision, say).
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
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]  # biases (and norms) are not decayed
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr
    )
    num_params = sum(p.numel() for p in model.parameters())

    history: list[dict] = []
    best_val: dict = {}
    best_epoch, bad_epochs, start_epoch, train_time, stopped = 0, 0, 1, 0.0, ""
    ckpt_path = Path(resume) if isinstance(resume, (str, Path)) else out_dir / CHECKPOINT
    if resume and ckpt_path.is_file():
        state = load_checkpoint(ckpt_path, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        history, best_val, best_epoch = state["history"], state["best_val"], state["best_epoch"]
        bad_epochs, train_time, stopped = state["bad_epochs"], state["train_time_s"], state["stopped"]
        start_epoch = state["epoch"] + 1
        _set_rng_state(state["rng"], device)
        if ckpt_path.parent != out_dir:  # resuming from elsewhere (a sweep's restored checkpoint)
            best_src = ckpt_path.parent / BEST
            if best_src.is_file():
                (out_dir / BEST).write_bytes(best_src.read_bytes())
        print(f"{desc}resuming after epoch {state['epoch']} from {ckpt_path}", flush=True)
    else:
        tracker.log_params({"train": asdict(cfg), "num_params": num_params, "bf16_autocast": amp})

    for epoch in range(start_epoch, cfg.max_epochs + 1):
        if stopped:
            break
        model.train()
        t0 = time.perf_counter()
        meter = task.new_metrics()
        batches = batch_indices(len(train_data), cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch)
        if cfg.max_batches_per_epoch:
            batches = batches[: cfg.max_batches_per_epoch]
        seen = 0
        bar = progress(batches, desc=f"{desc}epoch {epoch}/{cfg.max_epochs}")
        for step, idx in enumerate(bar):
            batch = _to_device(train_data.get_batch(idx), device)
            with _autocast(device, amp):
                out = task.forward(model, batch)
                loss = task.loss(out, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite training loss {loss.item()} at epoch {epoch}: lower lr or check the data")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            meter.update(out.detach().float(), batch, loss.detach())
            seen += len(idx)
            if step % 10 == 0 and not bar.disable:
                bar.set_postfix(loss=f"{loss.item():.4f}")
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        epoch_train_s = time.perf_counter() - t0
        train_time += epoch_train_s
        val, _ = evaluate(model, task, val_data, batch_size=cfg.eval_batch_size, device=device, amp=amp,
                          desc=f"{desc}validate")
        row = {"epoch": epoch}
        row.update({f"train_{k}": v for k, v in meter.compute().items()})
        row.update({f"val_{k}": v for k, v in val.items()})
        row.update({"lr": optimizer.param_groups[0]["lr"], "epoch_time_s": time.perf_counter() - t0,
                    "train_samples_per_s": seen / epoch_train_s})
        history.append(row)

        score = val[task.monitor]
        if task.is_better(score, best_val.get(task.monitor)):
            best_val, best_epoch, bad_epochs = dict(val), epoch, 0
            torch.save(model.state_dict(), out_dir / BEST)
        else:
            bad_epochs += 1
        if cfg.patience and bad_epochs >= cfg.patience:
            stopped = "early_stopping"
        elif cfg.time_budget_s and train_time >= cfg.time_budget_s:
            stopped = "time_budget"
        elif epoch == cfg.max_epochs:
            stopped = "max_epochs"

        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                    "history": history, "best_val": best_val, "best_epoch": best_epoch, "bad_epochs": bad_epochs,
                    "train_time_s": train_time, "stopped": stopped, "rng": _rng_state(device)},
                   out_dir / (CHECKPOINT + ".tmp"))
        (out_dir / (CHECKPOINT + ".tmp")).replace(out_dir / CHECKPOINT)
        _write_history(out_dir / HISTORY, history)
        tracker.log_metrics({k: v for k, v in row.items() if k != "epoch"}, step=epoch)
        print(f"{desc}epoch {epoch}/{cfg.max_epochs}  train_loss {row['train_loss']:.4f}  "
              f"val_loss {val['loss']:.4f}  val_{task.monitor} {score:.4f}  "
              f"({row['epoch_time_s']:.1f} s, {row['train_samples_per_s']:.0f} samples/s)", flush=True)
        for cb in callbacks:
            if cb(epoch, row, out_dir) and not stopped:
                stopped = "callback"
    stopped = stopped or "max_epochs"
    return FitResult(best_epoch=best_epoch, best_val=best_val, history=history, stopped=stopped,
                     out_dir=out_dir, num_params=num_params, train_time_s=train_time, extra={"bf16_autocast": amp})
