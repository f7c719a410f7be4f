"""The set track's tasks on the contract (tasks/clustering.py): data stage, balanced batches, the loss and the
metrics against direct computations, the reports, the MoG stream and oracle, and the stages end to end."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from swarmlab.drive.params import load_params
from swarmlab.drive.runs import make_task
from swarmlab.errors import SwarmlabError
from swarmlab.testing.reference_metrics import adjusted_rand_index
from tasks.clustering import MogStream, eval_order
from tasks.set_data import make_direct_clustering_tasks
from tasks.set_losses import (
    ari_from_tables,
    contingency,
    hungarian_matched_nll,
    matched_accuracy,
    mog_log_likelihood,
    mog_oracle_log_likelihood,
)
from tests.conftest import REPO_ROOT

TINY_DIRECT = {"train_tasks": 60, "val_tasks": 16, "test_tasks": 16, "n_min": 10, "n_max": 40, "k_min": 2, "k_max": 5}
TINY_MOG = {"n_min": 10, "n_max": 30, "val_tasks": 16, "test_tasks": 16}


def smoke_params() -> dict:
    params = copy.deepcopy(load_params(profile="smoke"))
    params["train"].update(device="cpu")
    return params


@pytest.fixture(scope="module")
def direct_data(tmp_path_factory):
    """A tiny clustering_direct data folder built by the data stage; returns (params, options, folder)."""
    from pipelines.data import build

    folder = tmp_path_factory.mktemp("direct")
    options = {**TINY_DIRECT, "data_dir": str(folder / "data")}
    params = smoke_params()
    summary = build(params, "clustering_direct", options=options, report_root=folder / "rep")
    assert summary["train_tasks"] == 60 and summary["val_tasks"] == summary["test_tasks"] == 16
    return params, options, folder


@pytest.fixture(scope="module")
def mog_data(tmp_path_factory):
    from pipelines.data import build

    folder = tmp_path_factory.mktemp("mog")
    options = {**TINY_MOG, "data_dir": str(folder / "data")}
    params = smoke_params()
    summary = build(params, "clustering_mog", options=options, report_root=folder / "rep")
    assert -3.0 < summary["test_oracle_loglik"] < 0.0
    return params, options, folder


def test_data_stage_writes_the_splits_from_their_own_seeds(direct_data):
    params, options, _ = direct_data
    task = make_task(params, "clustering_direct", options=options)
    train, val, test = task.train_data(None), task.eval_data("val", None), task.eval_data("test", None)
    assert (len(train), len(val), len(test)) == (60, 16, 16)
    expected = make_direct_clustering_tasks(76, 0, (10, 40), (2, 5))  # train + val: data_seed, in that order
    assert all(np.array_equal(a.points, b.points) for a, b in zip(train.tasks, expected[:60]))
    assert sorted(len(t.points) for t in val.tasks) == sorted(len(t.points) for t in expected[60:])
    test_points = {t.points.tobytes() for t in test.tasks}
    assert not test_points & {t.points.tobytes() for t in expected}  # test_seed: none of the train/val tasks
    assert all(10 <= len(t.points) <= 40 and 2 <= len(t.means) <= 5 for t in train.tasks + test.tasks)


def test_data_built_with_other_options_is_a_one_line_error(direct_data):
    params, options, _ = direct_data
    task = make_task(params, "clustering_direct", options={**options, "n_max": 41})
    with pytest.raises(
        SwarmlabError, match=r"was built with other options .*n_max 40 -> 41.*pipelines.data --task"
    ) as info:
        task.train_data(None)
    assert "\n" not in str(info.value)
    missing = make_task(params, "clustering_direct", options={"data_dir": str(direct_data[2] / "nowhere")})
    with pytest.raises(SwarmlabError, match="meta.json is missing: build the task's data first"):
        missing.eval_data("val", None)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"slots": 4, "k_max": 5}, "slots=4 is below k_max=5"),
        ({"n_min": 50, "n_max": 40}, "n_min and n_max must satisfy"),
        ({"test_seed": 0}, "data_seed and test_seed are both 0"),
    ],
)
def test_bad_options_are_one_line_errors(values, message):
    with pytest.raises(SwarmlabError, match=message):
        make_task(smoke_params(), "clustering_direct", options=values)


def test_balanced_plan_groups_similar_sizes_and_covers_every_task_once(direct_data):
    params, options, _ = direct_data
    train = make_task(params, "clustering_direct", options=options).train_data(None)
    plan = train.batch_plan(8, torch.Generator().manual_seed(0))
    assert sorted(torch.cat(plan).tolist()) == list(range(len(train)))
    spread = np.mean([np.ptp(train.sizes[b.numpy()]) for b in plan])
    shuffled = np.random.default_rng(0).permutation(len(train))
    random_spread = np.mean([np.ptp(train.sizes[shuffled[i : i + 8]]) for i in range(0, len(train), 8)])
    assert spread < random_spread / 3  # sorted chunks: little padding
    again = train.batch_plan(8, torch.Generator().manual_seed(1))
    assert [b.tolist() for b in again] != [b.tolist() for b in plan]  # a new chunk order per epoch
    batch = train.get_batch(plan[0])
    n = int(train.sizes[plan[0].numpy()].max())
    assert (
        batch["x"].shape == (len(plan[0]), n, 2)
        and batch["mask"].sum(1).tolist() == train.sizes[plan[0].numpy()].tolist()
    )
    assert (batch["labels"][~batch["mask"]] == -1).all()


def test_eval_splits_start_at_the_median_size():
    sizes = np.array([5, 1, 9, 3, 7])
    order = eval_order(sizes)
    assert sizes[order].tolist() == [5, 7, 9, 1, 3]


def random_batch(seed: int, B: int = 6, N: int = 30, S: int = 10) -> tuple[torch.Tensor, dict]:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, N, S, generator=g) * 3
    labels = torch.randint(0, 5, (B, N), generator=g)
    mask = torch.rand(B, N, generator=g) < 0.8
    mask[:, 0] = True
    labels[~mask] = -1
    return logits, {
        "x": torch.randn(B, N, 2, generator=g),
        "labels": labels,
        "mask": mask,
        "k": torch.full((B,), 5),
        "means": torch.zeros(B, S, 2),
        "covs": torch.eye(2).expand(B, S, 2, 2),
    }


def test_direct_metrics_equal_a_direct_computation():
    task = make_task(smoke_params(), "clustering_direct")
    meter = task.new_metrics()
    losses, accs, aris = [], [], []
    for seed in range(3):
        logits, batch = random_batch(seed)
        loss = task.loss(logits, batch)
        meter.update(logits, batch, loss)
        losses += hungarian_matched_nll(F.log_softmax(logits, -1), batch["labels"], batch["mask"]).tolist()
        pred = logits.argmax(-1)
        accs += matched_accuracy(pred, batch["labels"], batch["mask"]).tolist()
        aris += [adjusted_rand_index(batch["labels"][b][batch["mask"][b]], pred[b][batch["mask"][b]]) for b in range(6)]
    out = meter.compute()
    assert out["loss"] == pytest.approx(np.mean(losses), rel=1e-6)
    assert out["matched_accuracy"] == pytest.approx(np.mean(accs), rel=1e-6)
    assert out["ari"] == pytest.approx(np.mean(aris), rel=1e-9)


def test_metric_update_never_reads_a_value_on_the_host(monkeypatch):
    task = make_task(smoke_params(), "clustering_direct")
    meter = task.new_metrics()
    logits, batch = random_batch(0)
    loss = task.loss(logits, batch)
    for name in ("item", "cpu", "numpy", "tolist", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, lambda *a, **k: (_ for _ in ()).throw(AssertionError("host sync")))
    meter.update(logits, batch, loss)  # the contingency tables stay on the device until compute()
    monkeypatch.undo()
    assert 0.0 <= meter.compute()["matched_accuracy"] <= 1.0


def test_ari_from_tables_equals_the_pair_counting_formula():
    rng = np.random.default_rng(0)
    cases = [(rng.integers(0, 4, 50), rng.integers(0, 6, 50)) for _ in range(20)]
    cases += [(np.zeros(7, int), np.zeros(7, int)), (np.arange(5), np.arange(5)), (np.array([0]), np.array([3]))]
    tables = np.zeros((len(cases), 10, 10), np.int64)
    for i, (a, b) in enumerate(cases):
        np.add.at(tables[i], (a, b), 1)
    assert ari_from_tables(tables) == pytest.approx([adjusted_rand_index(a, b) for a, b in cases], abs=1e-12)


def test_contingency_counts_real_points_only():
    logits, batch = random_batch(3)
    table = contingency(batch["labels"], batch["mask"], logits.argmax(-1), 10)
    assert table.sum().item() == batch["mask"].sum().item()
    b = 2
    expected = np.zeros((10, 10), np.int64)
    m = batch["mask"][b]
    np.add.at(expected, (batch["labels"][b][m].numpy(), logits.argmax(-1)[b][m].numpy()), 1)
    assert np.array_equal(table[b].numpy(), expected)


def test_the_loss_runs_in_fp32_under_autocast():
    task = make_task(smoke_params(), "clustering_direct")
    logits, batch = random_batch(1)
    low = logits.bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = task.loss(low, batch)
    assert loss.dtype == torch.float32
    exact = hungarian_matched_nll(F.log_softmax(low.float(), -1), batch["labels"], batch["mask"]).mean()
    assert loss.item() == pytest.approx(exact.item(), rel=1e-6)
    with pytest.raises(SwarmlabError, match="one row of slot logits per point"):
        task.loss(logits[:, 0], batch)


def test_mog_stream_depends_only_on_seed_and_step():
    stream = MogStream((100, 500))
    a, b, c = stream.batch(3, 10, 0), stream.batch(3, 10, 0), stream.batch(4, 10, 0)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["x"][:, :10], c["x"][:, :10])
    assert a["mask"].all() and 100 <= a["x"].shape[1] <= 500  # one N per batch: nothing padded
    assert a["pi"].shape == (10, 4) and torch.allclose(a["pi"].sum(1), torch.ones(10))


def test_mog_metrics_equal_a_direct_computation(mog_data):
    params, options, _ = mog_data
    task = make_task(params, "clustering_mog", options=options)
    val = task.eval_data("val", None)
    meter = task.new_metrics()
    out = torch.randn(len(val), 20, generator=torch.Generator().manual_seed(0))
    batch = val.get_batch(torch.arange(len(val)))
    meter.update(out, batch, task.loss(out, batch))
    got = meter.compute()
    from tasks.set_losses import mog_params_from_output

    ll = mog_log_likelihood(batch["x"], batch["mask"], *mog_params_from_output(out, 4, 2))
    assert got["loglik"] == pytest.approx(ll.mean().item(), rel=1e-5) and got["loss"] == -got["loglik"]
    oracle = mog_oracle_log_likelihood(val.tasks).double().mean().item()
    assert got["oracle_loglik"] == pytest.approx(oracle, rel=1e-6)
    assert got["loglik_gap"] == pytest.approx(oracle - got["loglik"], rel=1e-6)
    with pytest.raises(SwarmlabError, match="give it a pooling head"):
        task.loss(torch.zeros(len(val), 7, 20), batch)


def test_reports_draw_one_task(direct_data, mog_data, tmp_path):
    for (params, options, _), key, size in ((direct_data, "clustering_direct", 10), (mog_data, "clustering_mog", 20)):
        task = make_task(params, key, options=options)
        meter = task.new_metrics()
        data = task.eval_data("test", None)
        batch = data.get_batch(torch.arange(4))
        n = batch["x"].shape[1]
        out = torch.randn(4, n, size) if key == "clustering_direct" else torch.randn(4, size)
        meter.update(out, batch, task.loss(out, batch))
        paths = task.report(meter, tmp_path / key, title="t", name="m")
        assert len(paths) == 1 and paths[0].is_file() and paths[0].stat().st_size > 10_000


def test_the_oracle_beats_a_trained_smoke_model(mog_data, tmp_path):
    from pipelines.train import train

    params, options, _ = mog_data
    params["tasks"]["clustering_mog"]["models"] = ["swarm"]
    metrics = train(
        params,
        "clustering_mog",
        options=options,
        out_root=tmp_path / "out",
        report_root=tmp_path / "rep",
        tracking=False,
    )["swarm-seed0"]
    assert metrics["steps"] == 4 and metrics["evaluations"] == 2
    assert metrics["val_oracle_loglik"] > metrics["val_loglik"]
    assert metrics["val_loglik_gap"] == pytest.approx(metrics["val_oracle_loglik"] - metrics["val_loglik"])


def test_train_evaluate_and_frontier_stages_on_tiny_direct_data(direct_data, tmp_path):
    from pipelines.evaluate import evaluate
    from pipelines.frontier import frontier
    from pipelines.train import train

    params, options, _ = direct_data
    params["tasks"]["clustering_direct"]["models"] = ["swarm", "set_linear_mean"]
    kw = dict(options=options, report_root=tmp_path / "rep", tracking=False)
    trained = train(params, "clustering_direct", out_root=tmp_path / "out", **kw)
    assert {m["stopped"] for m in trained.values()} == {"max_epochs"} and trained["swarm-seed0"]["evaluations"] == 2
    tested = evaluate(params, "clustering_direct", train_root=tmp_path / "out", **kw)
    for name, m in tested.items():
        assert m["test_rows"] == 16 and 0 <= m["test_matched_accuracy"] <= 1 and -1 <= m["test_ari"] <= 1
        assert (tmp_path / "rep" / "evaluate" / "clustering_direct" / "plots" / f"clustering_{name}.png").is_file()
    best = frontier(params, "clustering_direct", report_root=tmp_path / "rep")
    assert set(best) == {"swarm", "set_linear_mean"} and best["swarm"]["code"] == "(8-2-1)"
    assert {m["model"] for m in tested.values()} == {"swarm", "set_linear_mean"} and set(tested) == set(trained)
    assert (tmp_path / "rep" / "frontier" / "clustering_direct" / "frontier.png").is_file()


@pytest.mark.slow  # six stage processes (torch imports): ~40 s
def test_the_stage_commands_run_both_tasks_end_to_end(tmp_path):
    env = {**os.environ, "SWARMLAB_WORKDIR": str(tmp_path), "SWARMLAB_PROGRESS": "0", "PYTHONPATH": str(REPO_ROOT)}

    def stage(*args, workdir=tmp_path):
        return subprocess.run(
            [sys.executable, "-m", *args, "--profile", "smoke"],
            cwd=tmp_path,
            env={**env, "SWARMLAB_WORKDIR": str(workdir)},
            capture_output=True,
            text=True,
            timeout=300,
        )

    for args in (
        ["pipelines.data", "--task", "clustering_direct"],
        ["pipelines.data", "--task", "clustering_mog"],
        [
            "pipelines.train",
            "--task",
            "clustering_direct",
            "--models",
            "swarm,set_transformer_isab,lstm_sorted",
            "--no-tracking",
        ],
        ["pipelines.train", "--task", "clustering_mog", "--no-tracking"],
        ["pipelines.evaluate", "--task", "clustering_mog", "--no-tracking"],
    ):
        run = stage(*args)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert (tmp_path / "data" / "clustering_direct" / "train.parquet").is_file()
    trained = json.loads((tmp_path / "reports" / "train" / "clustering_direct" / "metrics.json").read_text())
    assert set(trained) == {"swarm-seed0", "set_transformer_isab-seed0", "lstm_sorted-seed0"}
    tested = json.loads((tmp_path / "reports" / "evaluate" / "clustering_mog" / "metrics.json").read_text())
    assert set(tested) == {"swarm-seed0", "set_transformer_isab-seed0"}
    assert all(m["test_oracle_loglik"] > m["test_loglik"] for m in tested.values())
    run = stage("pipelines.frontier", "--task", "clustering_direct")
    assert run.returncode == 0 and "| swarm | (8-2-1) |" in run.stdout, run.stdout + run.stderr
    bad = stage("pipelines.train", "--task", "clustering_direct", "--no-tracking", workdir=tmp_path / "empty")
    assert (
        bad.returncode == 2
        and bad.stderr.startswith("error: ")
        and "pipelines.data --task clustering_direct" in bad.stderr
    )
    assert "\n" not in bad.stderr.strip()
