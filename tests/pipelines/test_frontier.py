"""The frontier stage (paper 003 Figure 2): points from the train stage and a sweep, each family's frontier."""

from __future__ import annotations

import copy
import csv
import json

import pytest

from swarmlab.drive.params import load_params
from pipelines.frontier import frontier
from swarmlab.drive.frontier import frontier_flags, parse_params
from swarmlab.errors import SwarmlabError


def test_frontier_keeps_points_no_smaller_model_of_the_family_beats():
    pts = [
        {"family": "a", "num_params": n, "val_loss": v}
        for n, v in ((10, 0.9), (20, 0.95), (30, 0.8), (40, 0.8), (5, 1.2))
    ]
    pts.append({"family": "b", "num_params": 15, "val_loss": 0.5})
    assert frontier_flags(pts, "val_loss", "min") == [True, False, True, False, True, True]
    assert frontier_flags(pts, "val_loss", "max") == [False, False, False, False, True, True]  # the smallest wins


def test_sweep_params_column_parses_to_values():
    assert parse_params("dim_hidden=32 lr=0.0100 layer_norm=True head=pma") == {
        "dim_hidden": 32,
        "lr": 0.01,
        "layer_norm": True,
        "head": "pma",
    }


def test_frontier_reads_the_train_stage_and_a_sweep(tmp_path):
    params = copy.deepcopy(load_params(profile="smoke"))
    train = tmp_path / "train" / "clustering_direct"
    train.mkdir(parents=True)
    (train / "metrics.json").write_text(
        json.dumps(
            {"swarm": {"num_params": 778, "val_loss": 1.0}, "set_linear_mean": {"num_params": 50, "val_loss": 1.1}}
        )
    )
    sweep = tmp_path / "sweep" / "clustering_direct"
    sweep.mkdir(parents=True)
    with open(sweep / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["rank", "model", "trial", "status", "best_val_loss", "num_params", "params"])
        w.writeheader()
        w.writerow(
            {
                "rank": 1,
                "model": "swarm",
                "trial": "t1",
                "status": "ok",
                "best_val_loss": 0.7,
                "num_params": "",
                "params": "dim_hidden=16 n_iter=3 num_layers=1",
            }
        )
        w.writerow({"rank": 2, "model": "swarm", "trial": "t2", "status": "error", "best_val_loss": "", "params": ""})
    best = frontier(params, "clustering_direct", report_root=tmp_path)
    assert list(best) == ["swarm", "set_linear_mean"]
    n = 4 * 16 * 2 + 4 * 16 + 8 * 16 * 16 + 2 * 16 * 10 + 10  # SWARM (16-3-1), rebuilt: the csv has no num_params
    assert best["swarm"] == {"code": "(16-3-1)", "num_params": n, "val_loss": 0.7, "source": "sweep t1", "points": 2}
    out = json.loads((tmp_path / "frontier" / "clustering_direct" / "frontier.json").read_text())
    assert [p["frontier"] for p in out["points"]] == [True, True, True]
    assert (
        f"| swarm | (16-3-1) | {n:,} | 0.7000 | sweep t1 | 2 |"
        in (tmp_path / "frontier" / "clustering_direct" / "frontier.md").read_text()
    )
    assert (tmp_path / "frontier" / "clustering_direct" / "frontier.png").stat().st_size > 10_000


def test_frontier_without_trained_models_is_a_one_line_error(tmp_path):
    with pytest.raises(SwarmlabError, match=r"metrics.json is missing: train the task's models first"):
        frontier(load_params(profile="smoke"), "clustering_direct", report_root=tmp_path)


@pytest.mark.parametrize(
    "stage, task, served",
    [
        ("frontier", "mnist", "only set-model tasks (clustering_direct, clustering_mog)"),
        ("frontier", "imdb", "only set-model tasks (clustering_direct, clustering_mog)"),
        ("sample", "imdb", "only generative tasks (mnist, fashion_mnist)"),
        ("sample", "clustering_mog", "only generative tasks (mnist, fashion_mnist)"),
    ],
)
def test_a_stage_some_tasks_have_refuses_the_others_naming_those_it_serves(stage, task, served, tmp_path):
    """`frontier --task mnist` was accepted; the served tasks come from each task's class (its model kind, whether it
    samples), not from a list of names."""
    import importlib

    run = getattr(importlib.import_module(f"pipelines.{stage}"), stage)
    with pytest.raises(SwarmlabError) as info:
        run(load_params(profile="smoke"), task, report_root=tmp_path)
    assert str(info.value) == (
        f"{stage}@{task}: the {stage} stage serves {served}, and task {task!r} is not one: "
        "run it with --task set to one of them"
    )
    assert not list(tmp_path.iterdir())


def test_a_new_task_of_the_served_kind_is_served_without_a_list_to_edit(tmp_path):
    from swarmlab.drive.runs import check_stage_serves

    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"]["mog_copy"] = copy.deepcopy(params["tasks"]["clustering_mog"]) | {"task": "clustering_mog"}
    check_stage_serves(params, "mog_copy", "frontier", lambda cls: cls.model_kind == "set", "set-model")
    with pytest.raises(SwarmlabError, match=r"\(clustering_direct, clustering_mog, mog_copy\), and task 'imdb'"):
        check_stage_serves(params, "imdb", "frontier", lambda cls: cls.model_kind == "set", "set-model")
