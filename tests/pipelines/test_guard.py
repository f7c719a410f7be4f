"""swarmlab/drive/guard.py in process: the dry run refuses a model before any run trains, a diverged run never
replaces the previous one, and a run's seal catches a replaced checkpoint (the subprocess table of every track is
tests/pipelines/test_bad_input_tracks.py)."""

from __future__ import annotations

import copy
import hashlib

import pytest
import torch

from swarmlab.drive.spec import resolve
from swarmlab.drive.run_config import load_best
from pipelines.train import train
from swarmlab.errors import SwarmlabError
from tests.tasks.test_clustering_tasks import direct_data  # noqa: F401  (a module fixture: tiny clustering_direct data)


def files(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def tiny(params, models):
    params = copy.deepcopy(params)
    section = params["tasks"]["clustering_direct"]
    section["models"] = models
    section["train"].update(max_epochs=1, batch_size=10)
    return params


def test_a_config_error_of_the_last_model_costs_the_first_ones_nothing(direct_data, tmp_path):  # noqa: F811
    params, options, _ = direct_data
    params = tiny(params, ["swarm", "set_linear_mean", "set_transformer_sab"])
    params["tasks"]["clustering_direct"]["model_overrides"]["set_transformer_sab"] = {"head": "mean"}
    with pytest.raises(SwarmlabError, match=r"dry run of model 'set_transformer_sab'.*use head: none"):
        train(
            params,
            "clustering_direct",
            options=options,
            out_root=tmp_path / "out",
            report_root=tmp_path / "rep",
            tracking=False,
        )
    assert not (tmp_path / "out").exists() and not (tmp_path / "rep").exists()


def test_a_diverged_run_leaves_the_previous_one_and_a_replaced_checkpoint_is_refused(direct_data, tmp_path):  # noqa: F811
    params, options, _ = direct_data
    good = tiny(params, ["set_linear_mean"])
    roots = {"out_root": tmp_path / "out", "report_root": tmp_path / "rep"}
    train(good, "clustering_direct", options=options, tracking=False, **roots)
    before = files(tmp_path)
    bad = copy.deepcopy(good)
    bad["tasks"]["clustering_direct"]["train"]["lr"] = 1e8
    with pytest.raises(
        SwarmlabError,
        match=r"set_linear_mean-seed0 diverged: its best validation loss .* the previous "
        r"set_linear_mean-seed0 run stays in place",
    ):
        train(bad, "clustering_direct", options=options, tracking=False, **roots)
    assert files(tmp_path) == before  # no .run left, nothing replaced

    spec = resolve(good, "evaluate", "clustering_direct", options=options, tracking=False)
    task, (run,) = spec.task.build(), spec.runs
    best = tmp_path / "out" / "clustering_direct" / "set_linear_mean-seed0" / "best.pt"
    load_best(task, run, tmp_path / "out")
    torch.save({k: v * 2 for k, v in torch.load(best, weights_only=True).items()}, best)
    with pytest.raises(SwarmlabError, match="is not the checkpoint this run wrote"):
        load_best(task, run, tmp_path / "out")
