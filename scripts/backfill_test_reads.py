"""Recover the test-split reads made before the log existed, from git history, into ``reports/test_reads.jsonl``.

Walks ``git log --reverse`` over every committed version of

* every ``reports/**/test_reads.json`` (the pipeline's, the claims pieces' kept under ``reports/claims/``, side runs'
  such as ``reports/side/long_gpu/lra_text/``): one line per read it records, its ``result`` from the sibling
  ``metrics.json`` at the same commit (or the file the entry names); and, where that metrics.json holds a run
  evaluated at another commit than any read recorded for it, that later read too: a rerun under the same settings,
  which the per-folder record does not add (a reproduction);
* every ``reports/**/ablations/<grid>/results.json``: each ok point's ``evaluate`` entries are grid reads (task and
  profile from results.json, model and seed from the entry, ``overrides`` the point's, commit the entry's
  ``git_commit``; no identity or training digests: results.json records none).

A read already in the log is skipped (the same report folder, run, identity and training digests and commit; a grid
read: the same grid, point, run and commit; a claims piece's work folder ``outputs/claims/reports/...`` counts as the
``reports/claims/...`` it is kept in), so a second run adds nothing. A recovered line has ``backfilled:
"<short commit>:<path>"`` and the commit's author date as ``time``; the lines go in by time, and each gets its ``kind``
from the lines before it in time (swarmlab/drive/report/testsplit.py). ``registered``, ``options`` and the model config
``overrides`` are resolved from params.yaml at that commit (else at HEAD) with this code, kept where they reproduce the
recorded identity; ``train_commit`` is the training's ``git_commit`` where its metrics entry has one (runs trained
since it was recorded), and ``data_fingerprint`` is unknown (null).

    python scripts/backfill_test_reads.py [--repo PATH] [--log PATH] [--dry-run]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import re
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import yaml

from swarmlab.drive.ablations import grid_spec, point_params
from swarmlab.errors import SwarmlabError, cli
from swarmlab.drive.params import load_params
from swarmlab.paths import REPO_ROOT
from swarmlab.drive.report.testsplit import LOG, READS, append_reads, digest, load_log, log_line, log_path, read_kind
from swarmlab.drive.report.testsplit import read_result
from swarmlab.drive.run_config import model_overrides
from swarmlab.drive.runs import make_task

READS_PATH = re.compile(r"^reports/(?:.+/)?test_reads\.json$")
METRICS_PATH = re.compile(r"^reports/(?:.+/)?evaluate/[^/]+/metrics\.json$")
GRID_PATH = re.compile(r"^reports/(?:.+/)?ablations/(?P<grid>[^/]+)/results\.json$")
NULL_BLOB = "0" * 40
KEPT = {"outputs/claims/reports/": "reports/claims/"}  # where a claims piece keeps them


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def show(repo: Path, rev: str, path: str) -> str | None:
    proc = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def show_json(repo: Path, rev: str, path: str):
    text = show(repo, rev, path)
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def versions(repo: Path) -> list[tuple[str, str, str]]:
    """``(commit, time, path)`` of each committed version of a file this script reads, first commit first (a version
    is a path and its content: the first commit that holds it)."""
    out = git(repo, "log", "--reverse", "--full-history", "-m", "--no-renames", "--raw", "--no-abbrev",
              "--format=@%H %aI", "--", "reports")  # fmt: skip
    seen, found, commit, time = set(), [], None, None
    for row in out.splitlines():
        if row.startswith("@"):
            commit, date = row[1:].split()
            time = datetime.fromisoformat(date).astimezone(UTC).isoformat(timespec="seconds")
        elif row.startswith(":"):
            meta, path = row.split("\t", 1)
            blob = meta.split()[3]
            if blob == NULL_BLOB or (path, blob) in seen:
                continue
            if READS_PATH.match(path) or METRICS_PATH.match(path) or GRID_PATH.match(path):
                seen.add((path, blob))
                found.append((commit, time, path))
    return found


def kept_where(where: str | None) -> str | None:
    for work, kept in KEPT.items():
        if where and where.startswith(work):
            return kept + where[len(work) :]
    return where


def workspace(path: str) -> str:
    """A grid point's workspace as results.json names it, relative to the repo root: one recorded as an absolute path
    (of the clone it ran in, before results.json named it relative) from its ``outputs/`` on."""
    return path[path.index("/outputs/") + 1 :] if path.startswith("/") and "/outputs/" in path else path


def group(line: dict) -> str:
    """What the summary counts a line under: its grid, else the root of its report folder."""
    if line.get("grid"):
        return f"grid {line['grid']}"
    where = line.get("where") or "?"
    return where.split("/evaluate/")[0] if "/evaluate/" in where else where.rsplit("/", 1)[0]


def key(line: dict) -> tuple:
    """What makes two lines the same read."""
    if line.get("grid"):
        return ("grid", line["grid"], line.get("point"), line["run"], line.get("commit"))
    return (kept_where(line.get("where")), line["run"], line.get("identity"), line.get("train"), line.get("commit"))


class Views:
    """``registered``, ``options`` and the model config of a task as params.yaml at a commit resolves them (this code),
    else as it does at HEAD; None where neither resolves."""

    def __init__(self, repo: Path):
        self.repo, self._params, self._views = repo, {}, {}

    def params(self, rev: str, profile: str) -> dict | None:
        if (rev, profile) not in self._params:
            self._params[rev, profile] = self._load(rev, profile)
        return self._params[rev, profile]

    def _load(self, rev: str, profile: str) -> dict | None:
        text = show(self.repo, rev, "params.yaml")
        if text is None:
            return None
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(text)
            f.flush()
            try:
                return load_params(f.name, profile)
            except (SwarmlabError, yaml.YAMLError, ValueError, TypeError, KeyError):
                return None

    def view(self, rev: str, profile: str, task: str, model: str, grid: str | None = None, point: str | None = None):
        """``(registered, options, model config)``, or None where the params do not resolve them."""
        at = (rev, profile, task, model, grid, point)
        if at not in self._views:
            self._views[at] = self._view(*at)
        return self._views[at]

    def _view(self, rev, profile, task, model, grid, point):
        params = self.params(rev, profile)
        if params is None:
            return None
        try:
            if grid:
                params = point_params(params, grid_spec(params, grid), json.loads(point), grid)
            t = make_task(params, task)
            return t.name, dataclasses.asdict(t.options), model_overrides(params, task, model)
        except (SwarmlabError, ValueError, TypeError, KeyError):
            return None

    def resolve(self, commit: str, profile: str, task: str, read: dict, **point) -> dict:
        """``registered``, ``options``, ``overrides`` for ``read``: the first view (at the commit, then at HEAD) that
        reproduces its identity digest; else the first that resolves, without the model config (unverified)."""
        views = [self.view(rev, profile, task, read["model"], **point) for rev in (commit, "HEAD")]
        views = [v for v in views if v]
        for registered, options, overrides in views:
            identity = {"task": task, "registered": registered, "options": options, "model": read["model"]}
            if digest({**identity, "overrides": overrides, "seed": read["seed"]}) == read.get("identity"):
                return {"registered": registered, "options": options, "overrides": overrides}
        if views:
            registered, options, _ = views[0]
            return {"registered": registered, "options": options, "overrides": None}
        return {"registered": None, "options": None, "overrides": None}


def train_metrics(folder: str) -> str:
    """The train stage's metrics.json beside an evaluate folder (``reports[/claims]/evaluate/<task>``), or a side
    run's ``train_metrics.json`` in its folder."""
    root, _, task = folder.rpartition("/evaluate/")
    return f"{root}/train/{task}/metrics.json" if root else f"{folder}/train_metrics.json"


def runs_of(metrics) -> dict:
    return {k: v for k, v in (metrics or {}).items() if isinstance(v, dict) and "model" in v}


def same_commit(a: str | None, b: str | None) -> bool:
    """The same commit, where one may be abbreviated (a hand-written record's ``b45e467``); ``<sha>-dirty`` is not
    ``<sha>``: a run from a checkout with uncommitted code is a read of its own."""
    if not a or not b:
        return False
    short = lambda c: len(c) < 40 and "-" not in c
    return a == b or (short(a) and b.startswith(a)) or (short(b) and a.startswith(b))


def folder_reads(repo: Path, views: Views, commit: str, time: str, path: str) -> list[dict]:
    """The reads one version of a ``test_reads.json`` records."""
    record = show_json(repo, commit, path) or {}
    folder = path.rsplit("/", 1)[0]
    task = folder.rsplit("/", 1)[1]
    sibling = runs_of(show_json(repo, commit, f"{folder}/metrics.json"))
    trained = runs_of(show_json(repo, commit, train_metrics(folder)))
    out = []
    for read in record.get("reads") or []:
        if read.get("file"):  # a side run's record names its metrics file (written by hand, after the fact)
            runs = show_json(repo, commit, read["file"]) or {}  # keyed by run, or (a side run's) by model
            metrics = (
                runs.get(read["run"]) or runs.get(f"{read['model']}-seed{read['seed']}") or runs.get(read["model"])
            )
        else:
            metrics = sibling.get(read["run"])
            metrics = metrics if metrics and same_commit(metrics.get("git_commit"), read.get("git_commit")) else None
        out.append(stage_line(views, read, task, folder, metrics, trained.get(read["run"]), commit, time, path))
    return out


def reproductions(repo: Path, views: Views, commit: str, time: str, path: str) -> list[dict]:
    """The runs of one version of an evaluate ``metrics.json`` evaluated at another commit than every read its
    sibling test_reads.json records for them: the evaluate stage read them again under the same settings (it refuses
    other settings without --retest, which records them), and the per-folder record adds nothing for that."""
    folder = path.rsplit("/", 1)[0]
    task = folder.rsplit("/", 1)[1]
    record = show_json(repo, commit, f"{folder}/{READS}")
    if not record or record.get("note"):  # no record, or one written by hand
        return []
    reads = record.get("reads") or []
    trained = runs_of(show_json(repo, commit, train_metrics(folder)))
    out = []
    for run, metrics in runs_of(show_json(repo, commit, path)).items():
        mine = [r for r in reads if r["run"] == run]
        if not mine or any(same_commit(r.get("git_commit"), metrics.get("git_commit")) for r in mine):
            continue
        read = {**mine[-1], "git_commit": metrics.get("git_commit")}  # the run's latest settings: the ones it reran
        out.append(stage_line(views, read, task, folder, metrics, trained.get(run), commit, time, path))
    return out


def stage_line(views, read: dict, task: str, folder: str, metrics, trained, commit: str, time: str, path: str) -> dict:
    """The log line of one read a stage folder recorded, from the version of ``path`` at ``commit``."""
    return log_line(
        read,
        task=task,
        **views.resolve(commit, read.get("profile"), task, read),
        data_fingerprint=None,
        where=folder,
        result=read_result(metrics),
        train_commit=(trained or {}).get("git_commit"),
        time=time,
        backfilled=f"{commit[:7]}:{path}",
    )


def grid_reads(repo: Path, views: Views, commit: str, time: str, path: str) -> list[dict]:
    """The test reads of the ok points of one version of an ablation grid's ``results.json``."""
    results = show_json(repo, commit, path) or {}
    grid, task, profile = (
        results.get("grid") or GRID_PATH.match(path)["grid"],
        results.get("task"),
        results.get("profile"),
    )
    out = []
    for point in results.get("points") or []:
        if point.get("status") != "ok" or not task:
            continue
        where = f"{workspace(point['workspace'])}/reports/evaluate/{task}" if point.get("workspace") else None
        resolved = json.dumps({"model": point.get("model"), "overrides": point.get("overrides") or {}}, sort_keys=True)
        for run, metrics in runs_of(point.get("evaluate")).items():
            read = {
                "run": run,
                "model": metrics.get("model") or point.get("model"),
                "seed": metrics.get("seed"),
                "profile": profile,
                "git_commit": metrics.get("git_commit"),
            }
            view = views.resolve(commit, profile, task, read, grid=grid, point=resolved)
            out.append(
                log_line(
                    read,
                    task=task,
                    registered=view["registered"],
                    options=view["options"],
                    overrides=point.get("overrides") or {},
                    data_fingerprint=None,
                    where=where,
                    result=read_result(metrics),
                    train_commit=((point.get("train") or {}).get(run) or {}).get("git_commit"),
                    time=time,
                    grid=grid,
                    point=point["point"],
                    backfilled=f"{commit[:7]}:{path}",
                )
            )
    return out


def backfill(repo: Path, log: Path, *, dry_run: bool = False) -> list[dict]:
    """The lines the history holds and the log lacks, appended (unless ``dry_run``) in time order."""
    existing = load_log(log)
    known = {key(line) for line in existing}
    views, found = Views(repo), []
    for commit, time, path in versions(repo):
        if READS_PATH.match(path):
            lines = folder_reads(repo, views, commit, time, path)
        elif METRICS_PATH.match(path):
            lines = reproductions(repo, views, commit, time, path)
        else:
            lines = grid_reads(repo, views, commit, time, path)
        for line in lines:
            if key(line) not in known:
                known.add(key(line))
                found.append(line)
    found.sort(key=lambda line: line["time"])  # stable: a commit's lines keep the order they were found in
    timeline = sorted([*existing, *found], key=lambda line: line["time"])  # stable: the log's lines before ours
    new = {id(line) for line in found}
    for i, line in enumerate(timeline):
        if id(line) in new:
            line["kind"] = read_kind(line, timeline[:i])
    if found and not dry_run:
        append_reads(found, log)
    return found


@cli
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=None, help="git repository to read (default: this one)")
    parser.add_argument(
        "--log", default=None, help="log to append to (default: $SWARMLAB_TEST_READ_LOG, else <repo>/" + LOG + ")"
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be added; write nothing")
    args = parser.parse_args(argv)
    repo = Path(args.repo).resolve() if args.repo else REPO_ROOT
    log = Path(args.log) if args.log else (log_path() if repo == REPO_ROOT else repo / LOG)
    found = backfill(repo, log, dry_run=args.dry_run)
    counts = collections.Counter(f"{group(line)}  {line['kind']}" for line in found)
    for what, n in sorted(counts.items()):
        print(f"{n:4d}  {what}")
    print(f"{'would add' if args.dry_run else 'added'} {len(found)} line(s) to {log}")


if __name__ == "__main__":
    main()
