"""pipelines/evaluate.py across sessions: ``--finished`` reads the test split with the runs that have finished, and a
run whose checkpoint is gone (parked without it: scripts/park.py save --evaluate) keeps its result, items and figures
only when the result read the checkpoint its run.json sealed; it is not read again and adds no line to the log."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from swarmlab.errors import SwarmlabError
from tests.pipelines.test_bad_input_tracks import base_params

TASK = "clustering_direct"


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_a_run_parked_without_its_checkpoint_keeps_its_result_and_is_not_read_again(tmp_path, _test_read_log):
    from pipelines.data import build
    from pipelines.evaluate import evaluate
    from pipelines.train import train
    from swarmlab.drive.params import load_params

    (tmp_path / "p.yaml").write_text(yaml.safe_dump(base_params(tmp_path)))
    params = load_params(tmp_path / "p.yaml", "t")
    outputs, reports = tmp_path / "outputs" / "train", tmp_path / "reports"
    build(params, TASK, report_root=reports)
    train(params, TASK, out_root=outputs, report_root=reports, tracking=False)
    kw = dict(train_root=outputs, report_root=reports, tracking=False)
    folder = reports / "evaluate" / TASK

    # the session ends with one run still training: its folder is not final yet
    late = "set_transformer_sab-seed0"
    shutil.move(outputs / TASK / late, tmp_path / late)
    with pytest.raises(SwarmlabError, match=f"{late}/best.pt is missing: train {late}.*or restore its parked"):
        evaluate(params, TASK, **kw)
    before = len(_lines(_test_read_log))
    first = evaluate(params, TASK, finished=True, **kw)
    assert sorted(first) == ["set_linear_mean-seed0", "swarm-seed0"]
    assert [line["run"] for line in _lines(_test_read_log)[before:]] == sorted(first, reverse=True)
    for name, result in first.items():
        sealed = json.loads((outputs / TASK / name / "run.json").read_text())["best_sha256"]
        assert result["best_sha256"] == sealed
    plots = sorted(p.name for p in (folder / "plots").iterdir())
    assert plots and all(any(n in p for n in first) for p in plots)

    # parked without checkpoints; the next session trains the last run and evaluates the whole task
    for name in first:
        (outputs / TASK / name / "best.pt").unlink()
    shutil.move(tmp_path / late, outputs / TASK / late)
    before = len(_lines(_test_read_log))
    second = evaluate(params, TASK, **kw)
    assert list(second) == ["swarm-seed0", "set_linear_mean-seed0", late]  # the task's order
    assert {k: second[k] for k in first} == first  # kept as they were
    assert [line["run"] for line in _lines(_test_read_log)[before:]] == [late]  # one new read, the kept ones none
    assert sorted(p.name for p in (folder / "items").iterdir()) == sorted(f"{n}.npz" for n in second)
    assert set(plots) < {p.name for p in (folder / "plots").iterdir()}
    assert len(json.loads((folder / "test_reads.json").read_text())["reads"]) == 3

    # a result of another checkpoint stands for nothing: the run has to be evaluated, and its best.pt is gone
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["swarm-seed0"]["best_sha256"] = "0" * 64
    (folder / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(SwarmlabError, match="swarm-seed0/best.pt is missing"):
        evaluate(params, TASK, **kw)
    for name in ("set_linear_mean-seed0", late):  # and nothing stands for a run that sealed no checkpoint
        (outputs / TASK / name / "run.json").write_text("{}")
        (outputs / TASK / name / "best.pt").unlink(missing_ok=True)
    with pytest.raises(SwarmlabError, match="no run of clustering_direct has finished training"):
        evaluate(params, TASK, finished=True, **kw)
