"""Where and in what precision the engine computes: the device, bf16 autocast, host-to-device copies and
``torch.compile``."""

from __future__ import annotations

import torch
import torch.nn as nn

from swarmlab.engine.config import check_amp
from swarmlab.errors import SwarmlabError


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


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 in hardware (autocast there is a speed-up, not an emulation)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":  # torch's own CPU feature probes (torch is pinned: these exist in 2.13)
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return False


def resolve_amp(amp: bool | str, device: torch.device) -> bool:
    """``TrainConfig.amp`` as a yes/no for ``device``."""
    check_amp(amp)
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


def autocast(device: torch.device, enabled: bool, cache: bool = True):
    """bf16 autocast on ``device`` when ``enabled``; ``cache`` off while a CUDA graph captures (PyTorch's rule)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled, cache_enabled=cache)


def compiled(model: nn.Module, mode: str) -> nn.Module:
    """The module to call: ``model`` itself, or ``torch.compile(model)`` sharing its parameters."""
    if mode == "eager":
        return model
    # dynamic=False: one graph per input shape (a smaller last batch adds one), the static shapes CUDA graphs need
    return torch.compile(model, mode=None if mode == "default" else mode, dynamic=False)
