"""The claims profile's sweeps (issue 37, item 5): claims/dvc.yaml's `sweep@<task>` pieces, whose choice the decisive
runs (`task@<task>`) read.

The protocol, checked here on the params as written: the long track searches the learning rate and weight decay alone,
every other field of its space held at the value the claims runs train (paper 002's claims are at equal width), with
every model of a swept task given the same trials and per-trial budget. Then the pieces themselves, at the smoke
profile: a sweep piece keeps its choice in reports/claims/sweep/<task>, a task piece in a fresh work folder trains
that choice, and an interrupted search is told from a finished one.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

import models
from pipelines.claims import restore_chosen, unfinished_sweep
from swarmlab.drive.params import load_params
from swarmlab.drive.run_config import model_overrides, train_settings
from swarmlab.drive.sweep.search_space import space_entry
from swarmlab.drive.sweep.spec import resolve_sweep
from swarmlab.drive.tuning import describe
from tests.conftest import REPO_ROOT
from tests.pipelines.test_claims_script import _clone, _run

SWEPT = ("lra_text", "listops", "clustering_direct")
SEARCHED_LONG = {"lr", "weight_decay"}  # what the long track's claims sweep may vary


@pytest.fixture(scope="module")
def claims():
    return load_params(profile="claims")


def test_the_decisive_tasks_of_papers_002_and_003_are_swept_alike(claims):
    swept = [key for key, section in claims["tasks"].items() if section.get("tuning") == "sweep"]
    assert sorted(swept) == sorted(SWEPT)
    for key in SWEPT:
        spec = resolve_sweep(claims, key)
        assert [m.model for m in spec.models] == claims["tasks"][key]["models"]  # every decisive model, no other
        budgets = {(m.train["time_budget_s"], m.train["max_steps"], m.train["max_epochs"]) for m in spec.models}
        assert budgets == {(240.0, 1_000_000, 0)}  # one per-trial budget: 240 net seconds
        assert spec.settings["num_samples"] == 8 and spec.settings["time_budget_s"] == 240.0
        # ASHA stops nothing: its first rung (in evaluations) lies beyond what a trial's 240 s reach at any cadence
        assert spec.settings["grace_period"] * min(m.train["eval_every"] for m in spec.models) >= 50_000


@pytest.mark.parametrize("key", ["lra_text", "listops"])
def test_the_long_track_searches_lr_and_weight_decay_at_the_widths_its_claims_are_made_at(claims, key):
    """Every constant of the claims space (a one-value choice) is what the model trains at in the claims runs, so the
    chosen settings change the learning rate and weight decay and nothing else of the decisive experiment."""
    for model in claims["tasks"][key]["models"]:
        _, space, _ = space_entry(claims["sweep"]["spaces"], key, model)
        overrides = model_overrides(claims, key, model)
        cfg = models.create_model(model, vocab_size=100, num_classes=10, **overrides).cfg
        train = train_settings(claims, key, model)
        searched = {name for name, spec in space.items() if not (isinstance(spec, list) and len(spec) == 1)}
        assert searched == SEARCHED_LONG, (model, searched)
        for name, spec in space.items():
            if name in searched:
                continue
            held = getattr(cfg, name) if hasattr(cfg, name) else train[name]
            assert spec == [held], (model, name, spec, held)
        lo, hi = space["lr"]["loguniform"]
        assert hi / lo >= 100 and lo <= train["lr"] <= hi  # two decades, around the lr the runs were made at


def test_the_sweep_piece_runs_before_every_task_piece_and_its_choice_is_their_dependency():
    stages = yaml.safe_load((REPO_ROOT / "claims" / "dvc.yaml").read_text())["stages"]
    assert set(stages["sweep"]["foreach"]) == set(stages["task"]["foreach"])
    assert "reports/claims/sweep/${key}/chosen.json" in stages["task"]["do"]["deps"]
    assert stages["sweep"]["do"]["outs"] == [{"reports/claims/sweep/${key}": {"cache": False, "persist": True}}]
    assert "profiles.claims.sweep" in stages["sweep"]["do"]["params"]


def test_an_interrupted_search_is_told_from_a_finished_one(tmp_path):
    state = tmp_path / "outputs" / "sweep" / "sets" / "state.json"
    best = tmp_path / "reports" / "sweep" / "sets" / "best_params.json"
    assert not unfinished_sweep(tmp_path, "sets")  # nothing started
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"sweep_id": "sets-2", "models": {}}))
    assert unfinished_sweep(tmp_path, "sets")  # started, no result written
    best.parent.mkdir(parents=True)
    best.write_text(json.dumps({"sweep_id": "sets-1"}))
    assert unfinished_sweep(tmp_path, "sets")  # the results are an earlier sweep's
    best.write_text(json.dumps({"sweep_id": "sets-2"}))
    assert not unfinished_sweep(tmp_path, "sets")  # finished: a new run of the piece starts afresh
    state.write_text("{")
    with pytest.raises(Exception, match="damaged"):
        unfinished_sweep(tmp_path, "sets")


def test_a_task_piece_takes_the_kept_choice_into_its_work_folder(tmp_path):
    keep, work = tmp_path / "keep", tmp_path / "work"
    restore_chosen(work, keep, "sets")  # nothing kept: nothing put back
    assert not (work / "reports").exists()
    (keep / "sweep" / "sets").mkdir(parents=True)
    (keep / "sweep" / "sets" / "chosen.json").write_text('{"tuning": "sweep"}')
    (work / "reports" / "sweep" / "sets").mkdir(parents=True)
    (work / "reports" / "sweep" / "sets" / "chosen.json").write_text('{"tuning": "pinned"}')  # an older choice
    restore_chosen(work, keep, "sets")
    assert json.loads((work / "reports" / "sweep" / "sets" / "chosen.json").read_text()) == {"tuning": "sweep"}


@pytest.mark.slow
def test_a_swept_task_trains_its_kept_choice_in_a_fresh_work_folder(tmp_path):
    """At the smoke profile, direct clustering swept (one model, two trials): the sweep piece keeps its choice, and the
    task piece, in a work folder that never held the sweep (a fresh clone), trains that choice."""
    repo = _clone(tmp_path)
    from dvc.utils.serialize._yaml import dumps_yaml, parse_yaml_for_update  # as `dvc exp run -S` edits it

    raw = parse_yaml_for_update((repo / "params.yaml").read_text(), "params.yaml")
    smoke = raw["profiles"]["smoke"]
    smoke["tasks"]["clustering_direct"].update(tuning="sweep", models=["set_linear_mean"], seeds=[0])
    smoke["sweep"].update(num_samples=2, startup_trials=2, max_concurrent=1)
    (repo / "params.yaml").write_text(dumps_yaml(raw))

    swept = _run(repo, "sweep", "clustering_direct")
    assert swept.returncode == 0, swept.stdout[-3000:] + swept.stderr[-3000:]
    kept = json.loads((repo / "reports" / "claims" / "sweep" / "clustering_direct" / "chosen.json").read_text())
    assert kept["tuning"] == "sweep" and kept["profile"] == "smoke"
    chosen = kept["models"]["set_linear_mean"]
    assert chosen["trials"] == 2

    shutil.rmtree(repo / "outputs" / "claims" / "reports" / "sweep")  # the work folder of a fresh clone
    trained = _run(repo, "task", "clustering_direct")
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    metrics = json.loads((repo / "reports" / "claims" / "train" / "clustering_direct" / "metrics.json").read_text())
    tuning = metrics["set_linear_mean-seed0"]["tuning"]  # the run trained what the kept record says
    assert tuning == describe(kept, "set_linear_mean") and tuning.startswith(f"sweep {kept['sweep_id']}: 2 trials")


@pytest.mark.parametrize("grid", ["long_lr_text", "long_lr_listops"])
def test_the_hand_lr_grids_the_sweeps_replace_still_train_their_own_lrs(claims, grid):
    """Their points vary the lr themselves: under the task's `tuning: sweep` a chosen lr would win over every point's
    (or the points would wait for a sweep); the grids pin their task, so each point trains the lr it names."""
    from swarmlab.drive.ablations import grid_points, grid_spec, point_params
    from swarmlab.drive.spec import resolve

    spec = grid_spec(claims, grid)
    lrs = set()
    for point in grid_points(claims, grid):
        params = point_params(claims, spec, point, grid)
        assert params["tasks"][spec["task"]]["tuning"] == "pinned"
        runs = resolve(params, "train", spec["task"], tracking=False, root=REPO_ROOT).runs
        lrs |= {r.train.lr for r in runs}
    assert lrs == {3.0e-5, 1.0e-4, 3.0e-4, 1.0e-3}
