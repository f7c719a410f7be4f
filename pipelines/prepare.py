"""Stage `prepare`: IMDB from any supported layout -> seeded, stratified train / val / test parquet shards.

The validation split is carved from the official training split (stratified by label); the official
test split is kept whole (``prepare.max_test`` subsamples it only for the smoke profile).
Writes ``data/prepared/{train,val,test}-NNN.parquet`` and ``meta.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from swarmlab.stage_cli import params_from, stage_parser
from swarmlab.sections import section
from swarmlab.sections import seed as check_seed
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_dir, write_shards
from swarmlab.paths import DATA_DIR, datasets_dir, resolve
from tasks.imdb_sources import read_imdb

OUT_DIR = DATA_DIR / "prepared"


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


def prepare(params: dict, out_dir: Path = OUT_DIR) -> dict:
    cfg = section(params, "prepare")
    seed = check_seed(params)
    source = resolve(cfg.source) if cfg.source else datasets_dir(params) / "imdb"
    t0 = time.perf_counter()
    tables = read_imdb(source)
    splits = split_tables(
        tables, seed=seed, val_fraction=cfg.val_fraction, max_train=cfg.max_train, max_test=cfg.max_test
    )
    with atomic_dir(out_dir) as tmp:
        meta = {"source": str(source), "seed": seed, "val_fraction": cfg.val_fraction, "splits": {}}
        for name, table in splits.items():
            labels = table.column("label").to_numpy()
            meta["splits"][name] = {
                "rows": table.num_rows,
                "positive": int(labels.sum()),
                "shards": write_shards(table, tmp, name, cfg.shards),
            }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    counts = ", ".join(f"{k} {v['rows']}" for k, v in meta["splits"].items())
    print(f"prepare: {counts} reviews from {source} in {time.perf_counter() - t0:.1f} s -> {out_dir}")
    return meta


@cli
def main(argv=None) -> None:
    args = stage_parser(__doc__.splitlines()[0]).parse_args(argv)
    prepare(params_from(args))


if __name__ == "__main__":
    main()
