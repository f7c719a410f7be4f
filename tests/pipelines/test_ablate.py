"""Ablation grids: points from params.yaml, one isolated workspace per point, results the report reads."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import yaml

from pipelines.ablate import ablate
from swarmlab.drive.ablation_runs import point_made
from swarmlab.drive.ablations import grid_points, grid_spec, point_params, write_params_file
from swarmlab.drive.params import load_params
from swarmlab.drive.run_config import train_settings
from swarmlab.errors import SwarmlabError


def toy_params(values=(1, 2)) -> dict:
    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"]["toy_counting"]["train"].update(max_steps=40, eval_every=20, batch_size=16)
    params["tasks"]["toy_counting"]["options"].update(val_rows=64, test_rows=64)
    params["ablations"] = {
        "layers": {
            "description": "depth",
            "task": "toy_counting",
            "models": ["transformer"],
            "vary": {"tasks.toy_counting.model_overrides.num_layers": list(values)},
            "stages": ["train", "evaluate"],
            "reuse": [],
        }
    }
    return params


def test_the_repo_grids_are_valid_at_every_profile():
    for profile in ("smoke", "cpu", "claims", "paper"):
        params = load_params(profile=profile)
        assert {"t_local", "cluster_size", "enhanced_switches", "enhanced_ends", "augment", "swarm_head"} <= set(
            params["ablations"]
        )
        for grid in params["ablations"]:
            points = grid_points(params, grid)
            assert len(points) >= 2 and len({p["point"] for p in points}) == len(points)
            for point in points:
                point_params(params, params["ablations"][grid], point, grid)  # every point applies
    params = load_params(profile="cpu")
    assert [p["label"] for p in grid_points(params, "t_local")] == [f"t_local={k}" for k in range(1, 6)]
    assert [p["point"] for p in grid_points(params, "cluster_size")] == [f"cluster_size={k}" for k in (2, 4, 8, 16)]
    assert len(grid_points(params, "enhanced_switches")) == 9
    off = point_params(params, params["ablations"]["augment"], grid_points(params, "augment")[1], "augment")
    assert off["augment"]["enabled"] is False and params["augment"]["enabled"] is True


def test_a_grid_sets_shared_values_on_every_point_without_naming_them():
    params = load_params(profile="claims")
    spec = params["ablations"]["augment"]
    points = grid_points(params, "augment")
    assert [p["point"] for p in points] == ["enabled=true", "enabled=false"]  # `set` is not in the names
    for point, enabled in zip(points, (True, False)):
        p = point_params(params, spec, point, "augment")
        imdb = p["tasks"]["imdb"]
        assert p["augment"]["enabled"] is enabled and imdb["seeds"] == spec["set"]["tasks.imdb.seeds"] == [0, 1, 2, 3]
        assert (imdb["train"]["max_steps"], imdb["train"]["max_epochs"], imdb["model_overrides"]["seq_len"]) == (
            2000,
            0,
            128,
        )
    with pytest.raises(SwarmlabError, match=r"ablations.g.set: 'seed.x' does not name a params section"):
        point_params(params, {"set": {"seed.x": 1}}, points[0], "g")


def test_a_varied_value_wins_over_a_models_own_setting():
    """The claims profile sets each long model's chosen lr under its name; its lr grid must still vary the lr of
    every model (a per-model mapping would otherwise win, and every point would train at the chosen lr)."""
    params = load_params(profile="claims")
    assert isinstance(params["tasks"]["lra_text"]["train"].get("hsw_small"), dict)  # the case this guards
    for grid, task in (("long_lr_text", "lra_text"), ("long_lr_listops", "listops")):
        spec = params["ablations"][grid]
        lrs = set()
        for point in grid_points(params, grid):
            p = point_params(params, spec, point, grid)
            lr = train_settings(p, task, point["model"])["lr"]
            assert lr == point["overrides"][f"tasks.{task}.train.lr"]
            lrs.add(lr)
        assert len(lrs) == len(spec["vary"][f"tasks.{task}.train.lr"]) > 1
    # a model's other settings stay; the resolved params themselves (the final runs) keep the chosen lr
    mine = copy.deepcopy(params)
    mine["tasks"]["lra_text"]["train"]["hsw_small"] = {"lr": 2.0e-4, "warmup_steps": 7}
    p = point_params(mine, {"set": {"tasks.lra_text.train.lr": 1.0}}, {"overrides": {}, "model": None}, "g")
    assert p["tasks"]["lra_text"]["train"]["hsw_small"] == {"warmup_steps": 7}
    assert train_settings(p, "lra_text", "hsw_small")["lr"] == 1.0
    assert train_settings(mine, "lra_text", "hsw_small")["lr"] == 2.0e-4


def test_a_point_writes_a_params_file_the_stages_accept(tmp_path):
    params = toy_params()
    point = grid_points(params, "layers")[1]
    write_params_file(point_params(params, params["ablations"]["layers"], point, "layers"), tmp_path / "params.yaml")
    resolved = load_params(tmp_path / "params.yaml")
    assert resolved["tasks"]["toy_counting"]["model_overrides"]["num_layers"] == 2
    assert resolved["tasks"]["toy_counting"]["models"] == ["transformer"] and resolved["profile"] == "smoke"


def test_bad_grids_are_one_line_errors():
    params = toy_params()
    with pytest.raises(SwarmlabError, match="no grid 'nope'"):
        grid_points(params, "nope")
    bad = copy.deepcopy(params)
    bad["ablations"]["layers"]["vary"] = {"tasks.toy_counting.models.0": [1, 2]}
    with pytest.raises(SwarmlabError, match="does not name a params section"):
        ablate(bad, "layers", dry_run=True)
    bad["ablations"]["layers"]["task"] = "no_such_task"
    with pytest.raises(SwarmlabError, match="no section tasks.no_such_task"):
        grid_points(bad, "layers")


def test_a_point_runs_known_stages_only(tmp_path):
    """A grid's `stages` are generic stages or the data steps of its task (IMDB's augment grid reruns `augment`
    and `tokenize` in the point's workspace): anything else is refused before the workspace is made."""
    from swarmlab.drive.ablation_runs import run_point

    params = load_params(profile="smoke")
    spec = {**params["ablations"]["augment"], "stages": ["augment", "tokenise", "train"]}
    point = grid_points(params, "augment")[0]
    with pytest.raises(SwarmlabError, match=r"ablations.augment.stages: \['tokenise'\] .* prepare, augment, tokenize"):
        run_point(params, spec, point, "augment", root=tmp_path, tracking=False)
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_one_grid_end_to_end_feeds_the_report(tmp_path, monkeypatch):
    """A smoke-sized grid (2 points of toy_counting, seconds each), tracked in MLflow, then the report's table."""
    from mlflow.tracking import MlflowClient

    from pipelines.report import write_report

    params = toy_params()
    results = ablate(params, "layers", out_root=tmp_path / "outputs" / "ablations", report_root=tmp_path / "reports")
    assert [p["status"] for p in results["points"]] == ["ok", "ok"], results["points"]
    on_disk = json.loads((tmp_path / "reports" / "ablations" / "layers" / "results.json").read_text())
    assert on_disk["monitor"] == "accuracy" and on_disk["command"].startswith(
        "python -m pipelines.ablate --grid layers"
    )
    one, two = on_disk["points"]
    assert one["train"]["transformer-seed0"]["num_params"] < two["train"]["transformer-seed0"]["num_params"]
    assert 0.0 <= two["evaluate"]["transformer-seed0"]["test_accuracy"] <= 1.0
    assert (tmp_path / "reports" / "ablations" / "layers" / "history" / "num_layers=2.csv").is_file()
    side = tmp_path / "outputs" / "ablations" / "layers" / "num_layers=2"
    assert (
        yaml.safe_load((side / "params.yaml").read_text())["defaults"]["tasks"]["toy_counting"]["model_overrides"][
            "num_layers"
        ]
        == 2
    )

    from swarmlab.paths import tracking_uri

    client = MlflowClient(tracking_uri())  # the conftest's store (not mlflow's process-global URI, which tests move)
    run = client.get_run(two["runs"]["transformer-seed0"])
    assert run.data.tags["ablation_grid"] == "layers" and run.data.tags["ablation_point"] == "num_layers=2"
    assert run.info.run_name.startswith("transformer-seed0 [layers num_layers=2] | ")  # then the profile...

    again = ablate(
        params, "layers", resume=True, out_root=tmp_path / "outputs" / "ablations", report_root=tmp_path / "reports"
    )
    assert again["points"] == on_disk["points"]  # --resume reruns nothing

    write_report(params, reports=tmp_path / "reports", outputs=tmp_path / "outputs")
    md = (tmp_path / "reports" / "REPORT.md").read_text()
    assert "### `layers`" in md and "| num_layers=2 | ok |" in md and "report/figures/ablation_layers.png" in md


@pytest.mark.slow
def test_resume_keeps_the_finished_runs_of_an_interrupted_point(tmp_path, monkeypatch):
    """A grid killed inside a point (here: after train, before its results were written) loses no finished run on
    --resume: the point's workspace stays and train keeps the run; without --resume the point starts afresh."""
    params = toy_params()
    params["tasks"]["toy_counting"]["seeds"] = [0, 1]
    roots = dict(out_root=tmp_path / "outputs" / "ablations", report_root=tmp_path / "reports")
    monkeypatch.setattr("swarmlab.drive.ablation_runs.REPO_ROOT", tmp_path)  # as if the work folder were in the repo
    first = ablate(params, "layers", only=["num_layers=1"], tracking=False, **roots)
    assert first["points"][0]["status"] == "ok"
    assert first["points"][0]["workspace"] == "outputs/ablations/layers/num_layers=1"  # no machine's path
    side = roots["out_root"] / "layers" / "num_layers=1"
    ckpt = side / "outputs" / "train" / "toy_counting" / "transformer-seed0" / "best.pt"
    before = ckpt.stat().st_mtime_ns
    # the kill: results.json never heard of the point, and seed 1's run was cut short (no final folder)
    results_file = roots["report_root"] / "ablations" / "layers" / "results.json"
    results_file.write_text(json.dumps({"points": []}))
    shutil.rmtree(side / "outputs" / "train" / "toy_counting" / "transformer-seed1")
    again = ablate(params, "layers", only=["num_layers=1"], resume=True, tracking=False, **roots)
    assert again["points"][0]["status"] == "ok", again["points"][0]
    assert ckpt.stat().st_mtime_ns == before  # seed 0 kept, not retrained
    log = (side / "run.log").read_text()
    assert "keep  transformer-seed0" in log and "keep  transformer-seed1" not in log
    assert set(again["points"][0]["evaluate"]) == {"transformer-seed0", "transformer-seed1"}
    fresh = ablate(params, "layers", only=["num_layers=1"], tracking=False, **roots)  # no --resume: from scratch
    assert fresh["points"][0]["status"] == "ok" and ckpt.stat().st_mtime_ns != before
    assert "keep" not in (side / "run.log").read_text()
    # killed again, and resumed by other code: the interrupted point's workspace is not continued but made afresh
    results_file.write_text(json.dumps({"points": []}))
    shutil.rmtree(side / "outputs" / "train" / "toy_counting" / "transformer-seed1")
    before = ckpt.stat().st_mtime_ns
    monkeypatch.setattr("swarmlab.drive.ablation_runs.code_hash", lambda: "f" * 64)
    other = ablate(params, "layers", only=["num_layers=1"], resume=True, tracking=False, **roots)
    assert other["points"][0]["status"] == "ok" and other["points"][0]["made"]["code"] == "f" * 16
    assert ckpt.stat().st_mtime_ns != before and "keep" not in (side / "run.log").read_text()


@pytest.mark.slow
def test_a_grid_with_failed_points_exits_non_zero_naming_the_first_reason(tmp_path, monkeypatch):
    """Every point failing (here: a depth the model refuses) used to exit 0 with the reason only in each point's
    run.log, and the report showed a null ablation."""
    params = toy_params(values=(0, -1))  # a real key (a misspelled one is refused before any point runs, below)
    roots = dict(out_root=tmp_path / "outputs" / "ablations", report_root=tmp_path / "reports")
    monkeypatch.setattr("swarmlab.drive.ablation_runs.REPO_ROOT", tmp_path)
    with pytest.raises(SwarmlabError, match=r"grid layers: 2 of 2 point\(s\) failed, first num_layers=0: ") as info:
        ablate(params, "layers", tracking=False, **roots)
    assert "\n" not in str(info.value)
    results = json.loads((roots["report_root"] / "ablations" / "layers" / "results.json").read_text())
    assert [p["status"] for p in results["points"]] == ["failed", "failed"]


def test_an_interrupted_grid_exits_2_and_marks_the_point_it_cut(tmp_path, monkeypatch):
    """Ctrl-C during a point (KeyboardInterrupt in the driver, as the terminal delivers it to the process group): one
    line, and results.json says which point was cut and which never ran, so the grid is not read as a result."""
    params = toy_params(values=(1, 2, 3))
    roots = dict(out_root=tmp_path / "outputs" / "ablations", report_root=tmp_path / "reports")
    calls = []

    def run_point(params, spec, point, grid, **kw):
        calls.append(point["point"])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return {**point, "status": "ok", "wall_s": 0.0, "workspace": str(tmp_path)}

    monkeypatch.setattr("pipelines.ablate.run_point", run_point)
    with pytest.raises(SwarmlabError, match=r"grid layers was interrupted at point num_layers=2: .*--resume") as info:
        ablate(params, "layers", tracking=False, **roots)
    assert "\n" not in str(info.value)
    results = json.loads((roots["report_root"] / "ablations" / "layers" / "results.json").read_text())
    assert [p["status"] for p in results["points"]] == ["ok", "interrupted", "not run"]


def _fake_run_point(calls: list, tmp_path):
    def run_point(params, spec, point, grid, *, made, **kw):
        calls.append(point["point"])
        return {**point, "status": "ok", "wall_s": 0.0, "workspace": str(tmp_path), "made": made}

    return run_point


def test_resume_keeps_only_the_points_this_checkout_on_this_machine_makes_the_same(tmp_path, monkeypatch, caplog):
    """--resume skips a finished point only when its recorded code, settings and precision are this run's: a stale
    grid would otherwise run nothing and DVC would record old numbers as made by new code (the claims grids once
    needed scripts/grid_resume.py for this), and a grid resumed on another CPU class would mix bf16 and fp32 points."""
    params = toy_params(values=(1, 2))
    roots = dict(out_root=tmp_path / "outputs" / "ablations", report_root=tmp_path / "reports")
    calls: list[str] = []
    monkeypatch.setattr("pipelines.ablate.run_point", _fake_run_point(calls, tmp_path))
    first = ablate(params, "layers", tracking=False, **roots)
    made = first["points"][0]["made"]
    assert set(made) == {"code", "settings", "precision"} and made["precision"] == {"transformer": "fp32"}
    assert first["points"][0]["made"]["settings"] != first["points"][1]["made"]["settings"]
    ablate(params, "layers", resume=True, tracking=False, **roots)
    assert calls == ["num_layers=1", "num_layers=2"]  # the same: nothing ran again

    monkeypatch.setattr("swarmlab.drive.ablation_runs.code_hash", lambda: "f" * 64)
    with caplog.at_level("INFO"):
        ablate(params, "layers", resume=True, tracking=False, **roots)
    assert calls[2:] == ["num_layers=1", "num_layers=2"]
    assert f"[layers/num_layers=1] --resume: made otherwise (code {made['code']} -> ffffffffffffffff)" in caplog.text

    params["tasks"]["toy_counting"]["train"]["lr"] = 0.123  # a setting every point reads
    monkeypatch.setattr("swarmlab.drive.ablation_runs.resolve_amp", lambda amp, device: True)  # a bf16 machine
    caplog.clear()
    with caplog.at_level("INFO"):
        ablate(params, "layers", resume=True, only=["num_layers=2"], tracking=False, **roots)
    assert calls[4:] == ["num_layers=2"]
    assert "settings " in caplog.text and "precision {'transformer': 'fp32'} -> {'transformer': 'bf16 autocast'}" in (
        caplog.text
    )

    results_file = roots["report_root"] / "ablations" / "layers" / "results.json"
    results = json.loads(results_file.read_text())
    del results["points"][1]["made"]  # a point recorded before points recorded what made them
    results_file.write_text(json.dumps(results))
    caplog.clear()
    with caplog.at_level("INFO"):
        ablate(params, "layers", resume=True, tracking=False, **roots)
    assert calls[5:] == ["num_layers=1", "num_layers=2"]  # num_layers=1: still of the old settings
    assert "[layers/num_layers=2] --resume: made otherwise (it records nothing of the code" in caplog.text


def test_a_points_precision_is_what_its_runs_resolve_on_this_machine():
    """The claims grids train at `amp: auto`: bf16 autocast exactly where this CPU computes bf16 natively."""
    import torch

    from swarmlab.engine.device import native_bf16

    params = load_params(profile="claims")
    spec = grid_spec(params, "augment")
    here = "bf16 autocast" if native_bf16(torch.device("cpu")) else "fp32"
    for point in grid_points(params, "augment"):
        assert point_made(params, spec, point, "augment")["precision"] == {"swarmformer_small": here}


def test_ablation_points_rename_their_runs_uniquely_and_once(tmp_path, monkeypatch):
    """The same point run twice (a rerun of the grid) gives two distinct MLflow names; tagging again (--resume)
    keeps the name it has."""
    from mlflow.tracking import MlflowClient

    from swarmlab.drive.ablation_runs import tag_runs
    from swarmlab.tracking import MlflowTracker

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    ids = [MlflowTracker("toy", "m-seed0 | smoke", uri=uri).run_id for _ in range(2)]
    client = MlflowClient(uri)
    point = {"label": "num_layers=2"}
    for run_id in ids:
        tag_runs({"m-seed0": run_id}, "layers", point)
    tag_runs({"m-seed0": ids[0]}, "layers", point)
    names = [client.get_run(i).info.run_name for i in ids]
    assert names == ["m-seed0 [layers num_layers=2] | smoke", "m-seed0 [layers num_layers=2] | smoke #2"], names
    assert client.get_run(ids[1]).data.tags["ablation_point"] == "num_layers=2"


MISSPELT = [  # (grid, the real key, its misspelling, the fragment of the reason)
    ("t_local", "tasks.imdb.model_overrides.t_local", "tasks.imdb.model_overrides.t_locl", "model 'swarmformer_small'"),
    (
        "swarm_head",
        "tasks.clustering_mog.model_overrides.swarm.head",
        "tasks.clustering_mog.model_overrides.swarm.haed",
        "model 'swarm' has no config field 'haed'",
    ),
    (
        "swarm_head",
        "tasks.clustering_mog.model_overrides.swarm.head",
        "tasks.clustering_mog.model_overrides.swarn.head",
        "'swarn' is none of the models the grid trains",
    ),
    ("long_lr_text", "tasks.lra_text.train.lr", "tasks.lra_text.train.lrr", "no training setting 'lrr'"),
    ("augment", "augment.enabled", "augment.enabld", "params.yaml has no 'augment.enabld'"),
    ("augment", "augment.enabled", "agument.enabled", "params.yaml has no 'agument'"),
]


@pytest.mark.parametrize("grid, real, misspelt, reason", MISSPELT, ids=[m[2] for m in MISSPELT])
def test_a_misspelt_varied_key_is_refused_before_any_point_runs(grid, real, misspelt, reason, tmp_path):
    """A misspelt key (`swarm.haed`, `t_locl`) used to be written into every point's params and ignored: every point
    trained the same model, and the report showed a null ablation as a result."""
    params = copy.deepcopy(load_params(profile="smoke"))
    vary = params["ablations"][grid]["vary"]
    vary[misspelt] = vary.pop(real)
    roots = dict(out_root=tmp_path / "outputs", report_root=tmp_path / "reports")
    with pytest.raises(SwarmlabError) as info:
        ablate(params, grid, tracking=False, **roots)
    msg = str(info.value)
    assert msg.startswith(f"ablations.{grid}.vary: {misspelt!r} names no setting") and "\n" not in msg
    assert reason in msg and msg.endswith(f"nearest real key: {real}")
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_misspelt_set_key_is_refused_too(tmp_path):
    params = toy_params()
    params["ablations"]["layers"]["set"] = {"tasks.toy_counting.train.max_stesp": 10}
    with pytest.raises(
        SwarmlabError, match=r"ablations.layers.set: .*nearest real key: tasks.toy_counting.train.max_steps"
    ):
        ablate(params, "layers", dry_run=True)


def test_a_grid_whose_points_resolve_the_same_is_refused(tmp_path):
    params = toy_params(values=(2, 2.0))  # two labels, one setting
    roots = dict(out_root=tmp_path / "outputs", report_root=tmp_path / "reports")
    with pytest.raises(SwarmlabError, match=r"ablations.layers: its 2 points resolve to the same params"):
        ablate(params, "layers", tracking=False, **roots)
    assert not list(tmp_path.iterdir())


def test_every_repo_grid_names_real_settings_and_distinct_points():
    from swarmlab.drive.ablations import check_grid_keys, check_points_differ

    for profile in ("smoke", "cpu", "claims", "paper"):
        params = load_params(profile=profile)
        for grid, spec in params["ablations"].items():
            check_grid_keys(params, spec, grid)
            check_points_differ(params, spec, grid, grid_points(params, grid))


@pytest.mark.slow
def test_ablate_cli_refuses_a_misspelt_key_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    from swarmlab.paths import REPO_ROOT

    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    vary = raw["defaults"]["ablations"]["t_local"]["vary"]
    vary["tasks.imdb.model_overrides.t_locl"] = vary.pop("tasks.imdb.model_overrides.t_local")
    raw["paths"]["datasets"] = str((REPO_ROOT / raw["paths"]["datasets"]).resolve())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.ablate", "--params", str(tmp_path / "params.yaml"), "--grid", "t_local"],
        cwd=REPO_ROOT,
        env={**os.environ, "SWARMLAB_WORKDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ablations.t_local.vary: 'tasks.imdb.model_overrides.t_locl' names no setting")
    assert lines[0].endswith("nearest real key: tasks.imdb.model_overrides.t_local")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]
