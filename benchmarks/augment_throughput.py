"""Throughput of the augment stage on the official IMDB training split (25k reviews), per worker count.

    python benchmarks/augment_throughput.py                  # workers 2 and 1, the whole split
    python benchmarks/augment_throughput.py --workers 2 --limit 5000

Each worker count runs in a fresh process (cold NLTK caches, fair CPU accounting) and prints one JSON line;
the parent prints a table: wall and CPU seconds (this process + its pool workers, so a busy machine shows
as wall >> CPU / workers), reviews/s, rows per strategy, rejections, and a digest of the output table, which
must be the same for every worker count. The target (issue 5): <= 120 s wall for 25k reviews on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def table_digest(table) -> str:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()[:16]


def run_one(workers: int, limit: int, datasets: Path) -> dict:
    from tasks.augmentation.pool import augment_train, init_worker
    from swarmlab.drive.sections import AugmentConfig
    from swarmlab.machine import cpu_seconds
    from tasks.imdb_sources import read_imdb

    import pyarrow as pa

    train = read_imdb(datasets / "imdb")["train"]
    if limit:  # the split is sorted by label: take the start of each half
        half = train.num_rows // 2
        train = pa.concat_tables([train.slice(0, limit // 2), train.slice(half, limit - limit // 2)])
    cfg = AugmentConfig(workers=workers)
    t0, c0 = time.perf_counter(), cpu_seconds()
    init_worker(str(datasets / "nltk_data"), cfg.synonym_senses, cfg.sense_share)
    load_s = time.perf_counter() - t0
    table, stats = augment_train(train, cfg, seed=0, nltk_dir=datasets / "nltk_data")
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    sources = table.column("source").to_pylist()
    return {
        "workers": workers,
        "reviews": train.num_rows,
        "rows": table.num_rows,
        "load_s": load_s,
        "wall_s": wall,
        "cpu_s": cpu,
        "reviews_per_s": train.num_rows / wall,
        "by_source": {k: sources.count(k) for k in ("original", "shuffle", "synonym", "combo")},
        "strategies": stats["strategies"],
        "digest": table_digest(table),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 1], help="worker counts to compare")
    parser.add_argument("--limit", type=int, default=0, help="use this many reviews (half per label); 0 = all 25k")
    parser.add_argument(
        "--datasets", type=Path, default=ROOT.parent / "shared" / "datasets", help="shared datasets folder"
    )
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.limit, args.datasets)))
        return
    results = []
    for w in args.workers:
        cmd = [sys.executable, __file__, "--one", str(w), "--limit", str(args.limit), "--datasets", str(args.datasets)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    print(
        f"{'workers':>7} {'reviews':>7} {'rows':>6} {'load s':>7} {'wall s':>7} {'CPU s':>7} {'rev/s':>6} "
        f"{'shuffle':>7} {'synonym':>7} {'combo':>6} {'rejected s/y/c':>14} {'digest':>16}"
    )
    for r in results:
        st = r["strategies"]
        rej = "/".join(str(st[k]["rejected"]) for k in ("shuffle", "synonym", "combo"))
        b = r["by_source"]
        print(
            f"{r['workers']:>7} {r['reviews']:>7} {r['rows']:>6} {r['load_s']:>7.1f} {r['wall_s']:>7.1f} {r['cpu_s']:>7.1f} "
            f"{r['reviews_per_s']:>6.0f} {b['shuffle']:>7} {b['synonym']:>7} {b['combo']:>6} {rej:>14} {r['digest']:>16}"
        )
    base = results[0]
    for r in results[1:]:
        print(
            f"workers {r['workers']} vs {base['workers']}: wall ratio {r['wall_s'] / base['wall_s']:.2f}, "
            f"identical output: {r['digest'] == base['digest']}"
        )
    print("per strategy (workers", base["workers"], "):", json.dumps(base["strategies"]))


if __name__ == "__main__":
    main()
