"""Checkpoint I/O and resume checks: state dicts written atomically and loaded with ``weights_only=True``, every RNG
state as tensors and plain values, the history CSV, and the settings a resumed run may change (``RESUMABLE_CHANGES``).

Files in a run's folder: ``last.pt`` (the full training state at the latest evaluation: ``model``, ``optimizer``,
``progress``, ``rng``, ``config``, ``identity``), ``best.pt`` (the best evaluation's weights), ``best_optimizer.pt``
(its optimizer state, under ``plateau: backtrack``) and ``history.csv``.
"""

from __future__ import annotations

import csv
import pickle
import random
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from swarmlab.engine.config import TrainConfig
from swarmlab.engine.state import Loop, Progress
from swarmlab.errors import SwarmlabError
from swarmlab.settings import fields_with, flatten

CHECKPOINT = "last.pt"  # full training state, written at every evaluation
BEST = "best.pt"  # model state dict of the best evaluation
BEST_OPTIMIZER = "best_optimizer.pt"  # optimizer state of the best evaluation (written when plateau = backtrack)
HISTORY = "history.csv"  # one row per evaluation (a DVC plot)
TRAINING_KEYS = {"model", "optimizer", "progress", "rng", "config"}  # what makes a file a training checkpoint

# Settings a resumed run may change: when to stop, and where/how fast it runs (not what it computes): the fields
# TrainConfig declares `resumable`.
RESUMABLE_CHANGES = frozenset(fields_with(TrainConfig, "resumable"))


def rng_state(device: torch.device) -> dict:
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


def set_rng_state(state: dict, device: torch.device) -> None:
    """Every RNG from a checkpoint; its tensors may have been loaded onto the GPU (``map_location``), and the
    generators take their states on the CPU (a CUDA resume failed on "RNG state must be a torch.ByteTensor")."""
    torch.set_rng_state(state["torch"].cpu())
    if "numpy" in state:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
    if "random" in state:
        version, internal, gauss = state["random"]
        random.setstate((version, tuple(internal), gauss))
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


def write_history(path: Path, history: list[dict]) -> None:
    if not history:
        return
    fields = list(dict.fromkeys(k for row in history for k in row))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(history)
    tmp.replace(path)


def save(obj, path: Path) -> None:
    """``torch.save`` through a temporary file: a crash never leaves half a checkpoint."""
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    tmp.replace(path)


def save_checkpoint(loop: Loop, cfg: TrainConfig, identity: dict | None) -> None:
    """``last.pt`` with the full training state, and ``history.csv``."""
    save(
        {
            "model": loop.model.state_dict(),
            "optimizer": loop.optimizer.state_dict(),
            "progress": asdict(loop.progress),
            "rng": rng_state(loop.device),
            "config": asdict(cfg),
            "identity": identity or {},
        },
        loop.out_dir / CHECKPOINT,
    )
    write_history(loop.out_dir / HISTORY, loop.progress.history)


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    """``torch.load(path, weights_only=True)``; a missing, damaged, foreign or unsafe file is one line."""
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


def restore(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    identity: dict | None,
    device: torch.device,
    out_dir: Path,
) -> Progress:
    """Load the training checkpoint ``path`` into ``model``, ``optimizer`` and every RNG, after ``check_resume``;
    ``best.pt`` and ``best_optimizer.pt`` next to it are copied into ``out_dir`` when ``path`` lies elsewhere (a
    sweep's restored checkpoint). Returns the loop's progress as saved."""
    state = load_checkpoint(path, map_location=device)
    if not isinstance(state, dict) or not TRAINING_KEYS <= set(state):
        raise SwarmlabError(f"{path} is not a training checkpoint of this engine: delete it, or run without --resume")
    check_resume(state, cfg, identity, path)
    load_weights(model, state["model"], path)
    optimizer.load_state_dict(state["optimizer"])
    progress = Progress(**state["progress"])
    set_rng_state(state["rng"], device)
    if path.parent != out_dir:  # resuming from elsewhere (a sweep's restored checkpoint)
        for name in (BEST, BEST_OPTIMIZER):
            if (path.parent / name).is_file():
                (out_dir / name).write_bytes((path.parent / name).read_bytes())
    return progress
