"""The papers' numbers (``pipelines/paper_baselines.yaml``): loaded and checked, and how each row maps to our runs.

Each row that has a counterpart names it: ``ours`` (a registered model) and ``overrides`` (the config fields the
paper's row fixes, e.g. ``{head: pma, num_inds: 32}``). ``matches(entry, config)`` says whether one of our runs, with
its effective model config, is the row's configuration: our runs are compared only with rows they match (no
closest-row guessing). Used by the ``paper_baselines`` stage and by the report.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

from swarmlab.drive.params import load_yaml
from swarmlab.errors import SwarmlabError
from swarmlab.paths import REPO_ROOT

BASELINES_FILE = REPO_ROOT / "pipelines" / "paper_baselines.yaml"
EXPERIMENT = "paper-baselines"
REQUIRED = ("key", "source", "where", "task", "model", "metrics")
OPTIONAL = ("ours", "overrides", "config", "quote", "note")


def load_baselines(path: Path = BASELINES_FILE) -> tuple[dict, list[dict]]:
    """``(sources, entries)`` of the table, checked: unique keys, known sources, finite numeric metrics."""
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SwarmlabError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    sources, entries = raw.get("sources") or {}, raw.get("baselines") or []
    seen = set()
    for i, entry in enumerate(entries):
        where = f"{path}: baselines[{i}]"
        missing = [k for k in REQUIRED if entry.get(k) in (None, "", {})]
        unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
        if missing or unknown:
            raise SwarmlabError(
                f"{where}: missing {missing} / unknown {unknown} fields; fields are {REQUIRED + OPTIONAL}"
            )
        if entry["key"] in seen:
            raise SwarmlabError(
                f"{where}: key {entry['key']!r} is used twice; keys must be unique (they find the run again)"
            )
        seen.add(entry["key"])
        if entry["source"] not in sources or not sources[entry["source"]].get("citation"):
            raise SwarmlabError(f"{where}: source {entry['source']!r} has no citation under `sources`")
        for name, value in entry["metrics"].items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SwarmlabError(f"{where}: metric {name} = {value!r} must be a finite number")
        if entry.get("overrides") is not None and (not isinstance(entry["overrides"], dict) or not entry.get("ours")):
            raise SwarmlabError(f"{where}: overrides must be a mapping of config fields of `ours`")
    return sources, entries


def normalise_quote(text: str) -> str:
    """Text with table and math markup removed and whitespace collapsed, for comparing quotes with a paper."""
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\\pm|±|[|$*]", " ", text)
    return " ".join(text.split())


def matches(entry: dict, config: dict | None) -> bool:
    """Whether a run whose effective model config is ``config`` is the configuration of paper row ``entry``: every
    field the row fixes (``overrides``) has the row's value. A row without ``overrides`` fixes nothing beyond its model."""
    if config is None:
        return False
    return all(config.get(k) == v for k, v in (entry.get("overrides") or {}).items())
