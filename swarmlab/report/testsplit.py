"""What the evaluate stage leaves for the ledger: per-item test scores, and the record of test-split reads.

**Items.** ``reports/evaluate/<task>/items/<run>.npz`` holds one array per score of ``Metrics.item_scores()`` (one value
per test item, in the split's order) and ``batch_latency_ms`` (the timed batches). ``swarmlab.report.stats`` builds the
intervals and paired tests from them.

**Test-split discipline.** ``reports/evaluate/<task>/test_reads.json`` records every read of a test split: the run,
its *identity* (task, data options, model, model config, seed) and its training settings. Evaluating the same identity
again with the same training settings reproduces a number (a rerun after a code change) and is allowed. Evaluating it
with *different* training settings (another learning rate, budget...) is a second look at the test split to choose
between variants: refused, unless the caller names it (``--retest``); the read is then recorded as a re-read and the
report counts it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from swarmlab.errors import SwarmlabError

ITEMS = "items"
READS = "test_reads.json"


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


def check_reads(folder: Path, entries: list[dict], *, retest: bool = False) -> list[dict]:
    """The record after these reads; refuses (one line) a second read of an identity under other training settings
    unless ``retest``. Reproducing a read (same identity, same settings) adds nothing."""
    reads = load_reads(folder)
    out = list(reads)
    for e in entries:
        earlier = [r for r in reads if r["identity"] == e["identity"]]
        if any(r["train"] == e["train"] for r in earlier):
            continue  # the same read again: a reproduction
        if earlier and not retest:
            before = ", ".join(sorted({r["run"] + " (" + r.get("profile", "?") + ")" for r in earlier}))
            raise SwarmlabError(
                f"{e['run']}: its test split was already read under the same task, data and model config "
                f"with other training settings ({before}, {Path(folder) / READS}); choosing between "
                f"variants on the test split is refused: pick on validation, or pass --retest to read "
                f"it again (the report counts it)"
            )
        out.append({**e, "retest": bool(earlier)})
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
