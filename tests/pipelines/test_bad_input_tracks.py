"""Bad input never costs a good run, on the set, long-document and image tracks (issue 21), as
tests/pipelines/test_bad_input.py holds it for the text track: every case is one line on stderr (`error: ...`, exit 2)
naming the culprit, and every output of the earlier good runs is byte-identical afterwards. Then kill -9 mid-write, a
diverging run per track, and a subset of the table through `dvc repro` (the path the README documents).

One good tiny pipeline per track (data -> train, plus evaluate, sample and frontier where the case needs them) is
built once for the module, in this process; each case runs one stage as a user would (a subprocess with its own
params file or a damaged input), restores what it damaged, and compares the whole work folder with the snapshot.
Cases that damage a file *and* re-record its hash in meta.json reach the checks behind the hash (labels, NaN,
shapes), which guard folders that were built bad.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from swarmlab.integrity import record_files
from tests.conftest import REPO_ROOT, SHARED_DATASETS, held_before_swap
from tests.pipelines.test_bad_input import leftovers, snapshot
from tests.pipelines.test_bad_input import run as run_stage
from tests.tasks.test_long_tasks import write_prepared

pytestmark = pytest.mark.slow  # ~60 Python processes


def base_params(root: Path) -> dict:
    """params.yaml's layout with a tiny profile `t`: small data and models for every track, absolute data folders."""
    d = lambda key: str(root / "data" / key)  # noqa: E731
    tiny_long = {"d_model": 16, "transformer": {"num_layers": 1, "num_heads": 2}}
    long_train = {"max_epochs": 1, "max_steps": 2, "batch_size": 8, "patience": 0}
    image_train = {
        "max_epochs": 0,
        "max_steps": 2,
        "eval_every": 2,
        "time_budget_s": 0.0,
        "batch_size": 8,
        "plateau": "stop",
        "num_threads": 1,
    }
    image_model = {"dim": 8, "dim_hidden": 8, "n_iter": 1}
    return {
        "profile": "t",
        "paths": {"datasets": str(SHARED_DATASETS)},
        "defaults": yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["defaults"],
        "profiles": {
            "t": {
                "train": {"device": "cpu", "patience": 0},
                "evaluate": {"batch_size": 32, "warmup_batches": 0},
                "sample": {"num_samples": 10},
                "tasks": {
                    "clustering_direct": {
                        "models": ["swarm", "set_linear_mean", "set_transformer_sab"],
                        "model_overrides": {"dim_hidden": 8, "num_layers": 1, "swarm": {"n_iter": 1}},
                        "train": {"max_epochs": 1, "time_budget_s": 0.0, "batch_size": 10},
                        "options": {
                            "data_dir": d("clustering_direct"),
                            "train_tasks": 20,
                            "val_tasks": 6,
                            "test_tasks": 6,
                            "n_min": 10,
                            "n_max": 20,
                            "k_min": 2,
                            "k_max": 3,
                        },
                    },
                    "clustering_mog": {
                        "models": ["swarm"],
                        "model_overrides": {"swarm": {"head": "mean", "dim_hidden": 8, "n_iter": 1}},
                        "train": {"max_steps": 2, "eval_every": 2, "lr_decay_at": 0.0},
                        "options": {
                            "data_dir": d("clustering_mog"),
                            "n_min": 10,
                            "n_max": 20,
                            "val_tasks": 6,
                            "test_tasks": 6,
                        },
                    },
                    "mnist": {
                        "models": ["swarm_transformer_small"],
                        "model_overrides": image_model,
                        "train": image_train,
                        "options": {"data_dir": d("mnist"), "val_size": 16, "max_train": 32, "max_test": 16},
                    },
                    "fashion_mnist": {
                        "models": ["swarm_transformer_small"],
                        "model_overrides": image_model,
                        "train": image_train,
                        "options": {"data_dir": d("fashion_mnist"), "val_size": 16, "max_train": 32, "max_test": 16},
                    },
                    "lra_text": {
                        "models": ["transformer"],
                        "model_overrides": tiny_long,
                        "train": long_train,
                        "options": {
                            "data_dir": d("lra_text"),
                            "source_dir": d("prepared"),
                            "max_len": 256,
                            "max_train": 16,
                            "max_val": 8,
                            "max_test": 8,
                        },
                    },
                    "listops": {
                        "models": ["transformer"],
                        "model_overrides": tiny_long,
                        "train": long_train,
                        "options": {
                            "data_dir": d("listops"),
                            "train_rows": 16,
                            "val_rows": 8,
                            "test_rows": 8,
                            "max_depth": 4,
                            "min_length": 10,
                            "max_length": 120,
                            "max_len": 128,
                        },
                    },
                    "arxiv11": {
                        "models": ["transformer"],
                        "model_overrides": tiny_long,
                        "options": {"data_dir": d("arxiv11"), "max_len": 256},
                    },
                },
            }
        },
    }


def run(stage: str, root: Path, params, *args, env=None, timeout=300):
    """The text track's stage runner, with --no-tracking on train and evaluate (MLflow's own log lines stay out of
    stderr, where each case expects its one line)."""
    tracking = ("--no-tracking",) if stage in ("train", "evaluate") else ()
    return run_stage(stage, root, params, *args, *tracking, env=env, timeout=timeout)


TRACKS = ("clustering_direct", "clustering_mog", "mnist", "fashion_mnist", "lra_text", "listops")


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """Every track's data and one good run, built in this process (each stage once); evaluate@clustering_direct,
    sample@mnist and frontier@clustering_direct too; returns (root, raw params, snapshot)."""
    from swarmlab.drive.params import load_params
    from pipelines.data import build
    from pipelines.evaluate import evaluate
    from pipelines.frontier import frontier
    from pipelines.sample import sample
    from pipelines.train import train

    root = tmp_path_factory.mktemp("tracks")
    write_prepared(root / "data" / "prepared", n_per_label=8)
    raw = base_params(root)
    (root / "good.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(root / "good.yaml", "t")
    outputs, reports = root / "outputs" / "train", root / "reports"
    for key in TRACKS:
        build(params, key, report_root=reports)
        train(params, key, out_root=outputs, report_root=reports, tracking=False)
    evaluate(params, "clustering_direct", train_root=outputs, report_root=reports, tracking=False)
    sample(params, "mnist", train_root=outputs, report_root=reports, tracking=False)
    frontier(params, "clustering_direct", report_root=reports)
    sweep = reports / "sweep" / "clustering_direct"
    sweep.mkdir(parents=True)
    (sweep / "summary.csv").write_text(
        "model,trial,status,params,num_params,best_val_loss\nswarm,t0,ok,dim_hidden=16,900,1.5\n"
    )
    return root, raw, snapshot(root)


# ------------------------------------------------------------------------------------------------ the cases


def setp(path: str, value):
    """A mutator setting ``profiles.t.<path>``."""

    def mutate(raw):
        node = raw["profiles"]["t"]
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
        return raw

    return mutate


def both(*mutators):
    def mutate(raw):
        for m in mutators:
            raw = m(raw)
        return raw

    return mutate


def rerecord(folder: Path, split: str) -> None:
    """Write the current files of ``split`` into meta.json's record, as if the folder had been built that way."""
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["files"][split] = record_files(folder, {split: list(meta["files"][split])})[split]
    meta_path.write_text(json.dumps(meta))


def edit_parquet(rel: str, change, *, rehash: str | None = None):
    def damage(root):
        path = root / rel
        pq.write_table(change(pq.read_table(path)), path)
        if rehash:
            rerecord(path.parent, rehash)

    return damage


def set_list_value(column: str, row: int, pos: int, value):
    def change(table):
        rows = table.column(column).to_pylist()
        rows[row][pos] = value
        return table.set_column(
            table.column_names.index(column), column, pa.array(rows, table.schema.field(column).type)
        )

    return change


def set_value(column: str, row: int, value):
    def change(table):
        rows = table.column(column).to_pylist()
        rows[row] = value
        return table.set_column(
            table.column_names.index(column), column, pa.array(rows, table.schema.field(column).type)
        )

    return change


def edit_npz(rel: str, change, *, rehash: bool = True):
    def damage(root):
        path = root / rel
        with np.load(path) as f:
            arrays = dict(f)
        change(arrays)
        with open(path, "wb") as f:
            np.savez(f, **arrays)
        if rehash:
            rerecord(path.parent, path.stem)

    return damage


def truncate(rel: str, *, rehash: str | None = None):
    def damage(root):
        path = root / rel
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        if rehash:
            rerecord(path.parent, rehash)

    return damage


def flip_byte(rel: str):
    def damage(root):
        data = bytearray((root / rel).read_bytes())
        data[len(data) // 2] ^= 0xFF
        (root / rel).write_bytes(bytes(data))

    return damage


def write(rel: str, text: str):
    return lambda root: (root / rel).write_text(text)


def copy_file(src: str, dst: str):
    return lambda root: shutil.copyfile(root / src, root / dst)


def remove(rel: str):
    return lambda root: (root / rel).unlink()


def edit_json(rel: str, change):
    def damage(root):
        data = json.loads((root / rel).read_text())
        change(data)
        (root / rel).write_text(json.dumps(data))

    return damage


def scale_weights(rel: str):
    def damage(root):
        state = torch.load(root / rel, weights_only=True)
        torch.save({k: v * 2 if v.is_floating_point() else v for k, v in state.items()}, root / rel)

    return damage


def arxiv_one_class(root):
    src = root / "arxiv_src"
    src.mkdir(exist_ok=True)
    for split, n in (("train", 6), ("test", 3)):
        (src / f"{split}.jsonl").write_text(
            "".join(json.dumps({"text": f"a paper on vision {i}", "label": "cs.CV"}) + "\n" for i in range(n))
        )


def _mog_val_as_direct(root):
    copy_file("data/clustering_mog/val.parquet", f"{DIRECT}/val.parquet")(root)
    rerecord(root / DIRECT, "val")


DIRECT = "data/clustering_direct"
MNIST_RUN = "outputs/train/mnist/swarm_transformer_small-seed0"
FASHION_RUN = "outputs/train/fashion_mnist/swarm_transformer_small-seed0"
DIRECT_RUNS = "outputs/train/clustering_direct"

# (id, stage, task, params mutation, extra args, files the damage touches (restored after), damage, fragment)
CASES = [
    # --- runs that diverged (the previous run must stay)
    ("mnist lr 1e4", "train", "mnist", setp("tasks.mnist.train.lr", 1e4), (), (), None, "diverged"),
    ("fashion lr 1e4", "train", "fashion_mnist", setp("tasks.fashion_mnist.train.lr", 1e4), (), (), None, "diverged"),
    (
        "set_linear_mean huge lr",
        "train",
        "clustering_direct",
        setp("tasks.clustering_direct.train.lr", 1e8),
        ("--models", "set_linear_mean"),
        (),
        None,
        "clustering_direct/set_linear_mean-seed0 diverged",
    ),
    (
        "mog huge lr",
        "train",
        "clustering_mog",
        setp("tasks.clustering_mog.train.lr", 1e8),
        (),
        (),
        None,
        "[swarm-seed0] non-finite validation loss",
    ),
    (
        "lra_text huge lr",
        "train",
        "lra_text",
        both(setp("tasks.lra_text.train.lr", 1e6), setp("train.grad_clip", 0.0)),
        (),
        (),
        None,
        "transformer-seed0",
    ),
    (
        "listops huge lr",
        "train",
        "listops",
        both(setp("tasks.listops.train.lr", 1e6), setp("train.grad_clip", 0.0)),
        (),
        (),
        None,
        "transformer-seed0",
    ),
    # --- data that disagrees with what its stage recorded
    (
        "lra shard deleted",
        "train",
        "lra_text",
        None,
        (),
        ("data/lra_text/train-001.parquet",),
        remove("data/lra_text/train-001.parquet"),
        "train-001.parquet is missing",
    ),
    (
        "lra extra shard",
        "train",
        "lra_text",
        None,
        (),
        ("data/lra_text/train-002.parquet",),
        copy_file("data/lra_text/train-001.parquet", "data/lra_text/train-002.parquet"),
        "train-002.parquet is not one of the train files",
    ),
    (
        "listops max_len 512 vs 256",
        "train",
        "listops",
        setp("tasks.listops.options.max_len", 512),
        (),
        (),
        None,
        "max_len 128 -> 512",
    ),
    (
        "mnist val_size changed",
        "train",
        "mnist",
        setp("tasks.mnist.options.val_size", 20),
        (),
        (),
        None,
        "val_size 16 -> 20",
    ),
    (
        "n_max 2000000 (train)",
        "train",
        "clustering_direct",
        setp("tasks.clustering_direct.options.n_max", 2_000_000),
        (),
        (),
        None,
        "tasks.clustering_direct.options.n_max must be >= 1 and <= 20000, got 2000000",
    ),
    (
        "listops shard edited",
        "train",
        "listops",
        None,
        (),
        ("data/listops/val-000.parquet",),
        edit_parquet("data/listops/val-000.parquet", set_value("label", 0, 3)),
        "val-000.parquet has",
    ),
    (
        "mnist byte flipped (same size)",
        "train",
        "mnist",
        None,
        (),
        ("data/mnist/val.npz",),
        flip_byte("data/mnist/val.npz"),
        "val.npz does not match the content hash",
    ),
    (
        "mnist train.npz truncated",
        "train",
        "mnist",
        None,
        (),
        ("data/mnist/train.npz",),
        truncate("data/mnist/train.npz"),
        "train.npz has",
    ),
    (
        "mnist train.npz truncated, re-recorded",
        "train",
        "mnist",
        None,
        (),
        ("data/mnist/train.npz", "data/mnist/meta.json"),
        truncate("data/mnist/train.npz", rehash="train"),
        "cannot read",
    ),
    (
        "image label 200",
        "train",
        "mnist",
        None,
        (),
        ("data/mnist/val.npz", "data/mnist/meta.json"),
        edit_npz("data/mnist/val.npz", lambda a: a["labels"].__setitem__(3, 200)),
        "val.npz row 3: label 200 outside 0..9",
    ),
    (
        "images without channel axis",
        "train",
        "mnist",
        None,
        (),
        ("data/mnist/train.npz", "data/mnist/meta.json"),
        edit_npz("data/mnist/train.npz", lambda a: a.__setitem__("images", a["images"][:, 0])),
        "(N, C, H, W)",
    ),
    (
        "mnist meta not JSON",
        "train",
        "mnist",
        None,
        (),
        ("data/mnist/meta.json",),
        write("data/mnist/meta.json", "{oops"),
        "meta.json is not valid JSON",
    ),
    (
        "lra meta not JSON",
        "train",
        "lra_text",
        None,
        (),
        ("data/lra_text/meta.json",),
        write("data/lra_text/meta.json", '{"seq_len": 256,'),
        "meta.json is not valid JSON",
    ),
    (
        "direct meta not JSON",
        "train",
        "clustering_direct",
        None,
        (),
        (f"{DIRECT}/meta.json",),
        write(f"{DIRECT}/meta.json", "not json"),
        "meta.json is not valid JSON",
    ),
    (
        "meta a list",
        "train",
        "listops",
        None,
        (),
        ("data/listops/meta.json",),
        write("data/listops/meta.json", "[1, 2]"),
        "holds a JSON list",
    ),
    (
        "lra meta vocab",
        "train",
        "lra_text",
        None,
        (),
        ("data/lra_text/meta.json",),
        edit_json("data/lra_text/meta.json", lambda m: m.__setitem__("vocab_size", 300)),
        "vocab_size 300",
    ),
    (
        "another task's val.parquet",
        "train",
        "clustering_direct",
        None,
        (),
        (f"{DIRECT}/val.parquet",),
        copy_file("data/clustering_mog/val.parquet", f"{DIRECT}/val.parquet"),
        "clustering_direct/val.parquet has",
    ),
    (
        "another task's val.parquet, re-recorded",
        "train",
        "clustering_direct",
        None,
        (),
        (f"{DIRECT}/val.parquet", f"{DIRECT}/meta.json"),
        None,
        "holds mog tasks",
    ),
    (
        "label outside the slots",
        "train",
        "clustering_direct",
        None,
        (),
        (f"{DIRECT}/train.parquet", f"{DIRECT}/meta.json"),
        edit_parquet(f"{DIRECT}/train.parquet", set_list_value("labels", 2, 0, 12), rehash="train"),
        "label 12 outside",
    ),
    (
        "NaN point",
        "train",
        "clustering_direct",
        None,
        (),
        (f"{DIRECT}/val.parquet", f"{DIRECT}/meta.json"),
        edit_parquet(f"{DIRECT}/val.parquet", set_list_value("points", 1, 0, float("nan")), rehash="val"),
        "val.parquet row 1: a point has a NaN",
    ),
    (
        "lra label 7",
        "train",
        "lra_text",
        None,
        (),
        ("data/lra_text/val-000.parquet", "data/lra_text/meta.json"),
        edit_parquet("data/lra_text/val-000.parquet", set_value("label", 0, 7), rehash="val"),
        "label 7 outside 0..1",
    ),
    (
        "listops id out of vocab",
        "train",
        "listops",
        None,
        (),
        ("data/listops/train-000.parquet", "data/listops/meta.json"),
        edit_parquet("data/listops/train-000.parquet", set_list_value("input_ids", 0, 0, 40), rehash="train"),
        "id 40 is outside the vocabulary of 18",
    ),
    # --- settings refused before anything is touched
    (
        "sab head mean (3rd model)",
        "train",
        "clustering_direct",
        setp(
            "tasks.clustering_direct.model_overrides",
            {"dim_hidden": 8, "num_layers": 1, "swarm": {"n_iter": 1}, "set_transformer_sab": {"head": "mean"}},
        ),
        (),
        (),
        None,
        "dry run of model 'set_transformer_sab'",
    ),
    (
        "unknown model mapping",
        "train",
        "clustering_direct",
        setp("tasks.clustering_direct.model_overrides", {"dim_hidden": 8, "swarmx": {"n_iter": 1}}),
        (),
        (),
        None,
        "no registered model is called 'swarmx'",
    ),
    ("lr -1", "train", "clustering_direct", setp("train.lr", -1.0), (), (), None, "train.lr must be > 0, got -1.0"),
    (
        "batch > split",
        "train",
        "clustering_direct",
        setp("tasks.clustering_direct.train", {"max_epochs": 1, "time_budget_s": 0.0, "batch_size": 1000}),
        (),
        (),
        None,
        "is larger than the training split",
    ),
    (
        "k_max 200",
        "train",
        "clustering_direct",
        setp("tasks.clustering_direct.options.k_max", 200),
        (),
        (),
        None,
        "k_max must be >= 1 and <= 100, got 200",
    ),
    (
        "mog eval_every 0",
        "train",
        "clustering_mog",
        setp("tasks.clustering_mog.train", {"max_steps": 2, "eval_every": 0, "lr_decay_at": 0.0}),
        (),
        (),
        None,
        "train.eval_every is 0, but endless training data",
    ),
    (
        "lr_decay_at without steps",
        "train",
        "clustering_direct",
        setp(
            "tasks.clustering_direct.train",
            {"max_epochs": 0, "max_steps": 0, "time_budget_s": 5.0, "batch_size": 10, "lr_decay_at": 0.5},
        ),
        (),
        (),
        None,
        "lr_decay_at needs a planned number of steps",
    ),
    # --- data stages: bounded generators, refused before the folder is touched
    (
        "n_max 2000000",
        "data",
        "clustering_direct",
        setp("tasks.clustering_direct.options.n_max", 2_000_000),
        (),
        (),
        None,
        "n_max must be >= 1 and <= 20000",
    ),
    (
        "too many points",
        "data",
        "clustering_direct",
        setp(
            "tasks.clustering_direct.options",
            {"data_dir": "data/clustering_direct", "train_tasks": 1_000_000, "n_min": 10_000, "n_max": 20_000},
        ),
        (),
        (),
        None,
        "would be ~",
    ),
    (
        "data_seed -1",
        "data",
        "clustering_direct",
        setp("tasks.clustering_direct.options.data_seed", -1),
        (),
        (),
        None,
        "data_seed must be >= 0, got -1",
    ),
    (
        "val_seed -1",
        "data",
        "clustering_mog",
        setp("tasks.clustering_mog.options.val_seed", -1),
        (),
        (),
        None,
        "val_seed must be >= 0, got -1",
    ),
    (
        "mog test_tasks 0",
        "data",
        "clustering_mog",
        setp("tasks.clustering_mog.options.test_tasks", 0),
        (),
        (),
        None,
        "test_tasks must be >= 1 and <= 1000000, got 0",
    ),
    (
        "split_seed -1",
        "data",
        "mnist",
        setp("tasks.mnist.options.split_seed", -1),
        (),
        (),
        None,
        "split_seed must be >= 0",
    ),
    (
        "listops max_args 1000",
        "data",
        "listops",
        setp("tasks.listops.options.max_args", 1000),
        (),
        (),
        None,
        "max_args must be >= 2 and <= 100, got 1000",
    ),
    (
        "listops huge trees",
        "data",
        "listops",
        setp("tasks.listops.options", {"data_dir": "x", "max_args": 100, "max_depth": 10}),
        (),
        (),
        None,
        "a drawn tree has ~",
    ),
    (
        "listops lengths unreachable",
        "data",
        "listops",
        setp(
            "tasks.listops.options",
            {"data_dir": "x", "max_depth": 2, "max_args": 3, "min_length": 100, "max_length": 120, "max_len": 128},
        ),
        (),
        (),
        None,
        "trial draws were kept",
    ),
    (
        "listops rows huge",
        "data",
        "listops",
        setp("tasks.listops.options.train_rows", 20_000_000),
        (),
        (),
        None,
        "train_rows must be >= 1 and <= 10000000",
    ),
    (
        "arxiv11 one class",
        "data",
        "arxiv11",
        setp("tasks.arxiv11.options.source", "arxiv_src"),
        (),
        ("arxiv_src",),
        arxiv_one_class,
        "every training document is of one class (cs.CV)",
    ),
    # --- sample, evaluate, frontier
    (
        "sample num_threads -1",
        "sample",
        "mnist",
        setp("sample.num_threads", -1),
        (),
        (),
        None,
        "sample.num_threads must be >= 0 and <= 1024, got -1",
    ),
    (
        "sample temperature 0",
        "sample",
        "mnist",
        setp("sample.temperature", 0.0),
        (),
        (),
        None,
        "sample.temperature must be > 0",
    ),
    (
        "fashion best.pt in mnist's run",
        "sample",
        "mnist",
        None,
        (),
        (f"{MNIST_RUN}/best.pt",),
        copy_file(f"{FASHION_RUN}/best.pt", f"{MNIST_RUN}/best.pt"),
        "is not the checkpoint this run wrote",
    ),
    (
        "fashion run folder as mnist's",
        "sample",
        "mnist",
        None,
        (),
        (f"{MNIST_RUN}/best.pt", f"{MNIST_RUN}/run.json"),
        lambda root: [copy_file(f"{FASHION_RUN}/{f}", f"{MNIST_RUN}/{f}")(root) for f in ("best.pt", "run.json")],
        "task 'fashion_mnist', not swarm_transformer_small seed 0 on mnist: the folder was copied or swapped",
    ),
    (
        "evaluate, best.pt changed",
        "evaluate",
        "clustering_direct",
        None,
        (),
        (f"{DIRECT_RUNS}/swarm-seed0/best.pt",),
        scale_weights(f"{DIRECT_RUNS}/swarm-seed0/best.pt"),
        "is not the checkpoint this run wrote",
    ),
    (
        "evaluate, test split edited",
        "evaluate",
        "clustering_direct",
        None,
        (),
        (f"{DIRECT}/test.parquet",),
        copy_file(f"{DIRECT}/val.parquet", f"{DIRECT}/test.parquet"),
        "clustering_direct/test.parquet has",
    ),
    (
        "frontier metrics not JSON",
        "frontier",
        "clustering_direct",
        None,
        (),
        ("reports/train/clustering_direct/metrics.json",),
        write("reports/train/clustering_direct/metrics.json", '{"swarm-seed0": '),
        "metrics.json is not valid JSON",
    ),
    (
        "frontier num_params abc (sweep)",
        "frontier",
        "clustering_direct",
        None,
        (),
        ("reports/sweep/clustering_direct/summary.csv",),
        write(
            "reports/sweep/clustering_direct/summary.csv",
            "model,trial,status,params,num_params,best_val_loss\nswarm,t0,ok,dim_hidden=16,abc,1.5\n",
        ),
        "summary.csv:2: num_params is 'abc'",
    ),
    (
        "frontier num_params abc (train)",
        "frontier",
        "clustering_direct",
        None,
        (),
        ("reports/train/clustering_direct/metrics.json",),
        edit_json(
            "reports/train/clustering_direct/metrics.json", lambda m: m["swarm-seed0"].__setitem__("num_params", "abc")
        ),
        "num_params is 'abc'",
    ),
]


CASES = [c if c[0] != "another task's val.parquet, re-recorded" else (*c[:6], _mog_val_as_direct, c[7]) for c in CASES]


def leak(task: str, src: str, dst: str):
    """The test split's file copied over a training file, and meta.json re-recorded to match: only the check that no
    item of the test split is in the training split stands between it and training (issue 39)."""

    def damage(root):
        folder = root / "data" / task
        shutil.copyfile(folder / src, folder / dst)
        rerecord(folder, "train")

    return damage


CASES += [  # (the IMDB track's own leak cases are in test_bad_input.py and tests/tasks/test_imdb_data.py)
    (f"{task} test over train, re-recorded", "train", task, None, (), (f"data/{task}/{dst}", f"data/{task}/meta.json"),
     leak(task, src, dst), fragment)
    for task, src, dst, fragment in (
        ("mnist", "test.npz", "train.npz", "train.npz holds 16 image(s) of the test split"),
        ("fashion_mnist", "test.npz", "train.npz", "train.npz holds 16 image(s) of the test split"),
        ("clustering_direct", "test.parquet", "train.parquet", "train.parquet holds 6 task(s) of the test split"),
        ("listops", "test-000.parquet", "train-000.parquet", "expression(s) of the test split"),
        ("lra_text", "test-000.parquet", "train-000.parquet", "review(s) of the test split"),
    )
]  # fmt: skip


def backup(root: Path, targets) -> dict:
    saved = {}
    for rel in targets:
        path = root / rel
        saved[rel] = path.read_bytes() if path.is_file() else (None if not path.exists() else "dir")
    return saved


def restore(root: Path, saved: dict) -> None:
    for rel, content in saved.items():
        path = root / rel
        if content is None:
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        elif content != "dir":
            path.write_bytes(content)


def one_line(proc, fragment: str, case: str) -> None:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "Warning" not in ln and "warn(" not in ln]
    assert proc.returncode == 2, (case, proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, (case, proc.stderr)
    assert fragment in lines[0], (case, fragment, lines[0])


@pytest.mark.parametrize(
    ("case", "stage", "task", "mutate", "args", "targets", "damage", "fragment"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line_and_costs_nothing(good, case, stage, task, mutate, args, targets, damage, fragment):
    root, raw, before = good
    params = mutate(copy.deepcopy(raw)) if mutate else raw
    saved = backup(root, targets)
    try:
        if damage:
            damage(root)
        proc = run(stage, root, params, "--task", task, *args)
    finally:
        restore(root, saved)
    one_line(proc, fragment, case)
    assert snapshot(root) == before, f"{case}: the good runs' outputs changed"
    assert leftovers(root) == [], leftovers(root)


def test_a_table_of_at_least_40_cases_on_every_track():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)
    tracks = {c[2] for c in CASES}
    assert set(TRACKS) | {"arxiv11"} <= tracks
    diverging = {c[2] for c in CASES if c[0].endswith(("lr 1e4", "huge lr"))}
    assert set(TRACKS) <= diverging, "a diverging run on each track"


# --------------------------------------------------------------------------------------- kill -9 mid-write


@pytest.mark.parametrize(
    ("stage", "task", "output", "args"),
    [
        ("train", "clustering_direct", "outputs/train/clustering_direct", ()),
        ("sample", "mnist", "reports/sample/mnist", ()),
    ],
    ids=["train@clustering_direct", "sample@mnist"],
)
def test_kill_9_in_mid_write_then_a_rerun_succeeds_with_nothing_left(good, tmp_path, stage, task, output, args):
    root, raw, before = good
    work = tmp_path / "w"
    subprocess.run(["cp", "-a", f"{root}/.", str(work)], check=True)
    params = yaml.safe_load((work / "good.yaml").read_text().replace(str(root), str(work)))
    path = work / "case.yaml"
    path.write_text(yaml.safe_dump(params))
    before = snapshot(work)
    env = {
        **os.environ,
        "SWARMLAB_WORKDIR": str(work),
        "OMP_NUM_THREADS": "1",
        "SWARMLAB_PROGRESS": "0",
    }
    tracking = ("--no-tracking",) if stage == "train" else ()
    proc = subprocess.Popen(
        held_before_swap(
            f"pipelines.{stage}", "--params", str(path), "--profile", "t", "--task", task, *args, *tracking
        ),
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    parent = work / output if stage == "train" else (work / output).parent
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # until its temporary output exists
        if [p for p in parent.glob(".*") if ".tmp-" in p.name or p.name.endswith(".run")]:
            time.sleep(1.0)  # inside the write (train: inside fit, or holding before the swap)
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL, "the stage ended before it could be killed"
    after = snapshot(work)
    assert {k: v for k, v in after.items() if k in before} == before, "a killed stage changed a finished output"
    assert leftovers(work), "the kill should have left a temporary folder for the rerun to clean"
    rerun = run(stage, work, params, "--task", task, *args)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert leftovers(work) == [], leftovers(work)


# ------------------------------------------------------------------------------------------------ through DVC

DVC_CASES = [  # (id, stage, params mutation, fragment): a representative subset of the table, through `dvc repro`
    ("lr -1", "train@clustering_direct", setp("train.lr", -1.0), "train.lr must be > 0, got -1.0"),
    (
        "unknown model mapping",
        "train@clustering_direct",
        setp("tasks.clustering_direct.model_overrides", {"dim_hidden": 8, "swarmx": {"n_iter": 1}}),
        "'swarmx'",
    ),
    ("huge lr", "train@clustering_direct", setp("tasks.clustering_direct.train.lr", 1e8), "swarm-seed0 diverged"),
    (
        "data_seed -1",
        "derive@clustering_direct",
        setp("tasks.clustering_direct.options.data_seed", -1),
        "data_seed must be >= 0",
    ),
    ("sample num_threads -1", "sample@mnist", setp("sample.num_threads", -1), "sample.num_threads must be >= 0"),
    # the stages without a run folder of their own (issue 39): persist outputs, swapped in by the stage on success
    ("max_train -5", "prepare", setp("prepare.max_train", -5), "max_train"),
    ("seq_len 1", "tokenize", setp("tokenize.seq_len", 1), "seq_len"),
    ("augment enabled flase", "augment", setp("augment.enabled", "flase"), "augment.enabled"),
    ("tokens [0]", "memory_scaling", setp("memory_scaling.tokens", [0]), "memory_scaling.tokens"),
]
ENV_CASES = [  # (id, stage, environment, fragment): a refused environment, outputs kept (with --force too)
    ("progress maybe", "memory_scaling", {"SWARMLAB_PROGRESS": "maybe"}, "SWARMLAB_PROGRESS"),
    ("garbage store", "paper_baselines", {"MLFLOW_TRACKING_URI": "nosuchscheme://x"}, "MLFLOW_TRACKING_URI"),
]
TINY_DATA = {  # IMDB's three data steps and memory_scaling, tiny, for the cases above
    "prepare": {"max_train": 40, "max_test": 20},
    "augment": {"workers": 1},
    "tokenize": {"seq_len": 32},
    "memory_scaling": {
        "models": ["swarmformer_small cluster_size=2"],
        "tokens": [64, 128],
        "fit_min_tokens": 64,
        "warmup_tokens": 0,
        "timeout_s": 60.0,
    },
}


def dvc(repo: Path, *args, timeout=300, env=None):
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "SWARMLAB_PROGRESS": "0",
        "DVC_NO_ANALYTICS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlruns.db'}",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        **(env or {}),
    }
    env.pop("SWARMLAB_WORKDIR", None)
    env.pop("SWARMLAB_DATASETS", None)
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def dvc_repo(tmp_path_factory):
    """A copy of the project (code, dvc.yaml, a tiny params.yaml) as a DVC repository without git, with
    derive@clustering_direct, train@clustering_direct, data@mnist, train@mnist, sample@mnist, IMDB's prepare, augment
    and tokenize, memory_scaling and paper_baselines reproduced."""
    repo = tmp_path_factory.mktemp("dvcrepo")
    for name in ("pipelines", "tasks", "models", "swarmlab", "benchmarks", "dvc.yaml", "sweeps"):
        src = REPO_ROOT / name
        (
            shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
            if src.is_dir()
            else shutil.copy(src, repo / name)
        )
    raw = base_params(repo)
    for key in TRACKS:  # the stages' declared outputs: the default folders, relative to the repo
        raw["profiles"]["t"]["tasks"][key]["options"]["data_dir"] = f"data/{key}"
    raw["profiles"]["t"]["tasks"]["lra_text"]["options"]["source_dir"] = "data/prepared"
    raw["train"], raw["augment"] = {}, {"enabled": True}
    raw["profiles"]["t"].update(copy.deepcopy(TINY_DATA))
    (repo / "params.yaml").write_text(yaml.safe_dump(raw))
    init = dvc(repo, "init", "--no-scm")
    assert init.returncode == 0, init.stderr
    for stage in ("train@clustering_direct", "sample@mnist", "tokenize", "memory_scaling", "paper_baselines"):
        proc = dvc(repo, "repro", stage)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return repo, raw


@pytest.mark.parametrize(("case", "stage", "mutate", "fragment"), DVC_CASES, ids=[c[0] for c in DVC_CASES])
def test_bad_input_through_dvc_repro_keeps_the_outputs(dvc_repo, case, stage, mutate, fragment):
    repo, raw = dvc_repo
    before = snapshot(repo)
    assert any(k.startswith("outputs/train/clustering_direct/") for k in before)
    good_params = (repo / "params.yaml").read_bytes()
    (repo / "params.yaml").write_text(yaml.safe_dump(mutate(copy.deepcopy(raw))))
    try:
        proc = dvc(repo, "repro", "--single-item", stage)
    finally:
        (repo / "params.yaml").write_bytes(good_params)
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode != 0, (case, proc.stdout[-2000:])
    assert len(ours) == 1 and fragment in ours[0] and "Traceback" not in proc.stderr, (case, proc.stderr[-3000:])
    assert snapshot(repo) == before, f"{case}: dvc repro lost or changed an output"


@pytest.mark.parametrize("force", [False, True], ids=["repro", "repro --force"])
@pytest.mark.parametrize(("case", "stage", "env", "fragment"), ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_refused_environment_through_dvc_keeps_the_outputs(dvc_repo, case, stage, env, fragment, force):
    """A stage refusing its environment (which DVC does not track) under `dvc repro --force`: DVC starts the stage
    without deleting its persist outputs, and the stage refuses before it writes."""
    repo, _ = dvc_repo
    before = snapshot(repo)
    assert any(k.startswith(f"reports/{stage}/") for k in before), sorted(before)[:20]
    proc = dvc(repo, "repro", "--single-item", *(["--force"] if force else []), stage, env=env)
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    if not force:  # nothing DVC tracks changed: the stage is up to date and does not run
        assert proc.returncode == 0 and not ours, (case, proc.stderr[-2000:])
    else:
        assert proc.returncode != 0, (case, proc.stdout[-2000:])
        assert len(ours) == 1 and fragment in ours[0] and "Traceback" not in proc.stderr, (case, proc.stderr[-3000:])
    assert snapshot(repo) == before, f"{case}: dvc repro lost or changed an output"


@pytest.mark.parametrize("pipeline", ["dvc.yaml", "sweeps/dvc.yaml", "claims/dvc.yaml"])
def test_every_stage_output_persists(pipeline):
    """Every output of every stage is `persist: true` (DVC deletes the others before the stage can refuse its input)."""
    from tests.e2e.test_dvc_truth import expand

    stages = expand(REPO_ROOT / pipeline)
    missing = []
    for name, stage in stages.items():
        for section in ("outs", "metrics", "plots"):
            for entry in stage.get(section, []):
                path, opts = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
                if not (opts or {}).get("persist"):
                    missing.append(f"{name}: {path}")
    assert stages and not missing, missing


# (id, `dvc exp run -S` overrides, target, fragment of our one line; None: DVC itself refuses). Each override reaches
# the target stage alone: a change under profiles.t would rerun every stage upstream too (each declares the profile's
# section), and those would rightly rewrite their outputs.
EXP_CASES = [
    ("vocab missing", ["defaults.tokenize.vocab=bert_vocab/none.txt"], "tokenize", "none.txt"),
    ("augment enabled flase", ["augment.enabled=flase"], "augment", "augment.enabled"),
    ("batch_size 0", ["defaults.memory_scaling.batch_size=0"], "memory_scaling", "batch_size"),
    ("no such profile", ["profile=smok"], "tokenize", None),
]


@pytest.fixture(scope="module")
def exp_repo(dvc_repo, tmp_path_factory):
    """``dvc_repo`` as a git repository (DVC experiments live in git): code and params committed, outputs ignored."""
    repo, _ = dvc_repo
    exp = tmp_path_factory.mktemp("exprepo") / "repo"
    shutil.copytree(repo, exp, symlinks=True)
    config = exp / ".dvc" / "config"
    config.write_text("\n".join(ln for ln in config.read_text().splitlines() if "no_scm" not in ln) + "\n")
    (exp / ".gitignore").write_text("data/\noutputs/\nreports/\nmlruns.db*\nmlartifacts/\n__pycache__/\n")
    (exp / ".dvc" / ".gitignore").write_text("/config.local\n/tmp\n/cache\n")
    git = lambda *a: subprocess.run(["git", *a], cwd=exp, capture_output=True, text=True, check=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "tiny project")
    status = dvc(exp, "status", "tokenize", "memory_scaling", "augment")
    assert status.returncode == 0 and "changed" not in status.stdout, status.stdout + status.stderr
    return exp


@pytest.mark.parametrize(("case", "overrides", "target", "fragment"), EXP_CASES, ids=[c[0] for c in EXP_CASES])
def test_bad_input_through_dvc_exp_run_keeps_the_outputs(exp_repo, case, overrides, target, fragment):
    """`dvc exp run -S ...` (README: experiments) with a setting the stage refuses: non-zero, one line, every output
    byte-identical (DVC applies the overrides to params.yaml, then reproduces the target like `dvc repro`)."""
    before = snapshot(exp_repo)
    assert any(k.startswith("data/tokenized/") for k in before)
    good_params = (exp_repo / "params.yaml").read_bytes()
    try:
        proc = dvc(exp_repo, "exp", "run", *(a for o in overrides for a in ("-S", o)), target)
    finally:
        (exp_repo / "params.yaml").write_bytes(good_params)
    assert proc.returncode != 0, (case, proc.stdout[-2000:], proc.stderr[-2000:])
    if fragment is not None:
        ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
        assert len(ours) == 1 and fragment in ours[0] and "Traceback" not in proc.stderr, (case, proc.stderr[-3000:])
    assert snapshot(exp_repo) == before, f"{case}: dvc exp run lost or changed an output"


def test_the_dvc_experiment_loop_completes_and_its_changed_read_is_exploratory(exp_repo, tmp_path):
    """The textbook loop (#38): evaluate, then `dvc exp run -S <a training setting>` retrains and evaluates again.
    The second read of the test split under another lr is not refused (no --retest through DVC): it completes, DVC
    records the experiment, and the read is logged as exploratory, with the experiment's name (it decides no claim)."""
    from swarmlab.drive.report.testsplit import load_log

    good_params = (exp_repo / "params.yaml").read_bytes()
    log = {"SWARMLAB_TEST_READ_LOG": str(tmp_path / "test_reads.jsonl")}  # this test's reads alone
    try:
        first = dvc(exp_repo, "exp", "run", "-n", "base", "evaluate@clustering_direct", env=log)
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
        loop = dvc(
            exp_repo, "exp", "run", "-n", "lr-up", "-S", "+train.lr=0.003", "evaluate@clustering_direct", env=log
        )
        assert loop.returncode == 0, loop.stdout[-2000:] + loop.stderr[-3000:]
        listed = dvc(exp_repo, "exp", "list", "--name-only")
    finally:
        (exp_repo / "params.yaml").write_bytes(good_params)
    assert {"base", "lr-up"} <= set(listed.stdout.split()), listed.stdout + listed.stderr
    lines = load_log(tmp_path / "test_reads.jsonl")
    assert lines and not any(ln.get("experiment") for ln in lines if ln["kind"] == "first"), lines
    changed = [ln for ln in lines if ln["train_settings"]["lr"] == 0.003]
    assert changed and all(ln["kind"] == "re-read" and ln["experiment"] == "lr-up" for ln in changed), changed


def test_a_new_sweep_choice_marks_the_final_runs_stale(dvc_repo):
    """train@ and evaluate@ depend on what the sweep stage chose (reports/sweep/<task>/chosen.json; #37): the
    fixture's `dvc repro train@clustering_direct` passed through sweep@clustering_direct, which under the default
    `tuning: pinned` recorded the pins; a changed choice marks the final runs stale, and nothing else."""
    repo, _ = dvc_repo
    chosen = repo / "reports" / "sweep" / "clustering_direct" / "chosen.json"
    assert json.loads(chosen.read_text())["tuning"] == "pinned"
    status = dvc(repo, "status", "train@clustering_direct")
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout + status.stderr
    original = chosen.read_bytes()
    try:
        chosen.write_text(json.dumps({**json.loads(original), "sweep_id": "another"}))
        status = dvc(repo, "status", "train@clustering_direct")
    finally:
        chosen.write_bytes(original)
    assert "changed deps" in status.stdout and "reports/sweep/clustering_direct/chosen.json" in status.stdout, (
        status.stdout
    )
