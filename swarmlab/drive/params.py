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
profile; a top-level ``train`` key also wins over every task's own ``tasks.<k>.train`` value (and per-model
ones). Only these two: every stage that reads one declares it in dvc.yaml, so DVC reruns exactly the stages an
override changes (a top-level section nobody declared would leave stale results "up to date").
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import yaml

from swarmlab.errors import SwarmlabError
from swarmlab.paths import PARAMS_FILE
from swarmlab.drive.sections import TaskSection

TOP_LEVEL_KEYS = {"profile", "paths", "defaults", "profiles", "schedule"}  # schedule: declared by no stage (see above)
# sections whose keys a profile may add although the defaults' section omits them (engine settings, config fields, one
# model's own mapping): their schema is TrainConfig or the model's config, checked where they are used
PER_MODEL_SECTION = re.compile(r"tasks\.[^.]+\.(train|model_overrides)")
# mappings that a profile replaces whole rather than key by key: an ablation grid's `vary` is a list of dotted paths
REPLACED_WHOLE = re.compile(r"ablations\.[^.]+\.(vary|set)")
OVERRIDE_SECTIONS = ("augment", "train")  # top-level sections that override every profile (declared in dvc.yaml)


def _type_name(value) -> str:
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "mapping"}.get(
        type(value), type(value).__name__
    )


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
        if key not in schema and PER_MODEL_SECTION.fullmatch(where):
            # an engine setting or config field the defaults' section leaves out, or one model's (or a glob's) own
            # settings: checked where they are used (swarmlab.drive.run_config: train_settings, build_model)
            out[key] = copy.deepcopy(value)
            continue
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise SwarmlabError(f"{source}: unknown key {path!r}; known keys here: {known}")
        default = schema[key]
        _check_value(path, default, value, source)
        if (
            isinstance(default, dict) and default and not REPLACED_WHOLE.fullmatch(path)
        ):  # a structured section: recurse
            out[key] = _merge(default, value, path, source)
        else:  # leaf, list or free-form mapping: replaced whole
            out[key] = copy.deepcopy(value)
    return out


def _with_section_fields(defaults: dict) -> dict:
    """``defaults`` with every task section holding every ``TaskSection`` field (its default where the file omits it),
    so that a profile may set a task's ``seeds`` or ``skip`` without each section of the defaults spelling them out."""
    out = copy.deepcopy(defaults)
    fields = {f.name: f for f in dataclasses.fields(TaskSection)}
    for section in (out.get("tasks") or {}).values():
        if isinstance(section, dict):
            for name, field in fields.items():
                if name not in section:
                    section[name] = (
                        field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
                    )
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
        hint = (
            f"; set {', '.join(u for u in unknown if u in defaults)} under defaults or a profile"
            if any(u in defaults for u in unknown)
            else ""
        )
        raise SwarmlabError(
            f"{path}: unknown top-level key(s) {unknown}; known: {sorted(TOP_LEVEL_KEYS)} and the override "
            f"sections {list(OVERRIDE_SECTIONS)}{hint}"
        )
    top_overrides = {k: raw[k] or {} for k in OVERRIDE_SECTIONS if k in raw}
    profiles = raw.get("profiles") or {}
    name = profile or raw.get("profile")
    if name is None:  # silently falling back to the bare defaults would run settings nobody chose
        raise SwarmlabError(
            f"{path} has no `profile:` key: add `profile: cpu` (one of {sorted(profiles)}) or pass --profile"
        )
    if not isinstance(name, str) or name not in profiles:
        raise SwarmlabError(f"{path}: unknown profile {name!r}; choose one of {sorted(profiles)}")
    resolved = _merge(_with_section_fields(defaults), profiles[name] or {}, "", f"{path} (profile {name!r})")
    resolved = _merge(resolved, top_overrides, "", f"{path} (top-level overrides)")
    _reach_every_task(resolved, top_overrides.get("train") or {})
    resolved["profile"] = name
    resolved["paths"] = _paths(raw.get("paths"), path)
    resolved["schedule"] = raw.get("schedule") or {}
    resolved["params_file"] = str(path)
    return resolved


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names a key twice (PyYAML keeps the last one silently, so a
    setting written twice would run the value further down without a word)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base class says so
                break
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str):
    """``yaml.safe_load`` that refuses duplicate keys in a mapping."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def _reach_every_task(resolved: dict, top_train: dict) -> None:
    """A top-level ``train:`` override (``dvc exp run -S +train.lr=3e-4``) is what every task trains with: it wins
    over a task's own ``tasks.<k>.train`` value of the same key, and over a per-model mapping's, which would
    otherwise keep the override from 6 of the 7 tasks without a word."""
    for section in (resolved.get("tasks") or {}).values():
        train = section.get("train") if isinstance(section, dict) else None
        if not isinstance(train, dict):
            continue
        for key, value in train.items():
            if isinstance(value, dict):  # one model's (or a glob's) own settings
                value.update({k: copy.deepcopy(v) for k, v in top_train.items() if k in value})
            elif key in top_train:
                train[key] = copy.deepcopy(top_train[key])


PATH_KEYS = ("datasets",)  # the folders params.yaml may point at (`paths:`)


def _paths(paths, where: Path) -> dict:
    """``paths:``: a mapping of known names to non-empty text (a path)."""
    if paths is None:
        return {}
    if not isinstance(paths, dict):
        raise SwarmlabError(f"{where}: paths must be a mapping like {{datasets: ../shared/datasets}}, got {paths!r}")
    unknown = sorted(set(map(str, paths)) - set(PATH_KEYS))
    if unknown:
        raise SwarmlabError(f"{where}: unknown key(s) {unknown} under paths; known: {', '.join(PATH_KEYS)}")
    for key, value in paths.items():
        if not isinstance(value, str) or not value.strip():
            raise SwarmlabError(
                f"{where}: paths.{key} must be a folder path (text), got {type(value).__name__} {value!r}"
            )
    return dict(paths)


def read_yaml(path: Path):
    """The parsed YAML file; a syntax error or a key written twice is one line with the file, line and column."""
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8")) or {}
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
            from swarmlab.drive.sections import SECTIONS, section, task_section

            for key in SECTIONS:
                if key in params:
                    section(params, key)
            for key in params["tasks"]:
                task_section(params, key)
    return names
