"""What the evaluate stage leaves for the ledger: per-item test scores, and the record of test-split reads.

**Items.** ``reports/evaluate/<task>/items/<run>.npz`` holds one array per score of ``Metrics.item_scores()`` (one value
per test item, in the split's order) and ``batch_latency_ms`` (the timed batches). ``swarmlab.drive.report.stats`` builds the
intervals and paired tests from them.

**Test-split discipline.** ``reports/evaluate/<task>/test_reads.json`` records every read of a test split: the run,
its *identity* (task, data options, model, model config, seed) and its training settings. Evaluating the same identity
again with the same training settings reproduces a number (a rerun after a code change) and is allowed. Evaluating it
with *different* training settings (another learning rate, budget...) is a second look at the test split to choose
between variants: refused, unless the caller names it (``--retest``); the read is then recorded as a re-read and the
report counts it. Inside ``dvc exp run`` (DVC sets ``$DVC_EXP_NAME``) such a read is an *exploratory* one instead: the
experiment loop (``dvc exp run -S train.lr=...``) completes without ``--retest``, the read is recorded and logged with
``experiment: <name>``, and the ledger lets no exploratory read decide a claim (``ledger.annotate_reads``). A first read
or a reproduction inside an experiment is an ordinary one.

**The log.** That record lives in the stage's folder, which each evaluate run replaces, a claims piece copies
over and an ablation point leaves in its side workspace; and a changed model config is a new identity there. So every
read also goes to one append-only file for the whole repository, ``reports/test_reads.jsonl`` (``log_path()``:
``$SWARMLAB_TEST_READ_LOG``, else that file under the repo root, never under ``$SWARMLAB_WORKDIR``, so that claims
pieces and grid points append to it too), committed to git (``.gitattributes``: ``merge=union``, so that branches
merge by appending). ``pipelines/evaluate.py`` appends one line per run once its evaluation has succeeded (its report
folder swapped into place); nothing rewrites or truncates the file. A line (one JSON object, keys sorted) holds:
``time`` (UTC), ``task``, ``registered``, ``data_fingerprint``, ``options``, ``model``, ``seed``, ``overrides`` (the
model config), ``run``, ``profile``, ``train_settings``; the ``identity`` and ``train`` digests of the record above;
``subject`` (a digest of task, registered task, options, model and seed, *not* the model config: the split one model
reads, whatever its settings); ``commit`` (of the evaluation) and ``train_commit`` (of the training, when its run
recorded one); ``where`` (the report folder, relative to the repo root when inside it); ``result`` (the run's scalar
``test_*`` metrics); ``grid`` and ``point`` for an ablation point; and ``kind``: ``first`` (the subject's first line),
``reproduction`` (the same identity and training settings as an earlier line) or ``re-read`` (any other later read of
the subject: it was made knowing the earlier). ``scripts/backfill_test_reads.py`` recovered the reads made before the
log from git history (every committed ``test_reads.json``, its sibling metrics and every grid's ``results.json``);
those lines carry ``backfilled: "<commit>:<path>"``. ``log_rereads`` words the subjects read more than once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from swarmlab.errors import SwarmlabError
from swarmlab.paths import REPO_ROOT, resolve

ITEMS = "items"
READS = "test_reads.json"
LOG = "reports/test_reads.jsonl"  # under the repo root (not $SWARMLAB_WORKDIR): one log for every workspace
LOG_ENV = "SWARMLAB_TEST_READ_LOG"  # another file (the tests point it into their tmp folder)
KINDS = ("first", "reproduction", "re-read")
EXPERIMENT_ENV = "DVC_EXP_NAME"  # set by `dvc exp run` for its stage commands (tracking.DVC_ENV)


def experiment() -> str | None:
    """The DVC experiment this process runs in (its name), or None outside ``dvc exp run``."""
    return os.environ.get(EXPERIMENT_ENV) or None


def digest(value) -> str:
    """A short stable hash of a JSON-able value (keys sorted)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


# -------------------------------------------------------------------------------------------------- items


def write_items(folder: Path, run: str, meter, batch_times_s: list[float]) -> Path:
    """``<folder>/items/<run>.npz``: the meter's per-item scores and the per-batch latencies (ms)."""
    scores = {name: np.asarray(v, dtype=np.float64) for name, v in meter.item_scores().items()}
    scores["batch_latency_ms"] = 1000 * np.asarray(batch_times_s, dtype=np.float64)
    path = Path(folder) / ITEMS / f"{run}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:  # np.savez_compressed writes no timestamps: same scores, same bytes
        np.savez_compressed(f, **scores)
    return path


def read_items(path: Path) -> dict[str, np.ndarray] | None:
    """The item scores of one run, or None when the run saved none (written before items existed)."""
    path = Path(path)
    if not path.is_file():
        return None
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


# ------------------------------------------------------------------------------------------- test reads


def read_entry(
    *,
    task: str,
    registered: str,
    options: dict,
    model: str,
    overrides: dict,
    seed: int,
    train: dict,
    run: str,
    profile: str,
    commit: str,
) -> dict:
    """One read of a test split: who read it, under which identity and training settings."""
    identity = {
        "task": task,
        "registered": registered,
        "options": options,
        "model": model,
        "overrides": overrides,
        "seed": seed,
    }
    return {
        "run": run,
        "model": model,
        "seed": seed,
        "identity": digest(identity),
        "train": digest(train),
        "train_settings": train,
        "profile": profile,
        "git_commit": commit,
    }


def load_reads(folder: Path) -> list[dict]:
    path = Path(folder) / READS
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text(encoding="utf-8")).get("reads") or [])
    except (OSError, ValueError, AttributeError) as exc:
        raise SwarmlabError(f"{path} is not a test-read record ({exc}): restore it from git") from None


def check_reads(
    folder: Path, entries: list[dict], *, retest: bool = False, experiment: str | None = None
) -> list[dict]:
    """The record after these reads; refuses (one line) a second read of an identity under other training settings
    unless ``retest``, or inside the DVC experiment ``experiment``, where that read is recorded as exploratory
    (``experiment: <name>``: it decides no claim). Reproducing a read (same identity, same settings) adds nothing."""
    reads = load_reads(folder)
    out = list(reads)
    for e in entries:
        earlier = [r for r in reads if r["identity"] == e["identity"]]
        if any(r["train"] == e["train"] for r in earlier):
            continue  # the same read again: a reproduction
        if earlier and not (retest or experiment):
            before = ", ".join(sorted({r["run"] + " (" + r.get("profile", "?") + ")" for r in earlier}))
            raise SwarmlabError(
                f"{e['run']}: its test split was already read under the same task, data and model config "
                f"with other training settings ({before}, {Path(folder) / READS}); choosing between "
                f"variants on the test split is refused: pick on validation, or pass --retest to read "
                f"it again (the report counts it); inside `dvc exp run` the read is exploratory and decides no claim"
            )
        out.append({**e, "retest": bool(earlier), **({"experiment": experiment} if earlier and experiment else {})})
    return out


def write_reads(folder: Path, reads: list[dict]) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / READS).write_text(json.dumps({"reads": reads}, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def rereads(reads: list[dict]) -> dict[str, int]:
    """Extra reads per model (beyond the first per identity): what the report counts."""
    seen: dict[str, set] = {}
    for r in reads:
        seen.setdefault(r["identity"], set()).add(r["train"])
    out: dict[str, int] = {}
    for r in reads:
        extra = len(seen[r["identity"]]) - 1
        if extra:
            out[r["model"]] = max(out.get(r["model"], 0), extra)
    return out


# -------------------------------------------------------------------------------------------------------- the log


def log_path() -> Path:
    """``$SWARMLAB_TEST_READ_LOG`` (relative to the repo root), else ``reports/test_reads.jsonl`` of the repo root."""
    configured = os.environ.get(LOG_ENV)
    return resolve(configured) if configured else REPO_ROOT / LOG


def subject(*, task: str, registered: str | None, options: dict | None, model: str, seed: int) -> str:
    """The digest of what a read looks at: one model (at one seed) on one task's test split. The model config and the
    training settings are left out, so that a changed config reads the same subject again."""
    return digest({"task": task, "registered": registered, "options": options, "model": model, "seed": seed})


def where(folder: Path) -> str:
    """A report folder as a log line names it: relative to the repo root when inside it, else absolute."""
    folder = Path(folder).resolve()
    return str(folder.relative_to(REPO_ROOT)) if folder.is_relative_to(REPO_ROOT) else str(folder)


def read_result(metrics: dict | None) -> dict:
    """The scalar ``test_*`` values of one run's evaluate entry (``test_accuracy``, ``test_loss``, ``test_rows``...)."""
    return {
        k: v
        for k, v in sorted((metrics or {}).items())
        if k.startswith("test_") and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def log_line(
    read: dict,
    *,
    task: str,
    registered: str | None,
    options: dict | None,
    data_fingerprint: str | None,
    overrides: dict | None,
    where: str,
    result: dict,
    train_commit: str | None = None,
    time: str | None = None,
    **extra,
) -> dict:
    """One line of the log for ``read`` (a ``read_entry``); ``kind`` is set by ``append_reads``. ``extra``: ``grid``
    and ``point`` of an ablation point, ``experiment`` of an exploratory read (``check_reads``), ``backfilled`` of a
    line recovered from git history."""
    return {
        "time": time or datetime.now(UTC).isoformat(timespec="seconds"),
        "task": task,
        "registered": registered,
        "data_fingerprint": data_fingerprint,
        "options": options,
        "model": read["model"],
        "seed": read["seed"],
        "overrides": overrides,
        "subject": subject(task=task, registered=registered, options=options, model=read["model"], seed=read["seed"]),
        "identity": read.get("identity"),
        "train": read.get("train"),
        "train_settings": read.get("train_settings"),
        "run": read["run"],
        "profile": read.get("profile"),
        "commit": read.get("git_commit"),
        "train_commit": train_commit,
        "where": where,
        "result": result,
        **extra,
    }


def read_kind(line: dict, earlier: list[dict]) -> str:
    """``first`` when no earlier line has its subject, ``reproduction`` when one has its identity and training
    settings too, else ``re-read``."""
    same = [e for e in earlier if e.get("subject") == line["subject"]]
    if not same:
        return "first"
    if line.get("identity") and line.get("train"):
        if any(e.get("identity") == line["identity"] and e.get("train") == line["train"] for e in same):
            return "reproduction"
    return "re-read"


def dumps_line(line: dict) -> str:
    return json.dumps(line, sort_keys=True, separators=(",", ":"), default=str)


def load_log(path: Path | None = None) -> list[dict]:
    """The lines of the log (``log_path()`` by default) in order; none when it does not exist yet."""
    path = Path(path) if path else log_path()
    if not path.is_file():
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError as exc:
                raise SwarmlabError(
                    f"{path}:{n} is not a test-read line ({exc}): the log is append-only, restore it from git"
                ) from None
            if not isinstance(line, dict):
                raise SwarmlabError(
                    f"{path}:{n} is not a test-read line (a JSON object): the log is append-only, restore it from git"
                )
            out.append(line)
    return out


def append_reads(entries: list[dict], path: Path | None = None) -> list[dict]:
    """Append ``entries`` (``log_line``s) to the log, each as one line, under an exclusive lock on a sibling
    ``.lock`` file (grid points and claims pieces append concurrently); a line without ``kind`` gets it from the lines
    before it. Only ever appends: what is in the file stays byte for byte. Returns the lines written."""
    path = Path(path) if path else log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            earlier = load_log(path)
            if path.is_file() and path.stat().st_size:
                with open(path, "rb") as f:
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":
                        raise SwarmlabError(
                            f"{path} ends inside a line (an append was cut short): complete or remove its last line "
                            f"by hand, then evaluate again"
                        )
            written = []
            for entry in entries:
                line = {**entry, "kind": entry.get("kind") or read_kind(entry, earlier + written)}
                written.append(line)
            with open(path, "a", encoding="utf-8") as f:  # O_APPEND: each write lands at the end
                for line in written:
                    f.write(dumps_line(line) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return written


def reads_for(log: list[dict], *, task: str, model: str) -> list[dict]:
    """The lines of ``task`` and ``model`` (every seed, config and setting), in log order."""
    return [line for line in log if line.get("task") == task and line.get("model") == model]


def headline(result: dict | None) -> float | None:
    """The one number a read is quoted by: test accuracy, else the first other test score, else the loss."""
    result = result or {}
    if "test_accuracy" in result:
        return result["test_accuracy"]
    others = [k for k in sorted(result) if k not in ("test_loss", "test_rows")]
    return result[others[0]] if others else result.get("test_loss")


def _shown(lines: list[dict]) -> str:
    """One read, ``<commit>: <value>``; or a grid's reads at one commit, ``<commit> <grid> grid (n points): lo–hi``."""
    values = [v for v in (headline(line.get("result")) for line in lines) if isinstance(v, (int, float))]
    if not values:
        span = "?"
    elif min(values) == max(values):
        span = f"{values[0]:.4f}"
    else:
        span = f"{min(values):.4f}–{max(values):.4f}"
    at = (lines[0].get("commit") or "?")[:7]
    if lines[0].get("grid"):
        return f"{at} {lines[0]['grid']} grid ({len(lines)} point{'s' * (len(lines) > 1)}): {span}"
    return f"{at}: {span}"


def log_rereads(log: list[dict]) -> list[str]:
    """One line per subject (one model at one seed on one task's test split) read again under other settings or
    another model config: how many reads, their commits and results (a grid's points at one commit together, as the
    range of their results), in log order; reproductions (the same settings again) are counted apart."""
    subjects: dict[str, list[dict]] = {}
    for line in log:
        subjects.setdefault(line.get("subject"), []).append(line)
    out = []
    for lines in subjects.values():
        if not any(line.get("kind") == "re-read" for line in lines):
            continue
        reads = [line for line in lines if line.get("kind") != "reproduction"]
        groups: dict[tuple, list[dict]] = {}  # a grid's reads at one commit go together; the others one by one
        for n, line in enumerate(reads):
            groups.setdefault((line["grid"], line.get("commit")) if line.get("grid") else (n,), []).append(line)
        first, again = lines[0], len(lines) - len(reads)
        out.append(
            f"`{first['task']}` `{first['model']}` seed {first['seed']}: {len(reads)} reads of the test split "
            f"({', '.join(_shown(group) for group in groups.values())}); the later reads were made knowing the earlier"
            + (f" (and {again} reproduction{'s' * (again > 1)} of a read under the same settings)" if again else "")
        )
    return out
