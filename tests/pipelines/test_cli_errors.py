"""Bad input gets a one-line error naming the culprit and what to do: no traceback, exit 2, no half-written output."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import (
    REPO_ROOT,
    SHARED_DATASETS,
    acl_members,
    stage_module,
    write_acl_folder,
    write_parquet_folder,
)

pytestmark = pytest.mark.slow  # each case starts Python processes


def run_stage(stage, workdir: Path, params: dict, *extra):
    path = workdir / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    env = {**os.environ, "SWARMLAB_WORKDIR": str(workdir), "OMP_NUM_THREADS": "1"}
    env.pop("SWARMLAB_DATASETS", None)
    return subprocess.run(
        [sys.executable, "-m", *stage_module(stage), "--params", str(path), "--profile", "t", *extra],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def base_params(source="") -> dict:
    return {
        "profile": "t",
        "paths": {"datasets": str(SHARED_DATASETS)},
        "defaults": yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["defaults"],
        "profiles": {
            "t": {
                "prepare": {"source": str(source), "max_train": 0},
                "tokenize": {"seq_len": 32},
                "tasks": {"imdb": {"model_overrides": {"seq_len": 32, "d_model": 16, "cluster_size": 4}}},
                "train": {"max_epochs": 1, "batch_size": 8, "device": "cpu"},
            }
        },
    }


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [
        line for line in proc.stderr.splitlines() if line.strip() and "Warning" not in line and "warn(" not in line
    ]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def leftovers(folder: Path) -> list[str]:
    """Parquet files and temporary folders under ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if "tmp" in p.name or p.suffix == ".parquet")


def test_missing_datasets_path(tmp_path):
    params = base_params()
    params["paths"]["datasets"] = str(tmp_path / "no-such-folder")
    proc = run_stage("prepare", tmp_path, params)
    assert_one_line_error(proc, f"datasets folder {tmp_path / 'no-such-folder'} does not exist", "set paths.datasets")
    assert not (tmp_path / "data" / "prepared").exists() and leftovers(tmp_path) == []


def test_unknown_params_key(tmp_path):
    params = base_params()
    params["profiles"]["t"]["train"]["learning_rate"] = 0.1
    assert_one_line_error(run_stage("train", tmp_path, params), "unknown key 'train.learning_rate'", "known keys here")


def test_wrong_type(tmp_path):
    params = base_params()
    params["profiles"]["t"]["train"]["batch_size"] = "big"
    assert_one_line_error(run_stage("train", tmp_path, params), "train.batch_size must be a int", "'big'")


def test_value_the_engine_refuses(tmp_path):
    params = base_params()
    params["profiles"]["t"]["train"]["amp"] = "half"
    assert_one_line_error(
        run_stage("train", tmp_path, params),
        "amp must be one of fp32, bf16, auto",
        "got 'half' (train / tasks.imdb.train)",
    )


def test_empty_review(tmp_path):
    def blank(split, rows):
        if split == "test":
            rows[5]["text"] = ""

    source = write_parquet_folder(tmp_path / "src", 6, mutate=blank)
    proc = run_stage("prepare", tmp_path, base_params(source))
    assert_one_line_error(proc, "review_id 5 (label 0)", "imdb_test.parquet is an empty review", "delete it")
    assert not (tmp_path / "data" / "prepared").exists() and leftovers(tmp_path / "src") == [
        "imdb_test.parquet",
        "imdb_train.parquet",
    ]


def test_non_utf8_review(tmp_path):
    files = acl_members(3)
    files["aclImdb/test/neg/2_1.txt"] = "naïve".encode("latin-1")
    source = write_acl_folder(tmp_path / "src", files)
    proc = run_stage("prepare", tmp_path, base_params(source))
    assert_one_line_error(proc, "aclImdb/test/neg/2_1.txt is not valid UTF-8", "re-encode it")
    assert not (tmp_path / "data" / "prepared").exists()


def test_pipeline_errors_downstream(tmp_path):
    """seq_len not divisible by cluster_size, then a corrupted shard; successful stages run in between."""
    source = write_parquet_folder(tmp_path / "src", 6)
    params = base_params(source)
    for stage in ("prepare", "augment", "tokenize"):
        proc = run_stage(stage, tmp_path, params)
        assert proc.returncode == 0, (stage, proc.stderr)

    bad = base_params(source)
    bad["profiles"]["t"]["tasks"]["imdb"]["model_overrides"]["cluster_size"] = 5
    proc = run_stage("train", tmp_path, bad)
    assert_one_line_error(proc, "seq_len=32 is not divisible by cluster_size=5", "tasks.imdb.model_overrides")
    assert not (tmp_path / "outputs").exists()

    shard = tmp_path / "data" / "tokenized" / "train-001.parquet"
    shard.write_bytes(shard.read_bytes()[: len(shard.read_bytes()) // 2])  # truncated: a damaged copy
    proc = run_stage("train", tmp_path, params, "--no-tracking")
    assert_one_line_error(proc, "train-001.parquet has", "bytes but meta.json recorded", "damaged")  # its hash

    augmented = tmp_path / "data" / "augmented" / "val-000.parquet"  # tokenize reads the augment stage's output
    augmented.write_bytes(b"not parquet at all")
    proc = run_stage("tokenize", tmp_path, params)
    assert_one_line_error(proc, "val-000.parquet", "damaged")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "augmented",
        "prepared",
        "tokenized",
    ]  # no tmp folder left
