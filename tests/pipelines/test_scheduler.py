"""The runs scheduler without Ray: its settings, equal budgets, records, and a driver killed mid-stage.

The Ray side (a two-node cluster, a worker killed mid-run) is in test_scheduler_ray.py.
"""

from __future__ import annotations

import copy
import json
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from swarmlab.drive.params import load_params
from swarmlab.drive.schedule.scheduler import Scheduler, run_resources, schedule_settings
from swarmlab.errors import SwarmlabError
from tests.conftest import REPO_ROOT, run_train_toy

TOY = {
    "models": ["transformer", "linear_transformer"],
    "seeds": [0, 1],
    "model_overrides": {"d_model": 16, "num_layers": 1, "num_heads": 2},
    "train": {"max_epochs": 0, "max_steps": 40, "eval_every": 20, "batch_size": 16, "lr": 1.0e-3, "patience": 0},
}


def toy_params(schedule: dict | None = None, **train) -> dict:
    params = copy.deepcopy(load_params(profile="smoke"))
    section = params["tasks"]["toy_counting"]
    section.update(copy.deepcopy(TOY))
    section["train"].update(train)
    params["train"].update(device="cpu", num_threads=1)
    params["schedule"] = schedule or {}
    return params


def strip(metrics: dict) -> dict:
    """Metrics without what depends on the machine's speed or the schedule, nor the run's MLflow id."""
    skip = ("resources", "mlflow_run_id")
    return {
        run: {k: v for k, v in entry.items() if k not in skip and "time" not in k and "per_s" not in k}
        for run, entry in metrics.items()
    }


def test_schedule_settings_per_profile_task_and_model():
    params = toy_params(
        {
            "parallel": 1,
            "cpus_per_run": 1,
            "profiles": {"smoke": {"parallel": 3}},
            "tasks": {"toy_counting": {"cpus_per_run": 2, "linear_*": {"gpus_per_run": 0.5}}},
        }
    )
    cfg = schedule_settings(params)
    assert cfg.parallel == 3  # the active profile's entry on top
    assert run_resources(cfg, "toy_counting", "transformer") == (2.0, 0.0)
    assert run_resources(cfg, "toy_counting", "linear_transformer") == (2.0, 0.5)
    assert run_resources(cfg, "imdb", "transformer") == (1.0, 0.0)
    assert schedule_settings(params, parallel=1, address="10.0.0.1:6379").parallel == 1


def test_the_shipped_profiles_schedule_as_documented():
    assert schedule_settings(load_params(profile="cpu")).parallel == 2  # two 1-thread runs on the 2-core box
    assert schedule_settings(load_params(profile="smoke")).parallel == 1  # CI: in-process, no Ray


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"parallel": -1}, "schedule.parallel"),
        ({"cpus_per_run": 0}, "schedule.cpus_per_run"),
        ({"parallel": "two"}, "schedule.parallel"),
        ({"threads": 2}, "unknown key"),
        ({"tasks": {"toy_counting": {"cpus": 2}}}, "schedule.tasks.toy_counting"),
        ({"tasks": {"toy_counting": {"transfromer": {"cpus_per_run": 2}}}}, "did you mean transformer"),
        ({"profiles": {"smoke": {"gpus_per_run": -1}}}, "gpus_per_run"),
    ],
)
def test_bad_schedule_settings_are_one_line(schedule, message):
    with pytest.raises(SwarmlabError, match=message) as exc:
        schedule_settings(toy_params(schedule))
    assert "\n" not in str(exc.value)


def test_unequal_cpus_in_an_equal_time_comparison_are_refused_before_anything_is_written(tmp_path):
    """2 runs at 1 thread each beside 1 run at 2 threads would not be a fair net-time comparison."""
    params = toy_params(
        {"parallel": 2, "tasks": {"toy_counting": {"transformer": {"cpus_per_run": 2}}}}, max_steps=0, time_budget_s=1.0
    )
    params["train"]["num_threads"] = 0  # threads follow the CPUs
    with pytest.raises(
        SwarmlabError,
        match="unequal resources.*transformer-seed0: 2 CPU, 2 threads.*linear_transformer-seed0: 1 CPU, 1 thread",
    ):
        _scheduler(params)
    # the same through the stage's command line: one line, exit 2, no output
    path = tmp_path / "params.yaml"
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    raw["profile"] = "smoke"
    raw["defaults"]["tasks"]["toy_counting"]["train"].update(max_steps=0, time_budget_s=1.0)
    raw["schedule"] = {"parallel": 2, "tasks": {"toy_counting": {"transformer": {"cpus_per_run": 2}}}}
    raw["defaults"]["tasks"]["toy_counting"]["models"] = ["transformer", "linear_transformer"]
    path.write_text(yaml.safe_dump(raw))
    run = run_train_toy(tmp_path / "w", path)
    assert run.returncode == 2 and run.stderr.startswith("error: tasks.toy_counting compares its runs at equal net")
    assert len(run.stderr.strip().splitlines()) == 1 and run.stdout == ""
    assert not (tmp_path / "w").exists()
    # equal CPUs for every run: accepted
    params["schedule"] = {"parallel": 2, "tasks": {"toy_counting": {"cpus_per_run": 2}}}
    _scheduler(params)


def test_an_unreachable_cluster_is_one_line_before_anything_is_written(tmp_path):
    from tests.pipelines.conftest import free_port

    params = _write_params(tmp_path / "params.yaml")
    run = run_train_toy(tmp_path / "w", params, "--parallel", "2", "--address", f"127.0.0.1:{free_port()}")
    assert run.returncode == 2 and run.stderr.startswith("error: cannot reach a Ray cluster at 127.0.0.1:")
    assert len(run.stderr.strip().splitlines()) == 1 and run.stdout == "" and not (tmp_path / "w").exists()


def _scheduler(params):
    from swarmlab.drive.spec import resolve

    spec = resolve(params, "train", "toy_counting", parallel=2, tracking=False)
    return Scheduler(spec, spec.task.build())


def test_without_ray_installed_the_runs_go_one_after_another_here(tmp_path, monkeypatch, capsys):
    from pipelines.train import train

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError, as without the package
    params = toy_params({"parallel": 2})
    metrics = train(params, "toy_counting", out_root=tmp_path / "out", report_root=tmp_path / "rep", tracking=False)
    out = capsys.readouterr().out
    assert "4 run(s) one after another in this process, 1 thread each (Ray is not installed" in out
    assert list(metrics) == [
        "transformer-seed0",
        "transformer-seed1",
        "linear_transformer-seed0",
        "linear_transformer-seed1",
    ]
    assert {m["resources"]["scheduler"] for m in metrics.values()} == {"in-process"}
    assert out.count("] done ") == 4
    for run in metrics:  # every run folder holds its own record, and metrics.json is made of them
        assert json.loads((tmp_path / "out" / "toy_counting" / run / "summary.json").read_text()) == metrics[run]
    assert json.loads((tmp_path / "rep" / "train" / "toy_counting" / "metrics.json").read_text()) == metrics


def _write_params(path: Path, per_model: dict | None = None) -> Path:
    """Toy counting, 2 models x 2 seeds of 160 steps; ``per_model``: training settings of one model (a mapping under its
    name in tasks.toy_counting.train)."""
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    raw["profile"] = "t"
    section = raw["defaults"]["tasks"]["toy_counting"]
    section.update(models=["transformer", "linear_transformer"], seeds=[0, 1])
    section["train"].update(per_model or {})
    raw["profiles"] = {
        "t": {
            "tasks": {"toy_counting": {"train": {"max_steps": 160, "eval_every": 40}}},
            "train": {"device": "cpu", "num_threads": 1},
        }
    }
    raw.pop("train", None)
    raw["schedule"] = {"parallel": 1}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw))
    return path


def _mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


@pytest.mark.slow
def test_a_rerun_after_a_killed_driver_trains_only_the_unfinished_runs(tmp_path):
    params = _write_params(tmp_path / "params.yaml")
    straight = run_train_toy(tmp_path / "a", params)
    assert straight.returncode == 0, straight.stderr
    reference = json.loads((tmp_path / "a" / "reports" / "train" / "toy_counting" / "metrics.json").read_text())

    runs = tmp_path / "b" / "outputs" / "train" / "toy_counting"
    proc = run_train_toy(tmp_path / "b", params, wait=False)
    history = runs / ".transformer-seed1.run" / "history.csv"  # the second run, in progress
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if history.is_file() and len(history.read_text().splitlines()) >= 3:  # header + 2 evaluations
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    assert proc.wait(60) == -signal.SIGKILL, "the stage ended before it could be killed"
    assert (runs / "transformer-seed0" / "summary.json").is_file() and not (runs / "transformer-seed1").exists()
    finished = _mtimes(runs / "transformer-seed0")

    rerun = run_train_toy(tmp_path / "b", params)
    assert rerun.returncode == 0, rerun.stderr
    assert "keep  transformer-seed0: finished with the same settings" in rerun.stdout
    assert "start transformer-seed1  continues after evaluation" in rerun.stdout
    assert "resuming after step" in rerun.stdout  # from its checkpoint, not from scratch
    assert rerun.stdout.count("] start ") == 3
    assert _mtimes(runs / "transformer-seed0") == finished  # the finished run was not touched
    again = json.loads((tmp_path / "b" / "reports" / "train" / "toy_counting" / "metrics.json").read_text())
    assert strip(again) == strip(reference)  # and the results are those of an uninterrupted stage
    assert sorted(p.name for p in runs.iterdir()) == sorted(reference)  # nothing left behind

    # a changed setting of one model retrains that model's runs only; --restart retrains every run
    _write_params(tmp_path / "params.yaml", {"linear_*": {"lr": 2.0e-3}})
    changed = run_train_toy(tmp_path / "b", params)
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.count("keep  transformer-seed") == 2 and changed.stdout.count("start linear_transformer") == 2
    restart = run_train_toy(tmp_path / "b", params, "--restart")
    assert restart.returncode == 0, restart.stderr
    assert "keep " not in restart.stdout and restart.stdout.count("] start ") == 4


def test_a_run_is_handed_to_ray_only_when_the_cluster_has_room_for_it():
    """So that "running" in the progress lines means running: with 2 CPUs, a second 2-CPU run waits in our queue,
    not inside Ray; 1-CPU runs go two at a time; GPUs count the same way; the first run is always submitted."""
    from types import SimpleNamespace

    from swarmlab.drive.schedule.cluster import Resources
    from swarmlab.drive.schedule.scheduler import _room_for

    def job(name):
        return SimpleNamespace(run=SimpleNamespace(name=name))

    slots = {
        "big0": SimpleNamespace(resources=Resources(2.0)),
        "big1": SimpleNamespace(resources=Resources(2.0)),
        "one0": SimpleNamespace(resources=Resources(1.0)),
        "one1": SimpleNamespace(resources=Resources(1.0)),
        "gpu0": SimpleNamespace(resources=Resources(1.0, 1.0)),
        "gpu1": SimpleNamespace(resources=Resources(1.0, 1.0)),
    }
    two_cpus = SimpleNamespace(capacity=(2.0, 0.0), slots=slots)
    assert _room_for(two_cpus, {}, job("big0"))
    assert not _room_for(two_cpus, {"r": (job("big0"), 0.0)}, job("big1"))
    assert _room_for(two_cpus, {"r": (job("one0"), 0.0)}, job("one1"))
    one_gpu = SimpleNamespace(capacity=(8.0, 1.0), slots=slots)
    assert not _room_for(one_gpu, {"r": (job("gpu0"), 0.0)}, job("gpu1"))
    assert _room_for(one_gpu, {"r": (job("gpu0"), 0.0)}, job("one0"))
