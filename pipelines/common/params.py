"""params.yaml: ``defaults`` plus the active profile's overrides, validated key by key.

Layout::

    profile: cpu                  # which profile stages read (dvc exp run -S profile=smoke)
    paths: {datasets: ...}
    defaults: {seed: 0, prepare: {...}, tokenize: {...}, train: {...}, evaluate: {...}}
    profiles: {smoke: {...}, cpu: {...}, paper: {...}}   # each: a partial copy of `defaults`

``defaults`` is the schema: a profile may only set keys that exist there, with a value of the same
type (an int is accepted where a float is expected). A key whose default is ``{}`` is free-form.

The top-level sections ``train:`` and ``augment:`` override every profile, last: ``dvc exp run -S
+train.lr=1e-3`` (``+`` adds a key to the empty ``train: {}``) or ``-S augment.enabled=false`` work whatever the
profile. Only these two: every stage that reads one declares it in dvc.yaml, so DVC reruns exactly the
stages an override changes (a top-level section nobody declared would leave stale results "up to date").
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from swarmlab.errors import SwarmlabError
from pipelines.common.paths import PARAMS_FILE

TOP_LEVEL_KEYS = {"profile", "paths", "defaults", "profiles", "schedule"}  # schedule: declared by no stage (see above)
OVERRIDE_SECTIONS = ("augment", "train")  # top-level sections that override every profile (declared in dvc.yaml)


def _type_name(value) -> str:
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "mapping"}.get(type(value), type(value).__name__)


def _check_value(where: str, default, value, source: str) -> None:
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(default, bool) and isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))
    elif default is None:
        ok = True
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise SwarmlabError(
            f"{source}: {where} must be a {_type_name(default)} (like {default!r}), got {_type_name(value)} {value!r}"
        )


def _merge(schema: dict, override: dict, where: str, source: str) -> dict:
    out = copy.deepcopy(schema)
    for key, value in override.items():
        path = f"{where}.{key}" if where else key
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise SwarmlabError(f"{source}: unknown key {path!r}; known keys here: {known}")
        default = schema[key]
        _check_value(path, default, value, source)
        if isinstance(default, dict) and default:  # a structured section: recurse
            out[key] = _merge(default, value, path, source)
        else:  # leaf, list or free-form mapping: replaced whole
            out[key] = copy.deepcopy(value)
    return out


def load_params(path: str | Path | None = None, profile: str | None = None) -> dict:
    """The resolved params of ``profile`` (default: the file's ``profile`` key).

    Returns ``defaults`` merged with ``profiles[profile]``, plus ``profile`` and ``paths``.
    """
    path = Path(path) if path else PARAMS_FILE
    if not path.is_file():
        raise SwarmlabError(f"params file {path} not found: run from the repo root or pass --params")
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise SwarmlabError(f"{path} must be a mapping at the top level")
    defaults = raw.get("defaults")
    if not isinstance(defaults, dict):
        raise SwarmlabError(f"{path}: a 'defaults' mapping is required")
    unknown = sorted(set(raw) - TOP_LEVEL_KEYS - set(OVERRIDE_SECTIONS))
    if unknown:
        hint = (f"; set {', '.join(u for u in unknown if u in defaults)} under defaults or a profile"
                if any(u in defaults for u in unknown) else "")
        raise SwarmlabError(f"{path}: unknown top-level key(s) {unknown}; known: {sorted(TOP_LEVEL_KEYS)} and the override "
                            f"sections {list(OVERRIDE_SECTIONS)}{hint}")
    top_overrides = {k: raw[k] or {} for k in OVERRIDE_SECTIONS if k in raw}
    profiles = raw.get("profiles") or {}
    name = profile or raw.get("profile")
    if name is None:  # silently falling back to the bare defaults would run settings nobody chose
        raise SwarmlabError(f"{path} has no `profile:` key: add `profile: cpu` (one of {sorted(profiles)}) or pass --profile")
    if not isinstance(name, str) or name not in profiles:
        raise SwarmlabError(f"{path}: unknown profile {name!r}; choose one of {sorted(profiles)}")
    resolved = _merge(defaults, profiles[name] or {}, "", f"{path} (profile {name!r})")
    resolved = _merge(resolved, top_overrides, "", f"{path} (top-level overrides)")
    resolved["profile"] = name
    resolved["paths"] = raw.get("paths") or {}
    resolved["schedule"] = raw.get("schedule") or {}
    resolved["params_file"] = str(path)
    return resolved


def read_yaml(path: Path):
    """The parsed YAML file; a syntax error is one line with the file, line and column."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SwarmlabError(f"{where}: not valid YAML: {problem}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SwarmlabError(f"cannot read {path}: {exc}") from None
    return raw


def validate_all(path: str | Path | None = None) -> list[str]:
    """Resolve every profile once (so a typo in an unused profile is caught too); returns their names."""
    path = Path(path) if path else PARAMS_FILE
    raw = read_yaml(path)
    names = sorted(raw.get("profiles") or {})
    for name in names:
        params = load_params(path, name)
        if "tasks" in params:  # a params file of the project's layout: every section's values too
            from pipelines.common.sections import SECTIONS, section, task_section

            for key in SECTIONS:
                if key in params:
                    section(params, key)
            for key in params["tasks"]:
                task_section(params, key)
    return names
