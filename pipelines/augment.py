"""Stage `augment`: seeded text augmentation of the training split; validation and test pass through untouched.

Reads ``data/prepared``, writes ``data/augmented`` in the same layout (``{split}-NNN.parquet`` + ``meta.json``).
Train keeps every original review (``source="original"``, ``parents=[own uid]``) and appends augmented copies:
``shuffle`` (sentence order, adjacent pairs kept together), ``synonym`` (guarded WordNet synonyms) and
``combo`` (2-3 reviews of one label joined by connectives), each with its own uid (``train/pos/12#shuffle0``)
and the uids of its parents. Rows whose sentiment words changed polarity are rejected and counted.
``augment.enabled: false`` copies train through (all ``original``): the ablation, same shapes downstream.
Val/test shard files are copied byte for byte. Per-review randomness is seeded from (seed, uid), so the output
does not depend on ``augment.workers``. The opinion lexicon, the POS lookup (WordNet sense counts: NLTK's
tagger model is not shipped) and the skipped word classes are documented in ``tasks/augmentation/lexicon.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing as mp
import random
import resource
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipelines.common.cli import params_from, stage_parser
from pipelines.common.sections import AugmentConfig, section
from pipelines.common.sections import seed as check_seed
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_dir, atomic_write_text, read_parquet_checked, write_shards
from tasks.imdb_sources import check_review_table
from pipelines.common.paths import DATA_DIR, REPORTS_DIR, datasets_dir
from pipelines.common.progress import progress
from tasks.augmentation import (
    CONNECTIVES,
    combine_reviews,
    load_resources,
    replace_synonyms,
    sentiment_flipped,
    shuffle_sentences,
)

IN_DIR = DATA_DIR / "prepared"
OUT_DIR = DATA_DIR / "augmented"
METRICS_FILE = REPORTS_DIR / "augment" / "metrics.json"
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


def plan_combos(uids: list[str], labels: list[int], cfg: AugmentConfig, seed: int) -> list[tuple[list[str], list[str]]]:
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


def _init_worker(nltk_dir: str, senses: int, sense_share: float) -> None:
    """Load NLTK data once per process and settings (a forked worker inherits the parent's and skips this)."""
    args = (nltk_dir, senses, sense_share)
    if _STATE.get("args") != args:
        _STATE["lexicon"], _STATE["punkt"] = load_resources(Path(nltk_dir), senses=senses, sense_share=sense_share)
        _STATE["args"] = args


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
    _init_worker(*init_args)  # the parent loads once; forked workers inherit it
    if workers == 1 or len(jobs) < 2:
        return [_run_job(j) for j in progress(jobs, desc="augment")]
    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    chunksize = max(1, min(64, len(jobs) // (workers * 8)))
    pool = ctx.Pool(workers, initializer=_init_worker, initargs=init_args)
    try:
        results = list(progress(pool.imap(_run_job, jobs, chunksize=chunksize), total=len(jobs), desc="augment"))
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()  # joined, so the workers' CPU time shows in RUSAGE_CHILDREN
    return results


# --- the stage --------------------------------------------------------------------------------------------
def with_provenance(table: pa.Table) -> pa.Table:
    """``table`` + ``source="original"`` and ``parents=[uid]``: the rows as they came."""
    uids = table.column("uid").to_pylist()
    return table.append_column("source", pa.array(["original"] * len(uids), pa.string())).append_column(
        "parents", pa.array([[u] for u in uids], pa.list_(pa.string()))
    )


def augment_train(table: pa.Table, cfg: AugmentConfig, *, seed: int, nltk_dir: Path | None) -> tuple[pa.Table, dict]:
    """The augmented training table (originals first, then new rows; seeded row order) and its statistics.

    ``table`` has the prepared columns (uid, text, label, rating, review_id). Pure: the same inputs give the
    same table whatever ``cfg.workers`` is.
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


def augment(
    params: dict, in_dir: Path = IN_DIR, out_dir: Path = OUT_DIR, metrics_file: Path | None = METRICS_FILE
) -> dict:
    cfg = section(params, "augment")
    check_seed(params)
    meta_path = in_dir / "meta.json"
    if not meta_path.is_file():
        raise SwarmlabError(f"{meta_path} is missing: run the prepare stage first (dvc repro prepare)")
    meta_in = json.loads(meta_path.read_text())
    if "train" not in meta_in["splits"]:
        raise SwarmlabError(f"{meta_path} lists no train split: rerun the prepare stage")
    nltk_dir = datasets_dir(params) / "nltk_data" if cfg.enabled else None
    t0 = time.perf_counter()
    cpu0 = _cpu_seconds()
    info = meta_in["splits"]["train"]
    train = pa.concat_tables([check_review_table(read_parquet_checked(in_dir / s), in_dir / s) for s in info["shards"]])
    table, stats = augment_train(train, cfg, seed=params["seed"], nltk_dir=nltk_dir)
    with atomic_dir(out_dir) as tmp:
        meta = {"source": str(in_dir), "config": dataclasses.asdict(cfg), "augment": stats, "splits": {}}
        for split, split_info in meta_in["splits"].items():
            if split == "train":
                sources = table.column("source").to_pylist()
                meta["splits"][split] = {
                    "rows": table.num_rows,
                    "positive": int(table.column("label").to_numpy().sum()),
                    "shards": write_shards(table, tmp, split, len(split_info["shards"])),
                    "by_source": {k: sources.count(k) for k in ("original",) + STRATEGIES},
                }
            else:  # byte for byte: never augmented, never rewritten; but read and checked, not copied blindly
                for shard in split_info["shards"]:
                    check_review_table(read_parquet_checked(in_dir / shard), in_dir / shard)
                    shutil.copyfile(in_dir / shard, tmp / shard)
                meta["splits"][split] = dict(split_info)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    elapsed, cpu = (
        time.perf_counter() - t0,
        _cpu_seconds() - cpu0,
    )  # printed, not in meta.json (its hash must be stable)
    if metrics_file is not None:
        metrics = {
            "train_rows": table.num_rows,
            **{f"{k}_rows": v for k, v in meta["splits"]["train"]["by_source"].items()},
            **{f"{k}_rejected": stats["strategies"][k]["rejected"] for k in STRATEGIES},
        }
        atomic_write_text(metrics_file, json.dumps(metrics, indent=2) + "\n")
    by_source = ", ".join(f"{k} {v}" for k, v in meta["splits"]["train"]["by_source"].items())
    rejected = ", ".join(f"{k} {stats['strategies'][k]['rejected']}" for k in STRATEGIES)
    print(
        f"augment: train {train.num_rows} -> {table.num_rows} rows ({by_source}; rejected: {rejected}) "
        f"in {elapsed:.1f} s wall, {cpu:.1f} s CPU ({train.num_rows / elapsed:.0f} reviews/s, {cfg.workers} workers) -> {out_dir}"
    )
    return meta


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its joined children (the pool workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@cli
def main(argv=None) -> None:
    args = stage_parser(__doc__.splitlines()[0]).parse_args(argv)
    augment(params_from(args))


if __name__ == "__main__":
    main()
