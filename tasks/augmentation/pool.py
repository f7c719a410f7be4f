"""The augment step's machinery (``tasks/imdb_data.py``): which reviews each strategy picks, the worker pool, and
``augment_train``, the augmented training table as a pure function of its inputs.

Per-review randomness is seeded from (seed, uid), so the output does not depend on the number of workers.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import random
from pathlib import Path

import numpy as np
import pyarrow as pa

from swarmlab.progress import progress
from swarmlab.errors import SwarmlabError
from tasks.augmentation import (  # the package's public names (strategies, lexicon)
    CONNECTIVES,
    combine_reviews,
    load_resources,
    replace_synonyms,
    sentiment_flipped,
    shuffle_sentences,
)

STRATEGIES = ("shuffle", "synonym", "combo")


def stable_key(seed: int, uid: str, tag: str) -> int:
    """A 64-bit integer from (seed, uid, tag) alone: the per-review seed and the selection rank."""
    return int.from_bytes(hashlib.blake2b(f"{seed}\x1f{uid}\x1f{tag}".encode(), digest_size=8).digest(), "big")


def pick(uids: list[str], fraction: float, seed: int, tag: str) -> list[int]:
    """Indices of exactly ``round(fraction * len(uids))`` reviews: the smallest ``stable_key`` ranks.

    Depends on the set of uids only, not on their order or on how the work is split later.
    """
    k = round(fraction * len(uids))
    ranked = sorted(range(len(uids)), key=lambda i: stable_key(seed, uids[i], tag))
    return sorted(ranked[:k])


def plan_combos(uids: list[str], labels: list[int], cfg, seed: int) -> list[tuple[list[str], list[str]]]:
    """``(parent uids, connectives)`` per combo row: an anchor drawn uniformly (so labels follow the split's
    balance), then ``combo_min..combo_max - 1`` other distinct reviews of its label."""
    n = round(cfg.combo_fraction * len(uids))
    if n == 0:
        return []
    by_label: dict[int, list[str]] = {}
    for uid, label in sorted(zip(uids, labels)):
        by_label.setdefault(label, []).append(uid)
    label_of = dict(zip(uids, labels))
    anchors = sorted(uids)
    rng = random.Random(stable_key(seed, "", "combo"))
    plans = []
    for _ in range(n):
        anchor = rng.choice(anchors)
        pool = by_label[label_of[anchor]]
        k = rng.randint(cfg.combo_min, cfg.combo_max)
        if len(pool) < k:
            raise SwarmlabError(
                f"augment: a combo of {k} reviews needs {k} training reviews of label "
                f"{label_of[anchor]}, the split has {len(pool)}; lower augment.combo_max"
            )
        others = []
        while len(others) < k - 1:
            uid = rng.choice(pool)
            if uid != anchor and uid not in others:
                others.append(uid)
        plans.append(([anchor] + others, [rng.choice(CONNECTIVES) for _ in others]))
    return plans


# --- workers --------------------------------------------------------------------------------------------
_STATE: dict = {}


def init_worker(nltk_dir: str, senses: int, sense_share: float) -> tuple:
    """Load the NLTK data (opinion lexicon, WordNet sense counts, punkt) once per process and settings, and return
    ``(lexicon, punkt)``. Every worker of ``augment_train`` runs it first; a forked worker inherits the parent's
    and skips the load. Call it before ``augment_train`` to time the load apart (benchmarks/augment_throughput.py).
    """
    args = (nltk_dir, senses, sense_share)
    if _STATE.get("args") != args:
        _STATE["lexicon"], _STATE["punkt"] = load_resources(Path(nltk_dir), senses=senses, sense_share=sense_share)
        _STATE["args"] = args
    return _STATE["lexicon"], _STATE["punkt"]


def _run_job(job: tuple) -> tuple[str, str | None, str, int]:
    """``(uid, text or None, status, words replaced)``; status: ok / skipped (nothing to change) / rejected."""
    kind, uid, texts, rng_seed, extra = job
    lexicon, punkt = _STATE["lexicon"], _STATE["punkt"]
    rng = random.Random(rng_seed)
    replaced = 0
    if kind == "shuffle":
        sentences = shuffle_sentences(texts[0], punkt, rng, keep_pair_p=extra)
        text = None if sentences is None else " ".join(sentences)
    elif kind == "synonym":
        out = replace_synonyms(texts[0], lexicon, rng, word_rate=extra)
        text, replaced = (None, 0) if out is None else out
    else:
        text = combine_reviews(texts, extra)
    if text is None:
        return uid, None, "skipped", 0
    if sentiment_flipped(texts, text, lexicon, aligned=kind == "synonym"):
        return uid, None, "rejected", replaced
    return uid, text, "ok", replaced


def _run_jobs(jobs: list[tuple], workers: int, init_args: tuple) -> list[tuple]:
    init_worker(*init_args)  # the parent loads once; forked workers inherit it
    if workers == 1 or len(jobs) < 2:
        return [_run_job(j) for j in progress(jobs, desc="augment")]
    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    chunksize = max(1, min(64, len(jobs) // (workers * 8)))
    pool = ctx.Pool(workers, initializer=init_worker, initargs=init_args)
    try:
        results = list(progress(pool.imap(_run_job, jobs, chunksize=chunksize), total=len(jobs), desc="augment"))
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()  # joined, so the workers' CPU time shows in RUSAGE_CHILDREN
    return results


def with_provenance(table: pa.Table) -> pa.Table:
    """``table`` + ``source="original"`` and ``parents=[uid]``: the rows as they came."""
    uids = table.column("uid").to_pylist()
    return table.append_column("source", pa.array(["original"] * len(uids), pa.string())).append_column(
        "parents", pa.array([[u] for u in uids], pa.list_(pa.string()))
    )


def augment_train(table: pa.Table, cfg, *, seed: int, nltk_dir: Path | None) -> tuple[pa.Table, dict]:
    """The augmented training table (originals first, then new rows; seeded row order) and its statistics.

    ``table`` has the prepared columns (uid, text, label, rating, review_id); ``cfg`` is the checked ``augment:``
    section (``swarmlab.drive.sections.AugmentConfig``). Pure: the same inputs give the same table whatever
    ``cfg.workers`` is.
    """
    base = with_provenance(table)
    stats = {s: {"selected": 0, "written": 0, "skipped": 0, "rejected": 0} for s in STRATEGIES}
    if not cfg.enabled:
        return base, {"enabled": False, "strategies": stats}
    if nltk_dir is None:
        raise SwarmlabError("augment.enabled needs the NLTK data folder (paths.datasets/nltk_data)")
    uids = table.column("uid").to_pylist()
    if len(set(uids)) != len(uids):
        raise SwarmlabError("augment: the training split has duplicate uids; rerun the prepare stage")
    texts = table.column("text").to_pylist()
    labels = table.column("label").to_pylist()
    index = {u: i for i, u in enumerate(uids)}
    aug_seed = seed + cfg.seed_offset

    jobs, parents_of = [], {}
    for kind, fraction, extra in (
        ("shuffle", cfg.shuffle_fraction, cfg.keep_pair_p),
        ("synonym", cfg.synonym_fraction, cfg.word_rate),
    ):
        for i in pick(uids, fraction, aug_seed, kind):
            new_uid = f"{uids[i]}#{kind}0"
            jobs.append((kind, new_uid, [texts[i]], stable_key(aug_seed, uids[i], kind + ":rng"), extra))
            parents_of[new_uid] = [uids[i]]
    for j, (parents, connectives) in enumerate(plan_combos(uids, labels, cfg, aug_seed)):
        new_uid = f"{parents[0]}#combo{j}"
        jobs.append(("combo", new_uid, [texts[index[p]] for p in parents], 0, connectives))
        parents_of[new_uid] = parents

    results = _run_jobs(jobs, cfg.workers, (str(nltk_dir), cfg.synonym_senses, cfg.sense_share))
    rows = {"uid": [], "text": [], "label": [], "rating": [], "review_id": [], "source": [], "parents": []}
    words_replaced = 0
    ratings, review_ids = table.column("rating").to_pylist(), table.column("review_id").to_pylist()
    for (kind, *_), (uid, text, status, replaced) in zip(jobs, results):
        s = stats[kind]
        s["selected"] += 1
        s[{"ok": "written"}.get(status, status)] += 1
        if status != "ok":
            continue
        words_replaced += replaced
        parents = parents_of[uid]
        first = index[parents[0]]
        single = len(parents) == 1
        rows["uid"].append(uid)
        rows["text"].append(text)
        rows["label"].append(labels[first])  # a combo's parents share it (plan_combos)
        rows["rating"].append(ratings[first] if single else None)
        rows["review_id"].append(review_ids[first] if single else None)
        rows["source"].append(kind)
        rows["parents"].append(parents)
    new = pa.Table.from_pydict(rows, schema=base.schema)
    out = pa.concat_tables([base, new])
    order = np.random.default_rng(aug_seed).permutation(out.num_rows)
    stats["synonym"]["words_replaced"] = words_replaced
    return out.take(order), {"enabled": True, "seed": aug_seed, "strategies": stats}
