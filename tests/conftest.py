"""Shared fixtures: tiny generated IMDB data in every upstream layout, tiny params, an isolated MLflow store."""

from __future__ import annotations

import copy
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATASETS = Path(os.environ.get("SWARMLAB_DATASETS", REPO_ROOT.parent / "shared" / "datasets")).resolve()

POSITIVE = [
    "A wonderful film, truly great acting.",
    "I loved it! Best movie of the year.",
    "Brilliant and moving. Café scenes were superb.",
    "Great fun, would watch again.",
    "An excellent cast and a clever story.",
    "Beautiful, touching and funny.",
]
NEGATIVE = [
    "A terrible film, truly awful acting.",
    "I hated it. Worst movie of the year.",
    "Boring and dull. The plot made no sense.",
    "Bad fun, would never watch again.",
    "A poor cast and a stupid story.",
    "Ugly, tedious and unfunny.",
]


def _threads_per_worker() -> int:
    """Cores per pytest-xdist worker (.ci/run starts two): two workers on two cores get one thread each,
    so that torch's pools in the workers and in the stages they run as subprocesses do not fight over the cores. A
    plain ``pytest`` (one process) keeps two."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(2, cpus // workers))


def pytest_configure(config):
    if "PYTEST_XDIST_WORKER" in os.environ:
        import torch

        torch.set_num_threads(_threads_per_worker())


@pytest.fixture(scope="session", autouse=True)
def _test_read_log(tmp_path_factory):
    """No test appends to the repo's log of test-split reads (reports/test_reads.jsonl): set in os.environ, so that
    the stages a test runs as subprocesses (grid points, claims pieces) inherit it."""
    before = os.environ.get("SWARMLAB_TEST_READ_LOG")
    path = tmp_path_factory.mktemp("test_read_log") / "test_reads.jsonl"
    os.environ["SWARMLAB_TEST_READ_LOG"] = str(path)
    yield path
    if before is None:
        os.environ.pop("SWARMLAB_TEST_READ_LOG", None)
    else:
        os.environ["SWARMLAB_TEST_READ_LOG"] = before


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """No test writes to the repo's MLflow store or shows progress bars."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlruns.db'}")
    monkeypatch.setenv("SWARMLAB_PROGRESS", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", str(_threads_per_worker())))


def reviews(n_per_label: int) -> list[dict]:
    """``n_per_label`` positive and negative synthetic reviews (label, rating, review_id, text)."""
    out = []
    for label, pool, ratings in ((0, NEGATIVE, (1, 2, 3, 4)), (1, POSITIVE, (7, 8, 9, 10))):
        for i in range(n_per_label):
            text = " ".join(pool[(i + j) % len(pool)] for j in range(1 + i % 4)) + f" Review number {i}."
            out.append({"text": text, "label": label, "rating": ratings[i % 4], "review_id": i})
    return out


def write_parquet_folder(folder: Path, n_per_label: int = 20, *, text_type=pa.string(), mutate=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        rows = reviews(n_per_label)
        if mutate:
            mutate(split, rows)
        texts = [
            r["text"] if text_type == pa.string() or isinstance(r["text"], bytes) else r["text"].encode() for r in rows
        ]
        table = pa.table(
            {
                "text": pa.array(texts, type=text_type),
                "label": pa.array([r["label"] for r in rows], pa.int8()),
                "rating": pa.array([r["rating"] for r in rows], pa.int8()),
                "review_id": pa.array([r["review_id"] for r in rows], pa.int32()),
            }
        )
        pq.write_table(table, folder / f"imdb_{split}.parquet")
    return folder


def acl_members(n_per_label: int = 5) -> dict[str, bytes]:
    files = {"aclImdb/README": b"readme", "aclImdb/imdb.vocab": b"the\n"}
    for split in ("train", "test"):
        for r in reviews(n_per_label):
            pol = "pos" if r["label"] else "neg"
            files[f"aclImdb/{split}/{pol}/{r['review_id']}_{r['rating']}.txt"] = r["text"].encode()
        files[f"aclImdb/{split}/unsup/0_0.txt"] = b"unlabelled text"
    return files


def write_acl_folder(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root / "aclImdb"


def write_acl_tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def imdb_parquet(tmp_path) -> Path:
    return write_parquet_folder(tmp_path / "imdb")


def _train_defaults() -> dict:
    import yaml

    return yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["defaults"]["train"]


TINY_PARAMS = {
    "profile": "test",
    "paths": {"datasets": str(SHARED_DATASETS)},
    "seed": 0,
    "task": "imdb",
    "tasks": {
        "imdb": {
            "models": ["swarmformer_small"],
            "model_overrides": {"d_model": 16, "seq_len": 32, "cluster_size": 4, "dropout": 0.1},
            "train": {},
            "options": {"data_dir": "data/tokenized"},
        }
    },
    "prepare": {"source": "", "val_fraction": 0.2, "max_train": 0, "max_test": 0, "shards": 2},
    "tokenize": {"vocab": "bert_vocab/bert-base-uncased-vocab.txt", "seq_len": 32},
    "train": {
        **_train_defaults(),
        "batch_size": 8,
        "lr": 1e-3,
        "weight_decay": 0.01,
        "max_epochs": 2,
        "patience": 0,
        "device": "cpu",
        "amp": False,
    },
    "evaluate": {"batch_size": 16, "warmup_batches": 1},
}


@pytest.fixture
def tiny_params(imdb_parquet) -> dict:
    params = copy.deepcopy(TINY_PARAMS)
    params["prepare"]["source"] = str(imdb_parquet)
    return params


IMDB_STEPS = ("prepare", "augment", "tokenize")  # IMDB's data steps: dvc.yaml stages that run the data stage


def stage_module(stage: str) -> list[str]:
    """``pipelines.<stage>``, or the data stage's module and flags for one of IMDB's data steps, as dvc.yaml runs it."""
    return ["pipelines.data", "--task", "imdb", "--step", stage] if stage in IMDB_STEPS else [f"pipelines.{stage}"]


def imdb_step(params: dict, step: str, out_dir: Path, in_dir: Path | None = None) -> dict:
    """One of IMDB's data steps (tasks/imdb_data.py) with its settings from ``params``, from ``in_dir`` (the folder
    of the step before) into a new ``out_dir``; returns the ``meta.json`` it wrote. The tests skip ``augment`` where
    they can: ``tokenize`` reads the prepared layout as it reads the augmented one."""
    import json

    from swarmlab.paths import datasets_dir
    from swarmlab.drive.sections import section
    from tasks import imdb_data

    out_dir.mkdir(parents=True)
    cfg, datasets = section(params, step), datasets_dir(params)
    if step == "prepare":
        imdb_data.prepare(cfg, out_dir, datasets=datasets, seed=params["seed"])
    elif step == "augment":
        imdb_data.augment(cfg, in_dir, out_dir, datasets=datasets, seed=params["seed"])
    else:
        from pipelines.data import record_items
        from tasks import get_task

        imdb_data.tokenize(cfg, in_dir, out_dir, datasets=datasets)
        record_items(get_task("imdb"), out_dir)  # as the data stage does for the folder training reads
    return json.loads((out_dir / "meta.json").read_text())


@pytest.fixture
def tiny_tokenized(tiny_params, tmp_path) -> Path:
    """A prepared + tokenized tiny IMDB in tmp_path/data; returns the tokenized folder."""
    imdb_step(tiny_params, "prepare", tmp_path / "data" / "prepared")
    imdb_step(tiny_params, "tokenize", tmp_path / "data" / "tokenized", tmp_path / "data" / "prepared")
    tiny_params["tasks"]["imdb"]["options"]["data_dir"] = str(tmp_path / "data" / "tokenized")
    return tmp_path / "data" / "tokenized"


def run_train_toy(workdir: Path, params: Path, *extra, wait: bool = True):
    """``python -m pipelines.train --task toy_counting`` as a user runs it, in ``workdir`` (SWARMLAB_WORKDIR), one
    torch thread, no tracking; ``wait=False`` returns the running process (to kill it)."""
    env = {**os.environ, "SWARMLAB_WORKDIR": str(workdir), "OMP_NUM_THREADS": "1", "SWARMLAB_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "pipelines.train", "--params", str(params), "--task", "toy_counting", "--no-tracking"]
    cmd += list(extra)
    if wait:
        return subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


_HELD_BEFORE_SWAP = """\
import runpy, sys, time
import swarmlab.io
hold_s, module, args = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
swap = swarmlab.io.swap_into_place
def held(new, final):
    time.sleep(hold_s)
    swap(new, final)
swarmlab.io.swap_into_place = held  # before the stage imports it
sys.argv = [module, *args]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def held_before_swap(module: str, *args: str, hold_s: float = 30.0) -> list[str]:
    """The command line of ``python -m <module> *args`` in which every output swap (``swarmlab.io.swap_into_place``)
    first waits ``hold_s`` seconds with the finished output still in its temporary folder: a kill -9 sent meanwhile
    lands between writing an output and putting it in place, which the rerun must clean up."""
    return [sys.executable, "-c", _HELD_BEFORE_SWAP, str(hold_s), module, *args]
