"""The IMDB task's data, built in three steps (``ImdbTask.data_steps``), each its own cached DVC stage
(``python -m pipelines.data --task imdb --step <step>``) so that changing the augmentation does not re-read the
reviews, and changing the sequence length does not re-augment them. Each step reads the folder of the step before
it, writes into the empty temporary folder the stage hands it (swapped in on success) and returns its summary.

* ``prepare``: IMDB from any supported layout (``tasks/imdb_sources.py``) -> seeded, stratified train / val / test
  parquet shards. The validation split is carved from the official training split (stratified by label); the
  official test split is kept whole (``prepare.max_test`` subsamples it only for the smoke profile).
* ``augment``: seeded augmentation of the training split; validation and test pass through untouched. Train keeps
  every original review (``source="original"``, ``parents=[own uid]``) and appends augmented copies: ``shuffle``
  (sentence order, adjacent pairs kept together), ``synonym`` (guarded WordNet synonyms) and ``combo`` (2-3 reviews
  of one label joined by connectives), each with its own uid (``train/pos/12#shuffle0``) and the uids of its
  parents. Rows whose sentiment words changed polarity are rejected and counted (``tasks/augmentation/pool.py``).
  ``augment.enabled: false`` copies train through (all ``original``): the ablation, same shapes downstream.
  Val/test shard files are copied byte for byte. Per-review randomness is seeded from (seed, uid), so the output
  does not depend on ``augment.workers``. The opinion lexicon, the POS lookup (WordNet sense counts: NLTK's tagger
  model is not shipped) and the skipped word classes are documented in ``tasks/augmentation/lexicon.py``.
* ``tokenize``: bert-base-uncased WordPiece over every split -> ``{split}-NNN.parquet`` with columns ``uid``,
  ``input_ids`` (list<uint16> of exactly ``seq_len``), ``length`` and ``label``.

Every folder holds ``meta.json``. Timings are printed, never stored: a ``meta.json`` must not change when nothing
else does.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from swarmlab.errors import SwarmlabError
from swarmlab.integrity import FILES_KEY, read_meta, record_files, verify_files
from swarmlab.io import parquet_rows, read_parquet_checked, write_shards
from swarmlab.log import get_logger
from swarmlab.machine import cpu_seconds
from swarmlab.paths import resolve
from tasks.augmentation.pool import STRATEGIES, augment_train
from tasks.imdb_sources import check_review_table, read_imdb
from tasks.tokenization import PAD_ID, build_wordpiece, encode_texts, vocab_sha256

logger = get_logger(__name__)

# ----------------------------------------------------------------------------------------------------------- prepare


def stratified_pick(
    labels: np.ndarray, fraction: float | None, count: int | None, rng: np.random.Generator
) -> np.ndarray:
    """Indices of a stratified random subset: ``fraction`` of each class, or ``count`` rows in total."""
    picked = []
    n = len(labels)
    for label in np.unique(labels):
        idx = np.flatnonzero(labels == label)
        rng.shuffle(idx)
        k = round(len(idx) * fraction) if fraction is not None else round(count * len(idx) / n)
        picked.append(idx[:k])
    return np.sort(np.concatenate(picked))


def split_tables(
    tables: dict[str, pa.Table], *, seed: int, val_fraction: float, max_train: int = 0, max_test: int = 0
) -> dict[str, pa.Table]:
    """Seeded, stratified ``train``/``val`` from the official train split; ``test`` untouched (unless capped)."""
    if not 0.0 < val_fraction < 1.0:
        raise SwarmlabError(f"prepare.val_fraction must be in (0, 1), got {val_fraction}")
    rng = np.random.default_rng(seed)
    train = tables["train"]
    if max_train and max_train < train.num_rows:
        train = train.take(stratified_pick(train.column("label").to_numpy(), None, max_train, rng))
    labels = train.column("label").to_numpy()
    val_mask = np.zeros(len(labels), dtype=bool)
    val_mask[stratified_pick(labels, val_fraction, None, rng)] = True
    test = tables["test"]
    if max_test and max_test < test.num_rows:
        test = test.take(stratified_pick(test.column("label").to_numpy(), None, max_test, rng))
    out = {"train": train.filter(pa.array(~val_mask)), "val": train.filter(pa.array(val_mask)), "test": test}
    return {name: t.take(rng.permutation(t.num_rows)) for name, t in out.items()}  # seeded shuffle


def prepare(cfg, out_dir: Path, *, datasets: Path, seed: int) -> dict:
    """The ``prepare`` step: ``cfg`` is the checked ``prepare:`` section (``swarmlab.drive.sections.PrepareConfig``)."""
    source = resolve(cfg.source) if cfg.source else datasets / "imdb"
    t0 = time.perf_counter()
    tables = read_imdb(source)
    splits = split_tables(
        tables, seed=seed, val_fraction=cfg.val_fraction, max_train=cfg.max_train, max_test=cfg.max_test
    )
    meta = {"source": str(source), "seed": seed, "val_fraction": cfg.val_fraction, "splits": {}}
    for name, table in splits.items():
        labels = table.column("label").to_numpy()
        meta["splits"][name] = {
            "rows": table.num_rows,
            "positive": int(labels.sum()),
            "shards": write_shards(table, out_dir, name, cfg.shards),
        }
    write_meta(out_dir, meta)
    counts = ", ".join(f"{k} {v['rows']}" for k, v in meta["splits"].items())
    logger.info(f"prepare: {counts} reviews from {source} in {time.perf_counter() - t0:.1f} s")
    return {f"{k}_rows": v["rows"] for k, v in meta["splits"].items()}


# ----------------------------------------------------------------------------------------------------------- augment


def write_meta(out_dir: Path, meta: dict) -> None:
    """``meta.json`` of a step's folder, with each split's shard files and their sizes and SHA-256 (``files``): the
    next step, and training, check the shards against it (a deleted, swapped or edited shard is refused)."""
    meta[FILES_KEY] = record_files(out_dir, {split: info["shards"] for split, info in meta["splits"].items()})
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def read_step(in_dir: Path, hint: str) -> dict:
    """The ``meta.json`` of the step before, with every split's shards checked against the sizes and hashes it
    records, and its ``rows`` against the shards' rows (an edited meta.json is refused too)."""
    meta = read_meta(in_dir / "meta.json", hint)
    splits = meta.get("splits")
    if not isinstance(splits, dict) or "train" not in splits:
        raise SwarmlabError(f"{in_dir / 'meta.json'} lists no train split: rerun {hint}")
    for split, info in splits.items():
        verify_files(in_dir, meta, split, f"{split}-*.parquet", hint)
        rows = sum(parquet_rows(in_dir / shard) for shard in info["shards"])
        if rows != info.get("rows"):
            raise SwarmlabError(
                f"{in_dir / 'meta.json'} says the {split} split has {info.get('rows')} rows, but its shards hold "
                f"{rows}: the record was edited or damaged; rebuild it: {hint}"
            )
    return meta


def augment(cfg, in_dir: Path, out_dir: Path, *, datasets: Path, seed: int) -> dict:
    """The ``augment`` step over the prepared splits in ``in_dir``: ``cfg`` is the checked ``augment:`` section
    (``swarmlab.drive.sections.AugmentConfig``). Returns the rows per source and the rejections per strategy."""
    meta_in = read_step(in_dir, "dvc repro prepare")
    nltk_dir = datasets / "nltk_data" if cfg.enabled else None
    t0 = time.perf_counter()
    cpu0 = cpu_seconds()
    info = meta_in["splits"]["train"]
    train = pa.concat_tables([check_review_table(read_parquet_checked(in_dir / s), in_dir / s) for s in info["shards"]])
    table, stats = augment_train(train, cfg, seed=seed, nltk_dir=nltk_dir)
    meta = {"source": str(in_dir), "config": dataclasses.asdict(cfg), "augment": stats, "splits": {}}
    for split, split_info in meta_in["splits"].items():
        if split == "train":
            sources = table.column("source").to_pylist()
            meta["splits"][split] = {
                "rows": table.num_rows,
                "positive": int(table.column("label").to_numpy().sum()),
                "shards": write_shards(table, out_dir, split, len(split_info["shards"])),
                "by_source": {k: sources.count(k) for k in ("original",) + STRATEGIES},
            }
        else:  # byte for byte: never augmented, never rewritten; but read and checked, not copied blindly
            for shard in split_info["shards"]:
                check_review_table(read_parquet_checked(in_dir / shard), in_dir / shard)
                shutil.copyfile(in_dir / shard, out_dir / shard)
            meta["splits"][split] = dict(split_info)
    write_meta(out_dir, meta)
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    by_source = ", ".join(f"{k} {v}" for k, v in meta["splits"]["train"]["by_source"].items())
    rejected = ", ".join(f"{k} {stats['strategies'][k]['rejected']}" for k in STRATEGIES)
    logger.info(
        f"augment: train {train.num_rows} -> {table.num_rows} rows ({by_source}; rejected: {rejected}) in "
        f"{elapsed:.1f} s wall, {cpu:.1f} s CPU ({train.num_rows / elapsed:.0f} reviews/s, {cfg.workers} workers)"
    )
    return {
        "train_rows": table.num_rows,
        **{f"{k}_rows": v for k, v in meta["splits"]["train"]["by_source"].items()},
        **{f"{k}_rejected": stats["strategies"][k]["rejected"] for k in STRATEGIES},
    }


# ---------------------------------------------------------------------------------------------------------- tokenize


def ids_column(ids: np.ndarray) -> pa.Array:
    n, seq_len = ids.shape
    return pa.FixedSizeListArray.from_arrays(pa.array(ids.reshape(-1), type=pa.uint16()), seq_len)


def tokenize(cfg, in_dir: Path, out_dir: Path, *, datasets: Path) -> dict:
    """The ``tokenize`` step over the splits in ``in_dir`` (the augmented ones, or any folder of the prepared
    layout): ``cfg`` is the checked ``tokenize:`` section (``swarmlab.drive.sections.TokenizeConfig``)."""
    seq_len = cfg.seq_len
    vocab_path = resolve(cfg.vocab, base=datasets)
    tokenizer = build_wordpiece(vocab_path)  # encode_texts truncates; padding is a numpy fill (faster)
    vocab_size = tokenizer.get_vocab_size()
    if vocab_size > 65535:
        raise SwarmlabError(f"vocabulary of {vocab_size} tokens does not fit uint16 ids")
    meta_in = read_step(in_dir, "dvc repro augment")
    t0, total = time.perf_counter(), 0
    meta = {
        "seq_len": seq_len,
        "vocab": str(vocab_path),
        "vocab_sha256": vocab_sha256(vocab_path),
        "vocab_size": vocab_size,
        "pad_id": PAD_ID,
        "cls_id": tokenizer.token_to_id("[CLS]"),
        "sep_id": tokenizer.token_to_id("[SEP]"),
        "augment": meta_in.get("config"),
        "splits": {},
    }
    for split, info in meta_in["splits"].items():
        truncated = 0
        for shard in info["shards"]:
            table = check_review_table(read_parquet_checked(in_dir / shard), in_dir / shard)
            texts = table.column("text").to_pylist()
            ids, lengths = encode_texts(tokenizer, texts, seq_len, desc=f"tokenize {shard}")
            truncated += int((lengths == seq_len).sum())
            out = pa.table(
                {
                    "uid": table.column("uid"),
                    "input_ids": ids_column(ids),
                    "length": pa.array(lengths),
                    "label": table.column("label"),
                }
            )
            pq.write_table(out, out_dir / shard, compression="zstd")
            total += len(texts)
        meta["splits"][split] = {"rows": info["rows"], "shards": info["shards"], "at_max_length": truncated}
    write_meta(out_dir, meta)
    elapsed = time.perf_counter() - t0
    logger.info(f"tokenize: {total} reviews to {seq_len} tokens in {elapsed:.1f} s ({total / elapsed:.0f} reviews/s)")
    return {
        "seq_len": seq_len,
        **{f"{k}_rows": v["rows"] for k, v in meta["splits"].items()},
        **{f"{k}_at_max_length": v["at_max_length"] for k, v in meta["splits"].items()},
    }
