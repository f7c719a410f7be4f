"""The evaluate stage saves per-item test scores, and refuses a second look at a test split under other training
settings unless --retest names it (the report counts it)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipelines.data import build
from pipelines.evaluate import evaluate
from pipelines.train import train
from swarmlab.errors import SwarmlabError
from swarmlab.report.testsplit import READS, check_reads, read_entry, read_items, rereads
from tests.tasks.test_long_tasks import long_params


def _entry(run="m-seed0", lr=1e-3, seed=0):
    return read_entry(
        task="t",
        registered="t",
        options={"rows": 10},
        model="m",
        overrides={},
        seed=seed,
        train={"lr": lr, "seed": seed},
        run=run,
        profile="cpu",
        commit="abc",
    )


def test_a_reproduction_is_allowed_and_another_lr_is_refused_unless_named(tmp_path):
    from swarmlab.report.testsplit import write_reads

    write_reads(tmp_path, check_reads(tmp_path, [_entry()]))
    assert (
        check_reads(tmp_path, [_entry()]) == json.loads((tmp_path / READS).read_text())["reads"]
    )  # rerun: nothing new
    assert len(check_reads(tmp_path, [_entry(seed=1)])) == 2  # another seed is another model: its own first read
    with pytest.raises(SwarmlabError, match="already read .* --retest"):
        check_reads(tmp_path, [_entry(lr=2e-4)])
    reads = check_reads(tmp_path, [_entry(lr=2e-4)], retest=True)
    assert reads[-1]["retest"] is True and rereads(reads) == {"m": 1}


@pytest.mark.slow
def test_evaluate_writes_items_whose_mean_is_the_metric_and_guards_the_test_split(tmp_path):
    params = long_params(
        tmp_path,
        listops={
            "train_rows": 16,
            "val_rows": 8,
            "test_rows": 12,
            "max_depth": 4,
            "min_length": 10,
            "max_length": 120,
            "max_len": 128,
        },
    )
    params["tasks"]["listops"].update(models=["transformer"])
    params["tasks"]["listops"]["train"].update(max_epochs=1, max_steps=2, batch_size=8)
    kw = dict(train_root=tmp_path / "outputs", report_root=tmp_path / "reports", tracking=False)
    build(params, "listops", report_root=tmp_path / "reports")
    train(params, "listops", out_root=tmp_path / "outputs", report_root=tmp_path / "reports", tracking=False)
    results = evaluate(params, "listops", **kw)
    folder = tmp_path / "reports" / "evaluate" / "listops"
    items = read_items(folder / "items" / "transformer-seed0.npz")
    assert len(items["accuracy"]) == 12 and items["accuracy"].mean() == pytest.approx(
        results["transformer-seed0"]["test_accuracy"]
    )
    assert len(items["batch_latency_ms"]) >= 1 and np.all(items["batch_latency_ms"] > 0)
    evaluate(params, "listops", **kw)  # the same read again: a reproduction
    params["tasks"]["listops"]["train"]["lr"] = 1e-4
    with pytest.raises(SwarmlabError, match="already read"):
        evaluate(params, "listops", **kw)
    evaluate(params, "listops", retest=True, **kw)
    assert rereads(json.loads((folder / READS).read_text())["reads"]) == {"transformer": 1}
