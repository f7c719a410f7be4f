"""One provenance for every number: the code commit, whether the *code* differed from it, the run id; and whether the
number is stale (its stage's dependencies changed since ``dvc.lock`` was written).

* ``swarmlab.paths.code_commit(root)`` (a base module: every stage records it, through ``git_commit``): ``<sha>``, or
  ``<sha>-dirty`` when a tracked file outside ``reports/``, ``data/``, ``outputs/`` and ``dvc.lock`` (results and the
  pipeline's own record, which DVC rewrites between stages) differs from that commit. ``$SWARMLAB_GIT_COMMIT`` wins
  (a copy on a GPU machine may carry a ``.git`` that does not match the tree).
* ``provenance(entry, folder)`` is what every reader uses: the commit a run recorded in its own folder
  (``wall.json``, written by whoever ran it) wins over the metrics' ``git_commit`` field, so one run has one commit.
* ``stale_stages(root)`` compares each stage's dependencies in ``dvc.lock`` (DVC's md5s: a file's md5, a folder's
  ``.dir`` md5 over its sorted files) and its params with the working tree, then marks every stage downstream of a
  stale one. No DVC cache and no DVC import: fast, and the same in CI. A dependency that is absent here (a DVC-cached
  data folder in a fresh clone) is not evidence of change: it is skipped, and its producer's staleness decides.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import yaml

IGNORED_DIRS = ("__pycache__",)  # .dvcignore
IGNORED_SUFFIXES = (".pyc",)


class DvcYamlLoader(yaml.SafeLoader):
    """YAML as DVC reads it (YAML 1.2 numbers): DVC writes ``3e-05`` into dvc.lock for a param written ``3.0e-5``, a
    float to DVC and to YAML 1.2 but a string to PyYAML's YAML 1.1 rules, which would mark the stage stale."""


DvcYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)


def _yaml(text: str):
    return yaml.load(text, Loader=DvcYamlLoader)


# -------------------------------------------------------------------------------------- a number's provenance


@dataclasses.dataclass(frozen=True)
class Provenance:
    commit: str | None  # full or short sha, None when the run recorded none
    code_changed: bool | None  # True: the code differed from the commit; None: unknown
    run_id: str | None
    source: str  # where the commit was read

    def __str__(self) -> str:
        if not self.commit:
            return "commit unknown"
        text = self.commit[:7]
        if self.code_changed:
            text += " (code differed from it)"
        return text + (f" · run `{self.run_id[:8]}`" if self.run_id else "")


def provenance(entry: dict | None, folder: Path | None = None, run_file: dict | None = None) -> Provenance:
    """The provenance of one run's numbers: ``entry`` is its metrics (``git_commit``), ``folder`` where its files lie
    (a ``wall.json`` there names the commit it ran, and wins), ``run_file`` its ``run.json`` (``run_id``)."""
    wall = _json(Path(folder) / "wall.json") if folder is not None else None
    raw, source = None, ""
    if isinstance(wall, dict) and wall.get("commit") not in (None, "", "unknown"):
        raw, source = str(wall["commit"]), "wall.json"
    elif entry and entry.get("git_commit") not in (None, "", "unknown"):
        raw, source = str(entry["git_commit"]), "metrics"
    run_id = (run_file or {}).get("run_id") or (entry or {}).get("run_id")
    if raw is None:
        return Provenance(None, None, run_id, "")
    sha, dirty = raw.split("-")[0], raw.endswith("-dirty")
    return Provenance(sha, dirty, run_id, source)


def in_history(root: Path):
    """A check of whether a commit is in the history of ``root``'s HEAD (``git merge-base --is-ancestor``), cached
    per commit; None when ``root`` is not in a git work tree (nothing to check against)."""

    def git(*args: str) -> int:
        return subprocess.run(["git", *args], cwd=root, capture_output=True).returncode

    try:
        if git("rev-parse", "--verify", "HEAD") != 0:
            return None
    except OSError:
        return None
    cache: dict[str, bool] = {}

    def known(sha: str) -> bool:
        if sha not in cache:
            cache[sha] = git("merge-base", "--is-ancestor", sha, "HEAD") == 0
        return cache[sha]

    return known


CLAIMS_LOCK = "claims/dvc.lock"  # what DVC recorded of the claims pieces (claims/dvc.yaml), relative to the repo root


def code_changes(root: Path, lock_file: str = "dvc.lock"):
    """A check of which code a result's stages depend on changed since the commit that made it: ``changed(commit,
    stages)`` lists the code dependencies that ``dvc.lock`` records for ``stages`` (``train@<task>``,
    ``evaluate@<task>``; data folders left out, and paths outside the work tree, such as the datasets: git refuses
    them) and that differ between ``commit`` and the working tree (``git diff``).
    It makes results outside DVC (the claims pieces, reports/claims) as stale-aware as the pipeline's own. None when
    ``root`` has no dvc.lock or is not a git work tree."""
    root = Path(root)
    try:
        lock = (_yaml((root / lock_file).read_text(encoding="utf-8")) or {}).get("stages") or {}
    except OSError:
        return None
    if in_history(root) is None:
        return None
    data = ("data", "outputs", "reports")
    cache: dict[tuple, list[str]] = {}

    def changed(commit: str, stages: list[str]) -> list[str]:
        deps = sorted(
            {
                d["path"]
                for name in stages
                for d in (lock.get(name) or {}).get("deps") or []
                if d["path"].split("/")[0] not in data and not d["path"].startswith(("../", "/"))
            }
        )
        key = (commit, tuple(deps))
        if key not in cache:
            out = subprocess.run(
                ["git", "diff", "--name-only", commit, "--", *deps], cwd=root, capture_output=True, text=True
            )
            files = out.stdout.split() if out.returncode == 0 else []
            cache[key] = sorted({next((d for d in deps if f == d or f.startswith(d + "/")), f) for f in files})
        return cache[key]

    return changed


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------- staleness


def file_md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dir_md5(path: Path) -> str:
    """DVC's hash of a folder: md5 of the JSON list of {md5, relpath} of its files (sorted), plus ``.dir``."""
    entries = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS)
        for name in files:
            if name.endswith(IGNORED_SUFFIXES):
                continue
            p = Path(root) / name
            entries.append({"md5": file_md5(p), "relpath": p.relative_to(path).as_posix()})
    entries.sort(key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def path_md5(path: Path) -> str | None:
    if path.is_dir():
        return dir_md5(path)
    if path.is_file():
        return file_md5(path)
    return None


def _dotted(tree, key: str):
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


@dataclasses.dataclass
class Staleness:
    stage: str
    changed: list[str]  # its own dependencies / params that changed
    upstream: list[str]  # stale stages it depends on
    lock: str = "dvc.lock"  # the lock file that recorded the stage (claims/dvc.lock: the claims pieces)

    @property
    def rerun(self) -> list[str]:
        """The stages to rerun, upstream first, this one last."""
        return [*self.upstream, self.stage]

    def __str__(self) -> str:
        why = ", ".join(self.changed) if self.changed else "an upstream stage is stale"
        pipeline = self.lock.removesuffix("dvc.lock") + "dvc.yaml:" if self.lock != "dvc.lock" else ""
        return f"stale since {self.lock} ({why}): `dvc repro {pipeline}{self.stage}` reruns {', '.join(self.rerun)}"


def stale_stages(
    root: Path, lock_file: str = "dvc.lock", params_file: str = "params.yaml", writing: tuple[str, ...] = ()
) -> dict[str, Staleness]:
    """Every stage of ``dvc.lock`` whose recorded dependencies or params differ from the tree at ``root``, or that
    depends (through a path another stage writes) on such a stage. ``writing`` names the stages running now (the
    report judging the pipeline): their own entries are the previous run's, about to be replaced, so their changes
    do not count (under ``dvc repro`` the report stage runs before DVC writes its new lock entry)."""
    root = Path(root)
    try:
        lock = _yaml((root / lock_file).read_text(encoding="utf-8")) or {}
    except OSError:
        return {}
    try:
        params = _yaml((root / params_file).read_text(encoding="utf-8")) or {}
    except OSError:
        params = {}
    stages = lock.get("stages") or {}
    hashes: dict[str, str | None] = {}
    own: dict[str, list[str]] = {}
    for name, stage in stages.items():
        changed = []
        for dep in stage.get("deps") or []:
            path = dep["path"]
            if path not in hashes:
                hashes[path] = path_md5((root / path).resolve()) if (root / path).exists() else None
            if hashes[path] is not None and hashes[path] != dep.get("md5"):
                changed.append(path)
        for pfile, values in (stage.get("params") or {}).items():
            tree = params if pfile == params_file else _load(root / pfile)
            for key, value in (values or {}).items():
                if _dotted(tree, key) != value:
                    changed.append(f"params {key}")
        own[name] = [] if name in writing else changed
    outs = {name: [o["path"] for o in stage.get("outs") or []] for name, stage in stages.items()}

    def producers(name: str) -> list[str]:
        found = []
        for dep in stages[name].get("deps") or []:
            for other, paths in outs.items():
                if other != name and any(_within(dep["path"], p) or _within(p, dep["path"]) for p in paths):
                    found.append(other)
        return found

    memo: dict[str, list[str]] = {}

    def stale_upstream(name: str, trail: tuple = ()) -> list[str]:
        if name in memo:
            return memo[name]
        result: list[str] = []
        for up in producers(name):
            if up in trail:
                continue
            chain = stale_upstream(up, trail + (name,))
            for s in chain + ([up] if own[up] or chain else []):
                if s not in result:
                    result.append(s)
        memo[name] = result
        return result

    out = {}
    for name in stages:
        up = stale_upstream(name)
        if own[name] or up:
            out[name] = Staleness(name, own[name], up, lock_file)
    return out


def locked_stages(root: Path, lock_file: str = "dvc.lock") -> set[str] | None:
    """The stages ``lock_file`` records (a stage DVC ran at least once), or None when there is no such file."""
    path = Path(root) / lock_file
    return set(_load(path).get("stages") or {}) if path.is_file() else None


def _load(path: Path):
    try:
        return _yaml(path.read_text(encoding="utf-8")) or {}
    except OSError:
        return {}


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def stage_of(kind: str, task: str | None = None) -> str:
    """The dvc.lock stage that writes a number: ``evaluate@imdb``, ``train@imdb``, ``memory_scaling``..."""
    return f"{kind}@{task}" if task else kind
