"""reports/summary.json, the pipeline's one DVC metrics file, on hand-made metrics with known answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from swarmlab.drive.report.stats import across_seeds, bootstrap
from swarmlab.drive.report.summary import render, summarize
from tests.swarmlab.drive.report.test_ledger import correct, write_task


def test_one_headline_per_task_and_model_with_its_interval(tmp_path):
    write_task(tmp_path, "imdb", {"a": {0: correct(400, 300)}, "b": {0: correct(400, 200, 1), 1: correct(400, 220, 2)}})
    (tmp_path / "evaluate" / "skipped").mkdir(parents=True)  # a task whose stage wrote only its reason
    (tmp_path / "evaluate" / "skipped" / "metrics.json").write_text(json.dumps({"skipped": "needs the claims profile"}))
    out = summarize(tmp_path, {"imdb": "accuracy", "skipped": "accuracy", "absent": "loss"})

    assert set(out) == {"imdb"}  # tasks without a test result are left out
    a, b = out["imdb"]["a"], out["imdb"]["b"]
    assert set(a) == {"test_accuracy", "lo", "hi", "seeds", "train_time_s"}  # five columns per model
    one = bootstrap({"accuracy": correct(400, 300)}, "accuracy")  # one seed: the bootstrap over test items
    assert (a["test_accuracy"], a["lo"], a["hi"], a["seeds"]) == (0.75, round(one.lo, 6), round(one.hi, 6), 1)
    two = across_seeds([0.5, 0.55])  # two seeds: their mean and the t-interval across them
    assert b["test_accuracy"] == pytest.approx(0.525) and b["seeds"] == 2
    assert (b["lo"], b["hi"]) == (round(two.lo, 6), round(two.hi, 6)) and b["train_time_s"] == 10.0


def test_no_interval_where_the_items_cannot_give_one(tmp_path):
    write_task(tmp_path, "sets", {"swarm": {0: correct(50, 25)}})
    metrics = tmp_path / "evaluate" / "sets" / "metrics.json"
    metrics.write_text(json.dumps({k: {**v, "test_loss": 0.5} for k, v in json.loads(metrics.read_text()).items()}))
    entry = summarize(tmp_path, {"sets": "loss"})["sets"]["swarm"]
    assert entry == {"test_loss": 0.5, "seeds": 1, "train_time_s": 10.0}  # the items hold accuracies only


def test_the_table_fits_a_screen():
    summary = {"imdb": {"swarmformer_small": {"test_accuracy": 0.8, "lo": 0.79, "hi": 0.81, "seeds": 1}}}
    lines = render(summary).splitlines()
    assert len(lines) == 3 and "0.8000 [0.7900, 0.8100]" in lines[2] and lines[2].endswith("-")
    assert "no task has a test result" in render({})
    assert max(len(line) for line in render(summary).splitlines()) < 100


def test_the_stage_writes_the_file_and_shows_it(tmp_path):
    from pipelines import summary as stage

    write_task(tmp_path, "toy_counting", {"transformer": {0: correct(100, 90)}})
    params = {"seed": 0, "tasks": {"toy_counting": {}}}
    result = stage.summary(params, tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text()) == result
    row = json.loads((tmp_path / "summary" / "toy_counting" / "transformer.json").read_text())
    assert (row["metric"], row["value"]) == ("test_accuracy", 0.9)  # the same headline, a file of its own
    assert result["toy_counting"]["transformer"]["test_accuracy"] == 0.9
    assert "toy_counting  transformer" in stage.show(tmp_path)
    assert np.isfinite(result["toy_counting"]["transformer"]["lo"])


def test_one_file_per_task_and_model_with_the_same_keys(tmp_path):
    from swarmlab.drive.report.summary import rows, write_rows

    summary = {
        "imdb": {"a": {"test_accuracy": 0.8, "lo": 0.79, "hi": 0.81, "seeds": 1, "train_time_s": 12.0}},
        "sets": {"swarm": {"test_loss": 0.5, "seeds": 1}, "lstm": {"test_loss": 0.7, "lo": 0.6, "hi": 0.8, "seeds": 2}},
    }
    table = rows(summary)
    assert set(table) == {"imdb/a.json", "sets/swarm.json", "sets/lstm.json"}
    keys = ["metric", "value", "lo", "hi", "seeds", "train_time_s"]
    assert all(list(row) == keys for row in table.values())  # dvc metrics show: the same six columns for every row
    assert table["sets/swarm.json"] == dict(zip(keys, ["test_loss", 0.5, None, None, 1, None]))
    assert table["imdb/a.json"] == dict(zip(keys, ["test_accuracy", 0.8, 0.79, 0.81, 1, 12.0]))

    folder = tmp_path / "summary"
    write_rows(folder, summary)
    assert json.loads((folder / "sets" / "lstm.json").read_text()) == table["sets/lstm.json"]
    write_rows(folder, {"imdb": summary["imdb"]})  # a task gone from the summary leaves no file behind
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == ["imdb/a.json"]
