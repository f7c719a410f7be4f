"""What the data checks cost per training start: ``Task.check_data(("train", "val"))`` (meta.json, the recorded
options, every file's size and SHA-256, and the check that no validation or test item is in the training split)
against loading the same splits, per task of a profile whose data folders exist.

    SWARMLAB_WORKDIR=/tmp/cpu python benchmarks/integrity_cost.py --profile cpu [--repeats 5]

Prints a markdown table: bytes hashed, the hash check's median seconds (warm page cache), the leak check's
(``Task.check_disjoint_splits`` on splits already hashed: the training rows' items against the record of the
validation and test items), the load's, and both checks as a share of the load.
"""

from __future__ import annotations

import argparse
import statistics
import time

from swarmlab.drive.params import load_params
from swarmlab.drive.runs import make_task, model_names
from swarmlab.drive.run_config import build_model, model_overrides

TASKS = ("imdb", "clustering_direct", "clustering_mog", "mnist", "fashion_mnist", "lra_text", "listops")


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    params = load_params(None, args.profile)
    print("| task | files | MB hashed | hash check (s) | leak check (s) | load train+val (s) | checks / load |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key in TASKS:
        probe = make_task(params, key)
        if not (probe.data_dir / "meta.json").is_file():
            continue
        splits = [s for s in ("train", "val") if s in probe.data_splits]
        record = probe.meta["files"]
        files = sum(len(record[s]) for s in splits)
        size = sum(info["bytes"] for s in splits for info in record[s].values())

        def check():
            make_task(params, key)._verify_splits(("train", "val"))  # a fresh task: meta.json read and checked again

        def leak():
            task = make_task(params, key)
            task._verified_splits = {"train", "val", "test"}  # the hashes are the column before
            task.check_disjoint_splits()

        name = model_names(params, key)[0]
        cfg = build_model(name, probe, model_overrides(params, key, name)).cfg

        def load():
            task = make_task(params, key)
            task.check_data = lambda splits=(): None  # the load alone
            task._disjoint_checked = True
            task.train_data(cfg)
            task.eval_data("val", cfg)

        c, k, l_ = (median_seconds(f, args.repeats) for f in (check, leak, load))
        print(
            f"| {key} | {files} | {size / 2**20:.1f} | {c:.3f} | {k:.3f} | {l_:.3f} | {(c + k) / l_:.0%} |", flush=True
        )


if __name__ == "__main__":
    main()
