"""One way to declare and check a setting: a dataclass field whose allowed values sit next to its default.

    @dataclass
    class EvaluateConfig:
        batch_size: int = setting(256, ge=1)            # rows per inference batch
        warmup_batches: int = setting(2, ge=0)

    cfg = parse(EvaluateConfig, params["evaluate"], "evaluate")   # -> EvaluateConfig, or one SettingsError

``parse`` refuses unknown keys, values of the wrong type (an int is accepted for a float), non-finite
floats, values outside ``ge/gt/le/lt`` and values not in ``choices``, with one line naming the key, the
value and what is allowed. Every section of params.yaml, every task's options, the engine's settings and
the sweep's go through here, so a new track adds its settings to a dataclass and gets the same checks.
``check(obj, where)`` runs the same checks on an instance (for dataclasses built in code).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from swarmlab.errors import SwarmlabError


class SettingsError(SwarmlabError, ValueError):
    """A refused setting; the message names the key, the value and what is allowed. A ValueError too: what a
    dataclass's ``__post_init__`` raises for a bad value (model configs, TrainConfig)."""


# The largest seed: NumPy's legacy seeding takes 32 bits, and ``swarmlab.seeds.epoch_generator`` multiplies the seed
# by ~1e6 inside torch's 64-bit generator. Every seed setting is checked against it.
MAX_SEED = 2**32 - 1


def models_twice(models: list[str], where: str) -> str | None:
    """One line naming every model ``models`` (a ``models`` setting or ``--models``) lists more than once, else None:
    each model trains once per seed."""
    twice = sorted({m for m in models if models.count(m) > 1})
    return f"{where} lists {', '.join(twice)} twice: each model trains once per seed" if twice else None


def setting(default: Any, *, ge=None, gt=None, le=None, lt=None, choices=None, roles: tuple[str, ...] = ()):
    """A dataclass field with its allowed values. Lists and dicts are copied per instance.

    ``roles`` name what readers elsewhere do with the setting, so that they derive their lists from this one
    declaration (``fields_with``): ``resumable`` (a resumed run may change it: when to stop, where and how fast it
    runs, not what it computes), ``budget`` (the report states it as the run's budget)."""
    rules = {
        k: v
        for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=tuple(choices) if choices else None).items()
        if v is not None
    }
    metadata = {"rules": rules, "roles": frozenset(roles)}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def fields_with(cls: type, role: str) -> tuple[str, ...]:
    """The names of ``cls``'s settings declared with ``role``, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if role in (f.metadata.get("roles") or ()))


def _type_name(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(h) for h in typing.get_args(hint))
    names = {
        int: "an int",
        float: "a number",
        str: "a string",
        bool: "true or false",
        list: "a list",
        dict: "a mapping",
        type(None): "null",
    }
    origin = typing.get_origin(hint) or hint
    return names.get(origin, getattr(origin, "__name__", str(hint)))


def type_ok(value, hint) -> bool:
    """``value`` fits the annotation ``hint`` (bool is not an int; an int is a float)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin in (list, tuple) or hint in (list, tuple):
        args = typing.get_args(hint)
        return isinstance(value, (list, tuple)) and (not args or all(type_ok(v, args[0]) for v in value))
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _rule_text(rules: dict) -> str:
    if "choices" in rules:
        return "one of " + ", ".join(map(str, rules["choices"]))
    parts = []
    for key, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if key in rules:
            parts.append(f"{op} {rules[key]}")
    return " and ".join(parts)


def _breaks(value, rules: dict) -> bool:
    if "choices" in rules:
        return value not in rules["choices"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return (
        ("ge" in rules and value < rules["ge"])
        or ("gt" in rules and value <= rules["gt"])
        or ("le" in rules and value > rules["le"])
        or ("lt" in rules and value >= rules["lt"])
    )


def check_value(key: str, value, hint, rules: dict | None = None) -> None:
    """One value against its annotation and rules; ``key`` is the full dotted name used in the message."""
    rules = rules or {}
    if not type_ok(value, hint):
        allowed = _rule_text(rules)
        raise SettingsError(
            f"{key} must be {_type_name(hint)}{' ' + allowed if allowed else ''}, got {type(value).__name__} {value!r}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise SettingsError(f"{key} must be a finite number{' ' + _rule_text(rules) if rules else ''}, got {value!r}")
    if _breaks(value, rules):
        raise SettingsError(f"{key} must be {_rule_text(rules)}, got {value!r}")


def check(obj, where: str) -> None:
    """Every field of the dataclass instance ``obj`` against its annotation and rules."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        check_value(
            f"{where}.{f.name}" if where else f.name,
            getattr(obj, f.name),
            hints.get(f.name, Any),
            f.metadata.get("rules"),
        )


def check_config(obj) -> None:
    """``check`` for a model config's ``__post_init__``: every field against its declaration, named
    ``<ConfigClass>.<field>`` in the message. Constraints between fields stay in the config's own code."""
    check(obj, type(obj).__name__)


def parse(cls: type, values: dict | None, where: str, *, partial: bool = False):
    """``cls(**values)`` after checking every key and value; ``where`` prefixes the names in messages.

    ``partial``: ``values`` may leave out fields (their defaults apply); otherwise too.
    A ``ValueError`` from the dataclass's own ``__post_init__`` (constraints between fields) is re-raised as a
    SettingsError naming ``where``.
    """
    values = {} if values is None else values
    if not isinstance(values, dict):
        raise SettingsError(f"{where} must be a mapping, got {type(values).__name__} {values!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise SettingsError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(fields) or 'none'}"
        )
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        check_value(f"{where}.{key}" if where else key, value, hints.get(key, Any), fields[key].metadata.get("rules"))
    try:
        return cls(**values)
    except SettingsError as exc:
        raise SettingsError(f"{where}: {exc}" if where and not str(exc).startswith(where) else str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{where}: {exc}") from None


def flatten(d: dict, prefix: str = "") -> dict:
    """Nested mappings as one level of dotted keys: ``{"a": {"b": 1}} -> {"a.b": 1}`` (MLflow params, resume checks,
    report tables)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
