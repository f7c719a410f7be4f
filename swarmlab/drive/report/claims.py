"""The papers' claims as data (``swarmlab/drive/report/claims.yaml``): loaded, checked, one line per bad entry.

Each claim names the comparison that decides it (``decided_by``); ``swarmlab.drive.report.ledger`` computes its verdict
from the metrics files. The format is described at the top of the YAML file and in docs/reports.md.

    python -m swarmlab.drive.report.claims [FILE]    # check a claims file: one `error: ...` line per bad entry, exit 2
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
from pathlib import Path

import yaml

from swarmlab.drive.params import load_yaml
from swarmlab.errors import SwarmlabError

CLAIMS_FILE = Path(__file__).with_name("claims.yaml")
PAPERS = ("000", "001", "002", "003")
FIELDS = ("id", "paper_id", "section", "words", "metric", "paper", "paper_profile", "decided_by")
OPTIONAL = ("requires", "note")
OPS = (">=", "<=", ">", "<", "==")
DIRECTIONS = ("a_higher", "a_lower", "equal", "a_not_worse")
REQUIRES = ("cuda",)
# decided_by.kind -> (required keys, optional keys)
KINDS = {
    "threshold": (("task", "model", "metric", "op", "value"), ("tuning", "seeds")),
    "pairwise": (("task", "a", "b", "metric", "direction", "protocol"), ("margin", "grid", "tuning", "seeds")),
    "ratio": (("source", "numerator", "op", "value"), ("denominator", "path", "count")),
    "delta": (("grid", "task", "model", "metric", "with", "without", "low", "high", "protocol"), ("seeds",)),
    "best_of": (("grid", "metric", "mode", "best"), ("seeds",)),
    "figure": (("task", "glob"), ()),
    "untestable": (("reason", "command"), ()),
}
SELECTOR = ("model", "tokens", "field")
RATIO_SOURCES = ("memory_scaling", "table")


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    paper_id: str  # 000-003: the paper the claim is quoted from
    section: str
    words: str
    metric: str
    paper: dict
    paper_profile: str
    decided_by: dict
    requires: str | None = None
    note: str = ""

    @property
    def kind(self) -> str:
        return self.decided_by["kind"]

    @property
    def task(self) -> str | None:
        return self.decided_by.get("task")

    @property
    def protocol_hash(self) -> str:
        """A short hash of the claim's decisive experiment as written (``decided_by``, with its seed count, tuning
        grid and test, and the budget it is judged at): the first test read of the experiment records it, and a
        later change shows as an amendment (swarmlab/drive/report/amendments.yaml) or is flagged."""
        spec = {"decided_by": self.decided_by, "paper_profile": self.paper_profile}
        return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:12]


def models_of(value) -> list[str]:
    """A model field as a list: the paper's model first, then the smaller ones that stand in for it."""
    return [value] if isinstance(value, str) else list(value)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _model_field(value) -> bool:
    return (isinstance(value, str) and bool(value)) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)
    )


def check_entry(entry, profiles: set[str] | None = None) -> str | None:
    """What is wrong with one entry (one line), or None."""
    if not isinstance(entry, dict):
        return f"an entry is a {type(entry).__name__}, not a mapping"
    missing = [k for k in FIELDS if entry.get(k) is None or entry.get(k) == ""]
    unknown = sorted(set(entry) - set(FIELDS) - set(OPTIONAL))
    if missing or unknown:
        return f"missing {missing} / unknown {unknown} fields; fields are {list(FIELDS + OPTIONAL)}"
    if str(entry["paper_id"]) not in PAPERS:
        return f'paper_id {entry["paper_id"]!r} is not one of {", ".join(PAPERS)} (quote it: "000")'
    if not isinstance(entry["paper"], dict) or not all(
        _number(v) or isinstance(v, list) for v in entry["paper"].values()
    ):
        return "paper must map names to the paper's numbers"
    if profiles is not None and entry["paper_profile"] not in profiles:
        return (
            f"paper_profile {entry['paper_profile']!r} is not a profile of params.yaml ({', '.join(sorted(profiles))})"
        )
    if entry.get("requires") is not None and entry["requires"] not in REQUIRES:
        return f"requires {entry['requires']!r} is not one of {REQUIRES}"
    d = entry["decided_by"]
    if not isinstance(d, dict) or d.get("kind") not in KINDS:
        return f"decided_by.kind must be one of {', '.join(KINDS)}"
    need, extra = KINDS[d["kind"]]
    missing = [k for k in need if d.get(k) is None or d.get(k) == ""]
    unknown = sorted(set(d) - set(need) - set(extra) - {"kind"})
    if missing or unknown:
        return f"decided_by ({d['kind']}): missing {missing} / unknown {unknown}; it takes {list(need + extra)}"
    kind = d["kind"]
    if "op" in d and d["op"] not in OPS:
        return f"decided_by.op {d['op']!r} is not one of {' '.join(OPS)}"
    for key in ("value", "low", "high", "margin"):
        if key in d and not _number(d[key]):
            return f"decided_by.{key} must be a finite number, not {d[key]!r}"
    if kind == "threshold" and not _model_field(d["model"]):
        return "decided_by.model must be a registered model's name or a list of them"
    if kind == "pairwise":
        if not (_model_field(d["a"]) and _model_field(d["b"])):
            return "decided_by.a and .b must be model names (or lists of them)"
        if d["direction"] not in DIRECTIONS:
            return f"decided_by.direction {d['direction']!r} is not one of {', '.join(DIRECTIONS)}"
        if d["direction"] in ("equal", "a_not_worse") and "margin" not in d:
            return f"decided_by.direction {d['direction']} needs a margin (the largest difference that counts as none)"
    if kind == "ratio":
        if d["source"] not in RATIO_SOURCES:
            return f"decided_by.source {d['source']!r} is not one of {', '.join(RATIO_SOURCES)}"
        if d["source"] == "table" and not d.get("path"):
            return "decided_by.source table needs a path (relative to reports/)"
        if not isinstance(d.get("count", False), bool):
            return "decided_by.count must be true or false (true: the fields are counts, such as FLOPs, not timings)"
        for side in ("numerator", "denominator"):
            sel = d.get(side)
            if sel is not None and (
                not isinstance(sel, dict) or sorted(sel) != sorted(SELECTOR) or not _model_field(sel.get("model"))
            ):
                return f"decided_by.{side} must have exactly {', '.join(SELECTOR)} (model: a name or a list of names)"
    if "seeds" in d and not (isinstance(d["seeds"], int) and not isinstance(d["seeds"], bool) and d["seeds"] >= 2):
        return f"decided_by.seeds must be a whole number of seeds, 2 or more, not {d['seeds']!r}"
    if "tuning" in d and not (isinstance(d["tuning"], str) and d["tuning"]):
        return "decided_by.tuning must name the ablation grid that chose the models' settings on validation"
    if kind == "delta" and d["low"] > d["high"]:
        return f"decided_by.low {d['low']} is above high {d['high']}"
    if kind == "best_of" and (d["mode"] not in ("max", "min") or not isinstance(d["best"], list)):
        return "decided_by.mode must be max or min, and best a list of point labels"
    return None


def load_claims(path: Path = CLAIMS_FILE, profiles: set[str] | None = None) -> list[Claim]:
    """Every claim of the file, checked; all bad entries at once in one error, one clause per entry."""
    errors, claims = check_file(path, profiles)
    if errors:
        raise SwarmlabError(f"{len(errors)} bad claim(s) in {path}: " + " | ".join(errors))
    return claims


def check_file(path: Path = CLAIMS_FILE, profiles: set[str] | None = None) -> tuple[list[str], list[Claim]]:
    """``(errors, claims)``: one line per bad entry, naming it by id (or position)."""
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        return [f"cannot read {path}: {str(exc).splitlines()[0]}"], []
    entries = raw.get("claims") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        return [f"{path} holds no `claims:` list"], []
    errors, claims, seen = [], [], set()
    for i, entry in enumerate(entries):
        name = entry.get("id", f"claims[{i}]") if isinstance(entry, dict) else f"claims[{i}]"
        problem = check_entry(entry, profiles)
        if problem is None and entry["id"] in seen:
            problem = "id used twice; ids must be unique"
        if problem:
            errors.append(f"{name}: {problem}")
            continue
        seen.add(entry["id"])
        claims.append(Claim(**{**entry, "paper_id": str(entry["paper_id"])}))
    return errors, claims


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    errors, claims = check_file(Path(args[0]) if args else CLAIMS_FILE)
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    if errors:
        sys.exit(2)
    print(f"{len(claims)} claims, all valid")


if __name__ == "__main__":
    main()
