"""Model registry: ``@register_model`` functions build named variants; ``create_model`` looks them up.

Every entry point builds models through ``create_model(name, **overrides)`` so that a sweep, a DVC
stage and a test all mean the same thing by the same name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

import torch.nn as nn

from swarmlab.registry import Registry


@dataclass(frozen=True)
class ModelEntry:
    name: str
    builder: Callable[..., nn.Module]
    # what the model consumes: "text" (input_ids, attention_mask) -> logits; later "set", "image", ...
    kind: str
    tags: frozenset[str] = field(default_factory=frozenset)


# every module of models/ registers its variants on import; the registry imports them all on the first lookup
_REGISTRY: Registry[ModelEntry] = Registry("model", "models")


def register_model(fn: Callable[..., nn.Module] | None = None, *, kind: str = "text", tags=()):
    """Decorator: register ``fn`` under its function name. Usable bare or with keyword arguments."""

    def wrap(f: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        _REGISTRY.add(f.__name__, ModelEntry(f.__name__, f, kind, frozenset(tags)))
        return f

    return wrap(fn) if fn is not None else wrap


def _entry(name: str) -> ModelEntry:
    return _REGISTRY.get(name)  # an unknown name: swarmlab.registry.UnknownNameError, with the nearest names


class _ConfigProbe(Exception):
    """Raised by ``build_config`` while ``config_fields`` probes a builder: carries the config class, builds nothing."""

    def __init__(self, config_cls: type):
        super().__init__(config_cls.__name__)
        self.config_cls = config_cls


_probing = False


def build_config(config_cls: type, defaults: dict, overrides: dict):
    """``config_cls(**defaults, **overrides)``; an unknown override is a TypeError naming the valid ones.

    What every ``@register_model`` function calls: ``Model(build_config(ModelConfig, variant_defaults, overrides))``.
    """
    if _probing:
        raise _ConfigProbe(config_cls)
    names = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise TypeError(f"unknown {config_cls.__name__} option(s) {unknown}; valid: {sorted(names)}")
    return config_cls(**{**defaults, **overrides})


def create_model(name: str, **overrides) -> nn.Module:
    """Build the registered variant ``name``; ``overrides`` replace fields of its config."""
    return _entry(name).builder(**overrides)


def config_fields(name: str) -> list[str]:
    """The config fields of model ``name`` (what ``create_model(name, **overrides)`` accepts), without building it:
    its builder is stopped at its ``build_config`` call, so no weights are made and no data is needed."""
    global _probing
    builder = _entry(name).builder
    _probing = True
    try:
        builder()
    except _ConfigProbe as probe:
        return [f.name for f in dataclasses.fields(probe.config_cls)]
    finally:
        _probing = False
    raise AssertionError(f"model {name!r}: its builder must call build_config (models/registry.py)")


def list_models(kind: str | None = None) -> list[str]:
    """Registered model names, sorted; only those consuming ``kind`` inputs when given."""
    return [n for n, e in _REGISTRY.items() if kind is None or e.kind == kind]


def model_entry(name: str) -> ModelEntry:
    return _entry(name)
