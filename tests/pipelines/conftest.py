"""Fixtures for the sweep tests: a tiny tokenized IMDB built from reviews made up here, and sweep params.

Nothing here reads ``data/`` of the checkout: the fake reviews go through the real prepare and tokenize
stages (with the shipped BERT vocabulary) into a temporary folder.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from swarmlab.drive.params import load_params
from tests.conftest import imdb_step

POSITIVE = "great wonderful superb moving brilliant delightful charming excellent".split()
NEGATIVE = "awful boring dreadful clumsy tedious terrible dull painful".split()
NEUTRAL = "the movie film plot actor scene story director music camera and was with a of".split()


def make_fake_imdb(folder: Path, *, n_train: int = 160, n_test: int = 40, seed: int = 0) -> Path:
    """``imdb_{train,test}.parquet`` in the shipped layout (text, label, rating, review_id)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        rows = {"text": [], "label": [], "rating": [], "review_id": []}
        for i in range(n):
            label = i % 2
            cue = POSITIVE if label else NEGATIVE
            words = [rng.choice(NEUTRAL if rng.random() < 0.7 else cue) for _ in range(rng.randint(30, 90))]
            rows["text"].append(" ".join(words) + ".")
            rows["label"].append(label)
            rows["rating"].append(rng.randint(7, 10) if label else rng.randint(1, 4))
            rows["review_id"].append(i)
        table = pa.table(
            {
                "text": pa.array(rows["text"], pa.string()),
                "label": pa.array(rows["label"], pa.int8()),
                "rating": pa.array(rows["rating"], pa.int8()),
                "review_id": pa.array(rows["review_id"], pa.int32()),
            }
        )
        pq.write_table(table, folder / f"imdb_{split}.parquet")
    return folder


TINY_SPACE = {
    "swarmformer*": {
        "d_model": [8, 16],
        "num_layers": [1],
        "t_local": [1],
        "cluster_size": [4, 8],
        "seq_len": [32, 64],
        "batch_size": [32],
        "lr": {"loguniform": [1.0e-3, 1.0e-2]},
        "dropout": [0.1],
    },
    "default": {
        "d_model": [8, 16],
        "num_layers": [1],
        "seq_len": [32, 64],
        "batch_size": [32],
        "lr": {"loguniform": [1.0e-3, 1.0e-2]},
    },
}


def tiny_params(**sweep) -> dict:
    """The smoke profile with a tiny space and 2 quick trials; ``sweep`` overrides sweep settings."""
    params = copy.deepcopy(load_params(profile="smoke"))
    params["train"].update(patience=0)
    params["tasks"]["imdb"]["model_overrides"] = {}
    params["evaluate"]["batch_size"] = 64
    params["sweep"].update(
        num_samples=2,
        max_concurrent=2,
        cpus_per_trial=1,
        gpus_per_trial=0,
        max_epochs=2,
        grace_period=2,
        startup_trials=10,
        max_failures=2,
        address="",
        spaces={"imdb": copy.deepcopy(TINY_SPACE)},
    )
    params["sweep"].update(sweep)
    return params


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """Tokenized tiny IMDB (seq_len 64) with the test split removed: a sweep must never need it."""
    root = tmp_path_factory.mktemp("tiny_imdb")
    params = copy.deepcopy(load_params(profile="smoke"))
    params["prepare"].update(
        source=str(make_fake_imdb(root / "raw")), val_fraction=0.25, max_train=0, max_test=0, shards=1
    )
    params["tokenize"]["seq_len"] = 64
    imdb_step(params, "prepare", root / "prepared")
    imdb_step(params, "tokenize", root / "tokenized", root / "prepared")
    for shard in (root / "tokenized").glob("test-*.parquet"):
        shard.unlink()
    return root / "tokenized"


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports: every socket stays bound until all are chosen, so the OS cannot hand one port out
    twice (two bind-and-close calls may get the same port back; Ray refuses a node whose components share one)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def short_tmpdir(prefix: str) -> str:
    """A short folder under /tmp: Ray's socket paths must stay under 107 characters."""
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray instance (2 CPUs, token auth off, its own temp folder) shared by a test module."""
    import shutil

    import ray

    from swarmlab.drive.schedule.cluster import connect_ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp_dir = short_tmpdir("rt")
    assert not ray.is_initialized(), "another test left Ray running"
    connect_ray(None, num_cpus=2, temp_dir=temp_dir)
    yield ray
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def write_params(folder: Path, space: dict | None = None, **sweep) -> Path:
    """A params.yaml whose smoke profile sweeps ``space`` (default: the tiny one), for tests that run the CLI; IMDB's
    ``tuning`` is ``sweep``, so the CLI searches (under ``pinned`` it would only record the pins) and decides."""
    import yaml

    from swarmlab.paths import PARAMS_FILE

    raw = yaml.safe_load(PARAMS_FILE.read_text())
    raw["defaults"]["sweep"]["spaces"] = {"imdb": copy.deepcopy(space or TINY_SPACE)}
    smoke = raw["profiles"]["smoke"]
    smoke["train"].update(patience=0)
    smoke["tasks"]["imdb"]["model_overrides"] = {}
    smoke["tasks"]["imdb"]["tuning"] = "sweep"
    smoke["evaluate"]["batch_size"] = 64
    smoke["sweep"] = {
        "num_samples": 2,
        "max_concurrent": 2,
        "cpus_per_trial": 1,
        "gpus_per_trial": 0,
        "max_epochs": 2,
        "grace_period": 2,
        "startup_trials": 10,
        "max_failures": 2,
        **sweep,
    }
    raw["paths"]["datasets"] = str(PARAMS_FILE.parent.joinpath(raw["paths"]["datasets"]).resolve())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


RAY = str(Path(sys.executable).with_name("ray"))


NODE_PORT_FLAGS = (
    "--node-manager-port",
    "--object-manager-port",
    "--metrics-export-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
)


def _node_ports(ports: list[int]) -> list[str]:
    """Explicit free ports for one node (from ``free_ports``), so that it cannot clash with another Ray on this
    machine, nor its components with each other."""
    return [arg for flag, port in zip(NODE_PORT_FLAGS, ports, strict=True) for arg in (flag, str(port))]


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # `ray start --block` then stops the processes of its node
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@dataclass
class LoopbackCluster:
    address: str
    env: dict
    head_node: str
    worker_node: str
    worker: subprocess.Popen | None = None  # the worker node's `ray start --block`: a test may kill the whole node


@contextlib.contextmanager
def start_loopback_cluster(*, head_cpus: int, worker_cpus: int):
    """A head and one worker node started with `ray start` on 127.0.0.1, token auth off; stopped even if a test fails.

    Stops exactly the processes it started (`ray start --block` exits with its node's processes), never `ray stop`,
    which would stop every Ray process of this user on the machine.
    """
    import ray

    temp_dir = short_tmpdir("rc")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    k = len(NODE_PORT_FLAGS)
    port, *ports = free_ports(1 + 2 * k)  # the head's GCS port and both nodes' components, all distinct
    head_ports, worker_ports = ports[:k], ports[k:]
    address = f"127.0.0.1:{port}"
    common = ["--block", "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}", "--disable-usage-stats"]
    head = worker = None
    logs = [open(Path(temp_dir) / f"{name}.log", "w") for name in ("head", "worker")]
    before = os.environ.get("RAY_AUTH_MODE")
    try:
        head = subprocess.Popen(
            [
                RAY,
                "start",
                "--head",
                f"--port={port}",
                f"--num-cpus={head_cpus}",
                "--include-dashboard=false",
                *common,
                *_node_ports(head_ports),
            ],
            env=env,
            stdout=logs[0],
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            assert head.poll() is None, (Path(temp_dir) / "head.log").read_text()[-2000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the head did not start"
                time.sleep(0.2)
        worker = subprocess.Popen(
            [RAY, "start", f"--address={address}", f"--num-cpus={worker_cpus}", *common, *_node_ports(worker_ports)],
            env=env,
            stdout=logs[1],
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        os.environ["RAY_AUTH_MODE"] = "disabled"
        ray.init(address=address, log_to_driver=False)  # wait until the worker has joined
        try:
            while (
                len([n for n in ray.nodes() if n["Alive"]]) < 2
                or sum(n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]) < head_cpus + worker_cpus
            ):
                assert worker.poll() is None and time.monotonic() < deadline, "the worker did not join"
                time.sleep(0.2)
            nodes = [n for n in ray.nodes() if n["Alive"]]
            head_node = next(n["NodeID"] for n in nodes if n["Resources"].get("node:__internal_head__"))
            worker_node = next(n["NodeID"] for n in nodes if n["NodeID"] != head_node)
        finally:
            ray.shutdown()
        yield LoopbackCluster(address, env, head_node, worker_node, worker)
    finally:
        _stop(worker)
        _stop(head)
        for f in logs:
            f.close()
        if before is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = before
        leftovers = subprocess.run(["pgrep", "-f", temp_dir], capture_output=True, text=True).stdout.split()
        for pid in map(int, leftovers):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not leftovers, f"Ray processes survived the cluster's stop: {leftovers}"
