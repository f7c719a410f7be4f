"""An endless generated task through the real train stage: steps, evaluations, kill -9 and --resume."""

import csv
import json
import signal
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, run_train_toy as run_train

pytestmark = pytest.mark.slow  # Python processes


def toy_params(folder: Path, **train) -> Path:
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    raw["profile"] = "t"
    raw["profiles"] = {
        "t": {
            "tasks": {"toy_counting": {"train": {"max_steps": 400, "eval_every": 40, **train}}},
            "train": {"device": "cpu", "num_threads": 1},
        }
    }
    raw.pop("train", None)
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def history(workdir: Path) -> list[dict]:
    rows = csv.DictReader(open(workdir / "outputs" / "train" / "toy_counting" / "transformer-seed0" / "history.csv"))
    return [{k: v for k, v in r.items() if k not in ("train_time_s", "train_samples_per_s")} for r in rows]


def test_endless_task_trains_through_the_stage_and_resumes_after_kill_9(tmp_path):
    params = toy_params(tmp_path)
    straight = run_train(tmp_path / "a", params)
    assert straight.returncode == 0, straight.stderr
    metrics = json.loads((tmp_path / "a" / "reports" / "train" / "toy_counting" / "metrics.json").read_text())[
        "transformer-seed0"
    ]
    assert metrics["steps"] == 400 and metrics["evaluations"] == 10 and metrics["stopped"] == "max_steps"
    assert metrics["val_accuracy"] > 0.7  # it learns to count from generated batches

    # the same run, killed (SIGKILL) after its second checkpoint, then resumed
    proc = run_train(tmp_path / "b", params, wait=False)
    last = (
        tmp_path / "b" / "outputs" / "train" / "toy_counting" / ".transformer-seed0.run" / "history.csv"
    )  # in progress
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if last.is_file() and len(last.read_text().splitlines()) >= 3:  # header + 2 evaluations
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    assert proc.wait(60) == -signal.SIGKILL, "the run ended before it could be killed"
    done = len(last.read_text().splitlines()) - 1
    assert done < 10
    assert not (
        tmp_path / "b" / "outputs" / "train" / "toy_counting" / "transformer-seed0"
    ).exists()  # nothing half-done in place
    resumed = run_train(tmp_path / "b", params, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert not last.parent.exists()  # renamed into place
    assert history(tmp_path / "b") == history(tmp_path / "a")
    again = json.loads((tmp_path / "b" / "reports" / "train" / "toy_counting" / "metrics.json").read_text())[
        "transformer-seed0"
    ]
    assert {k: v for k, v in again.items() if "time" not in k and "per_s" not in k} == {
        k: v for k, v in metrics.items() if "time" not in k and "per_s" not in k
    }
