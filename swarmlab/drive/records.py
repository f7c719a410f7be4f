"""What a finished run records about itself, so that a rerun of its stage can tell it apart from a stale one.

Every run folder (``outputs/train/<task>/<run>/``) holds ``summary.json`` (its entry of the task's metrics.json) and
``run.json`` with the run's *fingerprint*: a hash of everything its result depends on. A rerun of the stage (after
a killed driver, ``dvc repro``, or by hand) keeps a finished run whose fingerprint is unchanged and trains the others,
continuing an interrupted one from its checkpoint when its fingerprint is unchanged too.

The fingerprint covers the run's settings (model, its config, the task and its options, the engine's settings, the
seed, its torch threads, and for a run bounded by net time also its CPUs and GPUs), the code the train stage
declares in dvc.yaml (``pipelines``, ``models``, ``tasks``, ``swarmlab``) and the content of the task's data folders:
so whatever makes DVC rerun the stage also makes the run train again. Scheduling (how many runs at once, which
node) is not in it: results do not depend on it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from swarmlab.engine import BEST
from swarmlab.errors import SwarmlabError
from swarmlab.integrity import file_sha256
from swarmlab.io import atomic_write_text
from swarmlab.paths import REPO_ROOT

CODE_DIRS = ("pipelines", "models", "tasks", "swarmlab")  # the code deps of train@<task> in dvc.yaml
CODE_SUFFIXES = (".py", ".yaml")
# what no train or ablate stage imports (dvc.yaml's generated deps): the report's code and its claims and amendments
# texts, whose edits must not make every trained run's fingerprint stale
CODE_EXCLUDED = ("swarmlab/drive/report",)
SUMMARY = "summary.json"  # the run's metrics entry, written inside the run folder before it is renamed into place
RUN_FILE = "run.json"  # the MLflow run id, model, task, seed and fingerprint


def _hash_tree(h, root: Path, suffixes: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> None:
    """Each file's path (from ``root``'s parent) and content into ``h``; ``exclude``: folders, from that parent."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in files:
        if suffixes and path.suffix not in suffixes:
            continue
        if "__pycache__" in path.parts:
            continue
        if any(path.relative_to(root.parent).is_relative_to(x) for x in exclude):
            continue
        h.update(str(path.relative_to(root.parent)).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(hashlib.file_digest(f, "sha256").digest())


def tree_code_hash(repo: Path) -> str:
    """sha256 of the code the train stage depends on in the checkout ``repo``: CODE_DIRS' .py and .yaml files, less
    CODE_EXCLUDED (one pass over a few hundred small files: milliseconds)."""
    h = hashlib.sha256()
    for name in CODE_DIRS:
        if (repo / name).is_dir():
            _hash_tree(h, repo / name, CODE_SUFFIXES, CODE_EXCLUDED)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """``tree_code_hash`` of this checkout."""
    return tree_code_hash(REPO_ROOT)


def data_paths(task) -> list[Path]:
    """The existing folders and files the task's options name (``data_dir``, ``source_dir``, ``source``...)."""
    paths = []
    for key, value in asdict(task.options).items():
        if isinstance(value, str) and value and (key.endswith("dir") or key == "source"):
            path = task.path(value)
            if path.exists():
                paths.append(path)
    return paths


def data_hash(task) -> str:
    """What identifies the task's data: the record of its files' hashes where the data stage wrote one (checked
    against the files when the data loads, so hashing the folder again here would read it twice per training start),
    else the sha256 of the folder's content (none for generated data such as toy_counting's)."""
    recorded = task.data_fingerprint()
    if recorded:
        return recorded
    h = hashlib.sha256()
    for path in data_paths(task):
        _hash_tree(h, path)
    return h.hexdigest()


def run_fingerprint(*, run, model_cfg, task, train_cfg, threads: int, resources: dict | None, data: str) -> str:
    """The hash of everything the result of ``run`` depends on (see the module's doc).

    ``resources`` (CPUs, GPUs) count only for a run bounded by net time: how many steps fit depends on them.
    """
    ident = {
        "model": run.model,
        "seed": run.seed,
        "model_cfg": asdict(model_cfg),
        "task": task.name,
        "key": task.key,
        "options": asdict(task.options),
        "train": {**asdict(train_cfg), "num_threads": threads},
        "resources": resources if train_cfg.time_budget_s else None,
        "code": code_hash(),
        "data": data,
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def finished_summary(folder: Path, fingerprint: str) -> dict | None:
    """The recorded metrics entry of the finished run in ``folder`` when its fingerprint is ``fingerprint``."""
    record = read_json(Path(folder) / RUN_FILE) or {}
    if record.get("fingerprint") != fingerprint:
        return None
    return read_json(Path(folder) / SUMMARY)


def same_unfinished(work: Path, fingerprint: str, checkpoint: str) -> bool:
    """Whether the interrupted run in ``work`` (a ``.run`` folder) has a checkpoint and the same fingerprint."""
    record = read_json(Path(work) / RUN_FILE) or {}
    return (Path(work) / checkpoint).is_file() and record.get("fingerprint") == fingerprint


# ------------------------------------------------------------------------------------------------------- seals
# ``run.json`` records the data fingerprint (swarmlab/integrity.py) at the start of a run and the SHA-256 of
# ``best.pt`` at its end; loading a checkpoint checks both (evaluate, sample).


def start_record(task) -> dict:
    """What ``run.json`` records at the start of a run besides its names: the data it trains on."""
    return {"data_dir": str(task.data_dir) if task.split_files else None, "data_fingerprint": task.data_fingerprint()}


def seal_run(run_dir: Path) -> None:
    """Add the SHA-256 of the finished run's ``best.pt`` to its ``run.json`` (before it replaces the previous run)."""
    path = Path(run_dir) / "run.json"
    record = json.loads(path.read_text()) if path.is_file() else {}
    record["best_sha256"] = file_sha256(Path(run_dir) / BEST)
    atomic_write_text(path, json.dumps(record) + "\n")


def check_run(task, run_dir: Path, hint: str, *, run=None, model_cfg=None) -> None:
    """A checkpoint is the one its run wrote (``best.pt`` against run.json's hash), by the run this folder is for
    (``run``'s model and seed, the task, ``model_cfg``: a copied or swapped folder is refused) and was trained on
    the data the task reads now (the fingerprints). A folder without its record is refused."""
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        raise SwarmlabError(
            f"{path} is missing: nothing records which run wrote {Path(run_dir) / BEST}; retrain it ({hint})"
        )
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise SwarmlabError(f"{path} is not valid JSON: the run folder is damaged; retrain it ({hint})") from None
    if not isinstance(record, dict):
        raise SwarmlabError(f"{path} is not a run record (a JSON object): retrain it ({hint})")
    if run is not None:
        expected = {"model": run.model, "seed": run.seed, "task": task.key}
        if any(record.get(k) != v for k, v in expected.items()):
            made = ", ".join(f"{k} {record.get(k)!r}" for k in expected)
            raise SwarmlabError(
                f"{run_dir} holds a run of {made}, not {run.model} seed {run.seed} on {task.key}: the folder was "
                f"copied or swapped; retrain it ({hint})"
            )
    if model_cfg is not None and "model_cfg" in record:
        now = json.loads(json.dumps(asdict(model_cfg), default=str))
        if record["model_cfg"] != now:
            diff = sorted(k for k in set(now) | set(record["model_cfg"]) if now.get(k) != record["model_cfg"].get(k))
            raise SwarmlabError(
                f"{run_dir} was trained with another {type(model_cfg).__name__} than the params give now "
                f"(differs in {', '.join(diff)}): retrain it ({hint})"
            )
    sealed = record.get("best_sha256")
    if sealed and file_sha256(Path(run_dir) / BEST) != sealed:
        raise SwarmlabError(
            f"{Path(run_dir) / BEST} is not the checkpoint this run wrote (its content hash differs from "
            f"run.json's): it was replaced or changed; restore it (dvc checkout) or retrain ({hint})"
        )
    trained_on, now = record.get("data_fingerprint"), task.data_fingerprint()
    if trained_on and now and trained_on != now:
        raise SwarmlabError(
            f"{run_dir} was trained on other data ({record.get('data_dir')}, fingerprint {trained_on}) "
            f"than {task.data_dir} holds now ({now}): retrain it ({hint})"
        )
