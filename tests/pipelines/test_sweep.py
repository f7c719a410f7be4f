"""Sweeps end to end on a local Ray instance: records, retries of a killed trial, resume of a killed driver."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from ray.tune import Callback

from swarmlab.errors import SwarmlabError
from swarmlab.paths import REPO_ROOT
from pipelines.sweep import sweep
from swarmlab.drive.sweep.tune import _persisted_status, _results, resume_problem

from tests.pipelines.conftest import short_tmpdir, tiny_params, write_params

pytestmark = pytest.mark.slow
LABEL = "[imdb/swarmformer_small]"


def mlflow_runs(uri: str, experiment: str = "imdb-sweep"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return client, exp, parents, children


def test_smoke_sweep_records_every_trial_and_the_best(ray_local, tiny_data, tmp_path, monkeypatch, capfd):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = tiny_params(num_samples=3, max_concurrent=2, max_epochs=2, grace_period=2)
    params["tasks"]["imdb"]["tuning"] = "sweep"  # the final runs train what it chooses (swarmlab/drive/tuning.py)
    params["tasks"]["imdb"]["train"]["max_epochs"] = 3  # their budget; a trial's is sweep.max_epochs, 2
    # tiny data leaves every trial near chance: a floor of 0 makes "learned" certain here (test_tuning.py covers both)
    monkeypatch.setattr(
        "tasks.text_classification.TextClassificationTask.chance", lambda self, split="val": (0.0, 10**6)
    )
    t0 = time.perf_counter()
    best = sweep(
        params,
        options={"data_dir": str(tiny_data)},
        out_root=tmp_path / "out",
        report_root=tmp_path / "rep" / "reports" / "sweep",
        lines=True,
    )
    wall = time.perf_counter() - t0
    out = capfd.readouterr().out

    entry = best["models"]["swarmformer_small"]
    assert best["best_model"] == "swarmformer_small" and best["metric"] == "best_val_accuracy"
    assert entry["trials"] == 3 and entry["trials_failed"] == 0
    assert entry["params"]["seq_len"] % entry["params"]["cluster_size"] == 0
    assert set(entry["train"]) == {"batch_size", "lr"} and "d_model" in entry["model_overrides"]
    assert Path(entry["checkpoint"]).is_file() and Path(entry["checkpoint"]).is_absolute()
    rep = tmp_path / "rep" / "reports" / "sweep" / "imdb"
    rows = list(csv.DictReader(open(rep / "summary.csv")))
    assert [int(r["rank"]) for r in rows] == [1, 2, 3] and {r["status"] for r in rows} == {"ok"}
    scores = [float(r["best_val_accuracy"]) for r in rows]
    assert scores == sorted(scores, reverse=True) and scores[0] == entry["best_val_accuracy"]
    assert json.loads((rep / "best_params.json").read_text()) == best

    # what the sweep decides reaches the final runs: chosen.json, read by every stage that resolves the task
    from swarmlab.drive.run_config import train_settings
    from swarmlab.drive.spec import resolve

    chosen = json.loads((rep / "chosen.json").read_text())
    assert chosen["tuning"] == "sweep" and chosen["sweep_id"] and chosen["budget"] == {"max_epochs": 2}
    picked = chosen["models"]["swarmformer_small"]
    assert picked["learned"] and picked["train"] == entry["train"] and picked["trials"] == 3
    assert picked["model_overrides"] == {k: entry["params"][k] for k in picked["model_overrides"]}
    (run,) = resolve(params, "train", "imdb", options={"data_dir": str(tiny_data)}, root=tmp_path / "rep").runs
    assert (
        run.train.lr == pytest.approx(entry["params"]["lr"]) and run.train.batch_size == entry["params"]["batch_size"]
    )
    pinned = train_settings(params, "imdb", "swarmformer_small")  # the task's own budget, not the trials'
    assert (run.train.max_epochs, run.train.max_steps) == (pinned["max_epochs"], pinned["max_steps"]) == (3, 0)
    assert {k: run.overrides[k] for k in picked["model_overrides"]} == picked["model_overrides"]
    assert run.tuning.startswith(f"sweep {chosen['sweep_id']}: 3 trials of 2 epochs, chosen on validation: ")

    # one concise line per trial event, none of Ray's tables
    assert sum(f"{LABEL} " in ln and " eval " in ln for ln in out.splitlines()) >= 3
    assert "│" not in out and "Trial status" not in out
    assert "best: swarmformer_small best_val_accuracy" in out

    client, exp, parents, children = mlflow_runs(uri)
    assert exp.artifact_location.startswith((tmp_path / "mlartifacts").as_uri())  # not under Ray's session folder
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    sweep_id = parent.data.tags["sweep_id"]
    assert parent.info.run_name == f"sweep-swarmformer_small | smoke | sweep {sweep_id}", parent.info.run_name
    assert parent.data.metrics["best_val_accuracy"] == entry["best_val_accuracy"]
    assert float(parent.data.params["lr"]) == pytest.approx(entry["params"]["lr"])
    assert parent.data.tags["best_trial_id"] == entry["trial_id"]
    for run in children:
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id and run.info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")]  # optimizer steps
        assert len(steps) == int(run.data.metrics["evaluations"]) and steps == sorted(set(steps)) and steps[0] > 0
        assert {"lr", "d_model", "model.seq_len", "train.lr"} <= set(run.data.params)
        assert "best_val_accuracy" in run.data.metrics
    for r in rows:  # each trial's row says how far it trained: its last reported step, the step its run ended at
        assert int(r["steps"]) == int(client.get_run(r["mlflow_run_id"]).data.metrics["steps"]) > 0
    print(f"\n3-trial tiny sweep: {wall:.1f} s")


class KillWorkerOnce(Callback):
    """Kills the trial's worker process (SIGKILL) once Tune has registered its first checkpoint (evaluation 1)."""

    def __init__(self):
        self.seen: list[tuple[int, int]] = []  # (pid, evaluation) of every result
        self.failures = None
        self.killed = False

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen.append((result["pid"], result["evaluation"]))

    def on_trial_save(self, iteration, trials, trial, **info):
        if not self.killed:  # the worker is training epoch 2 by now
            self.killed = True
            os.kill(self.seen[-1][0], signal.SIGKILL)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.failures = trial.num_failures


def test_killed_trial_worker_is_retried_from_its_last_checkpoint(ray_local, tiny_data, tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = tiny_params(num_samples=1, max_concurrent=1, max_epochs=3, grace_period=3, max_failures=2)
    params["sweep"]["spaces"]["imdb"]["swarmformer*"].update(
        d_model=[32], seq_len=[64], cluster_size=[8], batch_size=[8, 16]
    )
    killer = KillWorkerOnce()
    best = sweep(
        params,
        options={"data_dir": str(tiny_data)},
        out_root=tmp_path / "out",
        report_root=tmp_path / "rep",
        callbacks=[killer],
    )

    assert killer.failures == 1
    (pid0, epoch0), *after = killer.seen
    assert epoch0 == 1 and after and all(pid != pid0 for pid, _ in after)  # a new worker process
    assert [e for _, e in after] == [2, 3]  # continued after epoch 1, not from scratch
    entry = best["models"]["swarmformer_small"]
    assert entry["trials_failed"] == 0
    ckpt = Path(entry["checkpoint"]).parent
    history = list(csv.DictReader(open(ckpt / "history.csv")))
    assert [int(r["epoch"]) for r in history] == [1, 2, 3]

    client, _, parents, children = mlflow_runs(uri)
    assert len(children) == 1, "the retry must continue the trial's run, not open a second one"
    steps = sorted({m.step for m in client.get_metric_history(children[0].info.run_id, "val_accuracy")})
    assert steps == [int(r["step"]) for r in history] and children[0].info.status == "FINISHED"

    # the interrupted trial ends where an uninterrupted run of its configuration ends
    from swarmlab.engine import TrainConfig, fit
    from swarmlab.drive.run_config import build_model
    from swarmlab.seeds import set_seeds
    from swarmlab.drive.sweep.trial import load_split as _load
    from swarmlab.drive.sweep.setup import trial_train_config
    from tasks import get_task

    task = get_task("imdb", {"data_dir": str(tiny_data)})
    cfg = TrainConfig(**{**trial_train_config(params, "imdb"), **entry["train"], "num_threads": 1})
    set_seeds(cfg.seed)
    model = build_model("swarmformer_small", task, entry["model_overrides"])
    data = [_load(task, split, model.cfg) for split in ("train", "val")]
    import torch

    threads = torch.get_num_threads()
    try:
        straight = fit(model, task, *data, cfg, tmp_path / "straight")
    finally:
        torch.set_num_threads(threads)
    for got, want in zip(history, straight.history, strict=True):
        for key in ("train_loss", "val_loss", "val_accuracy"):
            assert float(got[key]) == pytest.approx(want[key], rel=1e-5, abs=1e-7), (got["epoch"], key)


def test_per_trial_wall_clock_limit_stops_trials(ray_local, tiny_data, tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = tiny_params(num_samples=1, max_concurrent=1, max_epochs=4, grace_period=4, trial_timeout_s=1.0e-3)
    best = sweep(params, options={"data_dir": str(tiny_data)}, out_root=tmp_path / "out", report_root=tmp_path / "rep")
    assert best["models"]["swarmformer_small"]["best_epoch"] == 1
    client, _, _, children = mlflow_runs(uri)
    assert len(children) == 1 and children[0].data.tags["stopped"] == "trial_timeout"
    assert children[0].data.metrics["evaluations"] == 1 and children[0].info.status == "FINISHED"


def test_trial_asking_for_more_cpus_than_a_node_has_is_refused(ray_local, tiny_data, tmp_path):
    params = tiny_params(cpus_per_trial=3)  # the local instance has 2
    with pytest.raises(SwarmlabError, match="would wait forever"):
        sweep(
            params,
            options={"data_dir": str(tiny_data)},
            out_root=tmp_path / "out",
            report_root=tmp_path / "rep",
            tracking=False,
        )


def _trial_dirs(exp_dir: Path) -> dict[str, Path]:
    return {p.name.removeprefix("trial_"): p for p in exp_dir.glob("trial_*")}


def _reap(temp_dir: str) -> None:
    """Kill what is left of a SIGKILLed driver's Ray processes: only those using this test's temp folder."""
    out = subprocess.run(["pgrep", "-f", temp_dir], capture_output=True, text=True).stdout.split()
    for pid in map(int, out):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _written_params(trial_dir: Path) -> dict | None:
    """A trial's config, or None when the kill came between creating its folder and writing params.json."""
    try:
        return json.loads((trial_dir / "params.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _kill_when_persisted(driver, exp_dir: Path, finished: int, timeout_s: float = 60) -> None:
    """SIGKILL the driver's process group once ``exp_dir`` holds a state that resumes with ``finished`` trials done.

    Tune copies its state into ``exp_dir`` in the background, file by file and in place, so a kill at an arbitrary
    moment can leave the trials' statuses of one snapshot beside the searcher's file of an older one, or a searcher
    file missing or cut. Seen here: a cut file does not load, and with search_gen_state missing the resumed sweep
    ends early (2 of 8 trials); the sweep refuses to resume from such a state
    (``test_resume_refuses_a_state_cut_by_the_kill``). The group is stopped before each look, so nothing writes
    between the look and the kill."""
    deadline = time.monotonic() + timeout_s
    while True:
        os.killpg(driver.pid, signal.SIGSTOP)
        done = sum(s == "TERMINATED" for s in _persisted_status(exp_dir).values())
        if (done >= finished and resume_problem(exp_dir) is None) or time.monotonic() > deadline:
            break
        os.killpg(driver.pid, signal.SIGCONT)
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)


@pytest.mark.timeout(600)
def test_killed_driver_resumes_without_rerunning_finished_trials(tiny_data, tmp_path):
    params_file = write_params(tmp_path, num_samples=8, max_concurrent=1, max_epochs=2, grace_period=2)
    temp_dir = short_tmpdir("rk")
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "disabled",
        "RAY_TMPDIR": temp_dir,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlruns.db'}",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("RAY_ADDRESS", None)
    cmd = [
        sys.executable,
        "-m",
        "pipelines.sweep",
        "--params",
        str(params_file),
        "--profile",
        "smoke",
        "--task",
        "imdb",
        "--data-dir",
        str(tiny_data),
        "--out-dir",
        str(tmp_path / "out"),
        "--report-dir",
        str(tmp_path / "rep"),
    ]
    exp_dir = tmp_path / "out" / "imdb" / "ray" / "swarmformer_small"
    driver = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    first, done = [], 0
    try:
        for line in driver.stdout:  # wait until two trials have finished ...
            first.append(line)
            done += line.startswith(LABEL) and " done " in line
            if done == 2:
                break
        assert done == 2, "".join(first[-30:])
        _kill_when_persisted(driver, exp_dir, finished=2)  # ... and Tune has persisted that: kill the driver, its Ray
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        _reap(temp_dir)
    status_at_kill = _persisted_status(exp_dir)
    finished = [t for t, s in status_at_kill.items() if s == "TERMINATED"]
    assert len(finished) >= 2
    results_before = {t: (p / "result.json").read_text() for t, p in _trial_dirs(exp_dir).items() if t in finished}
    configs_before = {t: c for t, p in _trial_dirs(exp_dir).items() if (c := _written_params(p)) is not None}
    killed_state = ", ".join(f"{p.name} ({p.stat().st_size} B)" for p in sorted(exp_dir.iterdir()) if p.is_file())
    killed_state += f"; trials {status_at_kill}"  # what a failed resume started from
    assert not (tmp_path / "rep" / "imdb" / "best_params.json").exists()

    try:
        resumed = subprocess.run(
            [*cmd, "--resume"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=400
        )
    finally:
        _reap(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, f"state at the kill: {killed_state}\n" + out[-3000:]
    assert f"{LABEL} resuming" in out
    for trial in finished:  # finished trials were neither restarted nor reported again
        assert not [ln for ln in out.splitlines() if ln.startswith(f"{LABEL} {trial}")]
        assert (_trial_dirs(exp_dir)[trial] / "result.json").read_text() == results_before[trial]
    final = _persisted_status(exp_dir)  # a trial created but not yet recorded at the kill is replaced, not counted
    assert len(final) == 8 and set(final.values()) == {"TERMINATED"}
    trials = {t: p for t, p in _trial_dirs(exp_dir).items() if t in final}
    rows = list(csv.DictReader(open(tmp_path / "rep" / "imdb" / "summary.csv")))
    assert len(rows) == 8 and {r["status"] for r in rows} == {"ok"}
    # the searcher kept its state: a fresh TPE sampler with the same seed would propose trial 1's lr again
    new = [t for t in trials if t not in configs_before]
    assert new, "every trial had started before the kill: nothing tests the searcher's state"
    old_lrs = {c["lr"] for c in configs_before.values()}
    for t in new:
        assert json.loads((trials[t] / "params.json").read_text())["lr"] not in old_lrs

    client, _, parents, children = mlflow_runs(env["MLFLOW_TRACKING_URI"])
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"  # the resumed sweep kept its parent run
    finished_runs = [r for r in children if r.info.status == "FINISHED"]
    assert len(finished_runs) == 8  # and the run of a trial Tune had not recorded at the kill, if any, is closed:
    assert {r.info.status for r in children if r not in finished_runs} <= {"KILLED"}
    for run in finished_runs:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert steps == sorted(set(steps)), f"an evaluation was logged twice: {steps}"


def _tune_state(exp_dir: Path, status: dict[str, str], known: set[str], done: set[str]) -> None:
    """The three files Tune restores a searcher from, as Tune 2.x writes them (names, formats, the attributes
    OptunaSearch saves), for a search whose trials have ``status``, of which the searcher knows ``known``, ``done``
    as finished."""
    import pickle

    from ray import cloudpickle

    exp_dir.mkdir(parents=True)
    session = "2026-01-01_00-00-00"
    trials = [[json.dumps({"trial_id": t, "status": s}), "{}"] for t, s in status.items()]
    (exp_dir / f"experiment_state-{session}.json").write_text(json.dumps({"trial_data": trials}))
    (exp_dir / f"search_gen_state-{session}.json").write_bytes(cloudpickle.dumps({"counter": len(status)}))
    searcher = {"_space": {"lr": "a distribution"}, "_ot_trials": dict.fromkeys(known), "_completed_trials": done}
    (exp_dir / f"searcher-state-{session}.pkl").write_bytes(pickle.dumps(searcher))


class _Parent:
    run_id = "parent"

    def __init__(self):
        self.status, self.params = None, None

    def finish(self, status="FINISHED"):
        self.status = status

    def log_params(self, params):
        self.params = params

    def log_metrics(self, metrics):
        pass

    def set_tags(self, tags):
        pass


def _grid(*results, statuses):
    """A ResultGrid's two faces that ``_results`` reads: its Results, and Tune's trials with their statuses."""
    ids = [Path(r.path).name.removeprefix("trial_") for r in results]
    trials = [SimpleNamespace(trial_id=i, status=s) for i, s in zip(ids, statuses)]
    analysis = SimpleNamespace(trials=trials)
    return type("Grid", (), {"__iter__": lambda self: iter(results), "_experiment_analysis": analysis})()


def test_a_trial_that_died_before_its_first_report_is_a_row_not_the_sweeps_loss(tmp_path):
    """A full CI run on 1c97a65: a node killed under a retried trial left a Result with no config (no result.json).
    The sweep's results must keep the finished trials and show the dead one as an error row, without params."""
    space = SimpleNamespace(
        dims=[SimpleNamespace(name="lr")], decode=lambda c: {"lr": c["lr"]}, split=lambda p: ({"lr": p["lr"]}, {})
    )
    task = SimpleNamespace(monitor="accuracy", mode="max")
    ok = SimpleNamespace(
        path="/x/trial_ok", config={"lr": 1e-3}, metrics={"best_val_accuracy": 0.7}, checkpoint=None, error=None
    )
    dead = SimpleNamespace(
        path="/x/trial_dead", config=None, metrics=None, checkpoint=None, error=RuntimeError("node died")
    )
    parent = _Parent()
    out = _results("m", space, task, _grid(ok, dead, statuses=["TERMINATED", "ERROR"]), parent, tmp_path, "", False)
    rows = {r["trial"]: r for r in out["rows"]}
    assert rows["dead"]["status"] == "error" and rows["dead"]["params"] == {} and rows["dead"]["error"] == "node died"
    assert out["best"]["trial"] == "ok" and out["train"] == {"lr": 1e-3} and parent.status == "FINISHED"


def test_past_warmup_fails_a_sweep_whose_trials_ended_within_warmup(tmp_path):
    """sweep.past_warmup (amendment A5): an lr judged within warmup never reached the value its trial names, so no
    model's choice is carried when some model's finished trials ended there; a searched warmup_steps counts as set."""
    from pipelines.sweep import check_past_warmup, within_warmup

    warmup = {"hsw": {"warmup_steps": 100}, "longformer": {"warmup_steps": 100}, "set": {}}
    spec = SimpleNamespace(model=lambda name: SimpleNamespace(train=warmup[name]))

    def rows(*trials):
        return {"rows": [{"trial": t, "status": st, "steps": n, "params": p} for t, st, n, p in trials]}

    results = {
        "hsw": rows(("h1", "ok", 152, {}), ("h2", "ok", 719, {})),
        "longformer": rows(("l1", "ok", 98, {}), ("l2", "error", None, {}), ("l3", "ok", 140, {"warmup_steps": 200})),
        "set": rows(("s1", "ok", 5, {})),  # no warmup: any step is past it
    }
    assert within_warmup(spec, results) == {
        "longformer": "2 of 3 trials ended within warmup (l1 at step 98 of 100, l3 at step 140 of 200)"
    }
    with pytest.raises(SwarmlabError, match=r"^sweep.past_warmup: longformer: 2 of 3 trials .*chosen.json not written"):
        check_past_warmup(spec, results, tmp_path)
    results["longformer"] = rows(("l1", "ok", 101, {}))
    check_past_warmup(spec, results, tmp_path)  # every finished trial past its warmup: nothing to refuse


def test_resume_problem_names_what_the_kill_cut(tmp_path):
    status = {"a": "TERMINATED", "b": "ERROR", "c": "RUNNING"}
    _tune_state(tmp_path / "ok", status, known={"a", "b", "c", "d"}, done={"a", "b", "d"})
    assert resume_problem(tmp_path / "ok") is None  # a searcher newer than the trials' statuses is fine
    assert resume_problem(tmp_path / "none") is None  # no state: the model's search starts afresh
    _tune_state(tmp_path / "old", status, known={"a", "b"}, done={"a"})
    assert "does not know trial(s) c and not as finished b" in resume_problem(tmp_path / "old")
    _tune_state(tmp_path / "gen", status, known=set(status), done={"a", "b"})
    next((tmp_path / "gen").glob("search_gen_state-*")).unlink()
    assert "search_gen_state-*) is missing" in resume_problem(tmp_path / "gen")
    _tune_state(tmp_path / "cut", status, known=set(status), done={"a", "b"})
    base = next((tmp_path / "cut").glob("searcher-state-*"))
    base.write_bytes(base.read_bytes()[:20])
    assert "does not load" in resume_problem(tmp_path / "cut")
    _tune_state(tmp_path / "json", status, known=set(status), done={"a", "b"})
    state = next((tmp_path / "json").glob("experiment_state-*"))
    state.write_text(state.read_text()[:30])
    assert "does not load (JSONDecodeError)" in resume_problem(tmp_path / "json")


def test_resume_refuses_a_state_cut_by_the_kill(tiny_data, tmp_path, monkeypatch):
    """What Ray would do with it: no search space (it stops at its first proposal), or repeated proposals."""
    out = tmp_path / "out" / "imdb"
    out.mkdir(parents=True)
    (out / "state.json").write_text(json.dumps({"sweep_id": "s", "models": {}}))
    _tune_state(out / "ray" / "swarmformer_small", {"a": "TERMINATED"}, known={"a"}, done=set())
    monkeypatch.setattr("swarmlab.drive.sweep.tune.connect_ray", lambda *a, **k: pytest.fail("Ray started"))
    params = tiny_params(num_samples=2, max_concurrent=1, max_epochs=2, grace_period=2)
    with pytest.raises(SwarmlabError, match="search of swarmformer_small cannot continue: .* not as finished a"):
        sweep(params, options={"data_dir": str(tiny_data)}, out_root=tmp_path / "out", resume=True, tracking=False)


@pytest.mark.timeout(180)
def test_interrupted_sweep_exits_2_marks_cut_trials_and_keeps_best_params(tiny_data, tmp_path):
    """Ctrl-C: Tune swallows SIGINT and returns as if done; the sweep must not report its cut trials as finished."""
    params_file = write_params(tmp_path, num_samples=2, max_concurrent=2, max_epochs=200, grace_period=200)
    temp_dir = short_tmpdir("ri")
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "disabled",
        "RAY_TMPDIR": temp_dir,
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("RAY_ADDRESS", None)
    rep = tmp_path / "rep" / "imdb"
    rep.mkdir(parents=True)
    previous = '{"from": "the previous, complete sweep"}\n'
    (rep / "best_params.json").write_text(previous)
    cmd = [sys.executable, "-m", "pipelines.sweep", "--params", str(params_file), "--profile", "smoke"]
    cmd += ["--task", "imdb", "--data-dir", str(tiny_data), "--no-tracking"]
    cmd += ["--out-dir", str(tmp_path / "out"), "--report-dir", str(tmp_path / "rep")]
    driver = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines = []
    try:
        for line in driver.stdout:  # wait until a trial reports (evaluation 1 of 200) ...
            lines.append(line)
            if line.startswith(LABEL) and " eval " in line:
                break
        os.killpg(driver.pid, signal.SIGINT)  # ... then Ctrl-C, which the terminal sends to the whole group
        lines += driver.stdout.readlines()
        driver.wait(120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        _reap(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
    out = "".join(lines)
    assert driver.returncode == 2, out[-3000:]
    errors = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "interrupted" in errors[0] and "--resume" in errors[0], out[-3000:]
    assert (rep / "best_params.json").read_text() == previous
    rows = list(csv.DictReader(open(rep / "summary.csv")))
    assert rows and "interrupted" in {r["status"] for r in rows}, rows
    assert all(r["status"] != "ok" or int(r["evaluations"]) == 200 for r in rows), rows  # no cut trial reads `ok`
    assert "Interrupted" in (rep / "summary.md").read_text()
