"""Stage `augment`: seeded text augmentation of the training split; validation and test pass through untouched.

Reads ``data/prepared``, writes ``data/augmented`` in the same layout (``{split}-NNN.parquet`` + ``meta.json``).
Train keeps every original review (``source="original"``, ``parents=[own uid]``) and appends augmented copies:
``shuffle`` (sentence order, adjacent pairs kept together), ``synonym`` (guarded WordNet synonyms) and
``combo`` (2-3 reviews of one label joined by connectives), each with its own uid (``train/pos/12#shuffle0``)
and the uids of its parents. Rows whose sentiment words changed polarity are rejected and counted (the machinery:
``swarmlab/text/augmentation.py``).
``augment.enabled: false`` copies train through (all ``original``): the ablation, same shapes downstream.
Val/test shard files are copied byte for byte. Per-review randomness is seeded from (seed, uid), so the output
does not depend on ``augment.workers``. The opinion lexicon, the POS lookup (WordNet sense counts: NLTK's
tagger model is not shipped) and the skipped word classes are documented in ``tasks/augmentation/lexicon.py``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import pyarrow as pa

from swarmlab.text.augmentation import STRATEGIES, augment_train
from swarmlab.stage_cli import params_from, stage_parser
from swarmlab.paths import DATA_DIR, REPORTS_DIR, datasets_dir
from swarmlab.sections import section
from swarmlab.sections import seed as check_seed
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_dir, atomic_write_text, read_parquet_checked, write_shards
from swarmlab.machine import cpu_seconds
from tasks.imdb_sources import check_review_table

IN_DIR = DATA_DIR / "prepared"
OUT_DIR = DATA_DIR / "augmented"
METRICS_FILE = REPORTS_DIR / "augment" / "metrics.json"


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
    cpu0 = cpu_seconds()
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
        cpu_seconds() - cpu0,
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


@cli
def main(argv=None) -> None:
    args = stage_parser(__doc__.splitlines()[0]).parse_args(argv)
    augment(params_from(args))


if __name__ == "__main__":
    main()
