"""The evaluate stage saves per-item test scores, and refuses a second look at a test split under other training
settings unless --retest names it (the report counts it); every read also goes to the repository's append-only log
(reports/test_reads.jsonl), which a script backfills from git history."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess

import numpy as np
import pytest

from pipelines.ablate import ablate
from pipelines.data import build
from pipelines.evaluate import evaluate
from pipelines.train import train
from swarmlab.errors import SwarmlabError
from swarmlab.drive.params import load_params
from swarmlab.drive.report.testsplit import (
    READS,
    append_reads,
    check_reads,
    load_log,
    log_line,
    log_path,
    log_rereads,
    read_entry,
    read_items,
    reads_for,
    rereads,
)
from tests.conftest import REPO_ROOT
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
    from swarmlab.drive.report.testsplit import write_reads

    write_reads(tmp_path, check_reads(tmp_path, [_entry()]))
    assert (
        check_reads(tmp_path, [_entry()]) == json.loads((tmp_path / READS).read_text())["reads"]
    )  # rerun: nothing new
    assert len(check_reads(tmp_path, [_entry(seed=1)])) == 2  # another seed is another model: its own first read
    with pytest.raises(SwarmlabError, match="already read .* --retest"):
        check_reads(tmp_path, [_entry(lr=2e-4)])
    reads = check_reads(tmp_path, [_entry(lr=2e-4)], retest=True)
    assert reads[-1]["retest"] is True and rereads(reads) == {"m": 1}


def test_inside_a_dvc_experiment_another_lr_is_an_exploratory_read(tmp_path):
    """`dvc exp run -S train.lr=...` must complete: inside an experiment the changed read is allowed and marked with
    the experiment's name; a first read and a reproduction there are ordinary ones (nothing marked)."""
    from swarmlab.drive.report.testsplit import write_reads

    first = check_reads(tmp_path, [_entry()], experiment="forte-noil")
    assert "experiment" not in first[-1]  # the subject's first read: an ordinary one
    write_reads(tmp_path, first)
    assert check_reads(tmp_path, [_entry()], experiment="forte-noil") == first  # a reproduction adds nothing
    reads = check_reads(tmp_path, [_entry(lr=2e-4)], experiment="forte-noil")
    assert reads[-1]["experiment"] == "forte-noil" and reads[-1]["retest"] is True and rereads(reads) == {"m": 1}


@pytest.mark.slow
def test_evaluate_writes_items_whose_mean_is_the_metric_and_guards_the_test_split(tmp_path, monkeypatch):
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
    params["tasks"]["listops"]["train"]["lr"] = 2e-4  # inside `dvc exp run`: exploratory, no --retest needed
    monkeypatch.setenv("DVC_EXP_NAME", "forte-noil")
    evaluate(params, "listops", **kw)
    lines = [line for line in load_log() if line["where"] == str(folder.resolve())]  # the session's log: this test's
    assert [line.get("experiment") for line in lines] == [None, None, None, "forte-noil"]
    assert [line["kind"] for line in lines] == ["first", "reproduction", "re-read", "re-read"]


# -------------------------------------------------------------------------------------------------------- the log


def _line(lr=1e-3, layers=1, commit="abc", accuracy=0.5, **extra):
    read = read_entry(
        task="t",
        registered="t",
        options={"rows": 10},
        model="m",
        overrides={"num_layers": layers},
        seed=0,
        train={"lr": lr, "seed": 0},
        run="m-seed0",
        profile="cpu",
        commit=commit,
    )
    return log_line(
        read,
        task="t",
        registered="t",
        options={"rows": 10},
        data_fingerprint=None,
        overrides={"num_layers": layers},
        where="reports/evaluate/t",
        result={"test_accuracy": accuracy},
        **extra,
    )


def test_the_log_is_the_tests_own_and_lies_under_the_repo_root_otherwise(monkeypatch):
    assert log_path() != REPO_ROOT / "reports" / "test_reads.jsonl"  # tests/conftest.py moved it
    monkeypatch.delenv("SWARMLAB_TEST_READ_LOG")
    monkeypatch.setenv("SWARMLAB_WORKDIR", "/elsewhere")  # a claims piece or a grid point: the same log
    assert log_path() == REPO_ROOT / "reports" / "test_reads.jsonl"


def test_the_log_only_grows_and_names_each_kind_of_read(tmp_path):
    log = tmp_path / "log.jsonl"
    append_reads([_line()], log)
    first = log.read_bytes()
    append_reads([_line(commit="def")], log)  # the same settings again: a rerun
    append_reads([_line(layers=2, commit="ghi", accuracy=0.6)], log)  # another model config: the same subject
    append_reads([_line(lr=2e-4, commit="jkl", accuracy=0.7)], log)  # other training settings
    later = log.read_bytes()
    assert later.startswith(first) and later.count(b"\n") == 4  # appended, never rewritten
    lines = load_log(log)
    assert [line["kind"] for line in lines] == ["first", "reproduction", "re-read", "re-read"]
    assert len({line["subject"] for line in lines}) == 1 and len({line["identity"] for line in lines}) == 2
    assert all(
        text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        for text in later.decode().split("\n")[:-1]
    )
    assert reads_for(lines, task="t", model="m") == lines and reads_for(lines, task="t", model="x") == []
    assert log_rereads(lines) == [
        "`t` `m` seed 0: 3 reads of the test split (abc: 0.5000, ghi: 0.6000, jkl: 0.7000); the later reads were made "
        "knowing the earlier (and 1 reproduction of a read under the same settings)"
    ]
    assert (tmp_path / "log.jsonl.lock").is_file()


def test_a_corrupt_line_is_a_one_line_error_naming_the_file_and_line(tmp_path):
    log = tmp_path / "log.jsonl"
    append_reads([_line(), _line(commit="def")], log)
    log.write_text(log.read_text() + '{"task": "t", "cut sh\n')
    with pytest.raises(SwarmlabError, match=rf"^{log}:3 is not a test-read line .*restore it from git$") as exc:
        load_log(log)
    assert "\n" not in str(exc.value)
    before = log.read_bytes()
    with pytest.raises(SwarmlabError, match=r":3 is not a test-read line"):
        append_reads([_line(commit="ghi")], log)  # nothing is appended behind a damaged line
    assert log.read_bytes() == before


def _toy_params(lr=1e-3, layers=1) -> dict:
    """toy_counting at a few seconds: one transformer, one seed, 20 steps."""
    params = copy.deepcopy(load_params(profile="smoke"))
    toy = params["tasks"]["toy_counting"]
    toy["train"].update(max_steps=20, eval_every=10, batch_size=16, lr=lr)
    toy["options"].update(val_rows=32, test_rows=32)
    toy["model_overrides"]["num_layers"] = layers
    params["ablations"] = {
        "layers": {
            "description": "depth",
            "task": "toy_counting",
            "models": ["transformer"],
            "vary": {"tasks.toy_counting.model_overrides.num_layers": [2, 3]},
            "stages": ["train", "evaluate"],
            "reuse": [],
        }
    }
    return params


@pytest.mark.slow
def test_a_second_read_under_changed_settings_is_logged_beside_the_first_in_a_piece_and_in_a_grid(
    tmp_path, monkeypatch
):
    """Issue 35: a second test read under changed settings, in a claims-like piece (--retest) and in a grid point (a
    side workspace): the log keeps every read, and the first line's bytes stay as they were."""
    log = tmp_path / "test_reads.jsonl"
    monkeypatch.setenv("SWARMLAB_TEST_READ_LOG", str(log))
    roots = dict(train_root=tmp_path / "outputs", report_root=tmp_path / "reports", tracking=False)

    def piece(params, **kw):
        train(params, "toy_counting", out_root=tmp_path / "outputs", report_root=tmp_path / "reports", tracking=False)
        return evaluate(params, "toy_counting", **roots, **kw)

    results = piece(_toy_params())
    first = log.read_bytes()
    (line,) = load_log(log)
    assert line["kind"] == "first" and line["run"] == "transformer-seed0" and "grid" not in line
    assert line["result"]["test_accuracy"] == results["transformer-seed0"]["test_accuracy"]
    assert line["result"]["test_rows"] == 32 and line["where"] == str(
        (tmp_path / "reports/evaluate/toy_counting").resolve()
    )
    assert line["commit"] and line["train_commit"]  # the commits of the evaluation and of the training (run.json)
    assert line["options"]["test_rows"] == 32 and line["overrides"]["num_layers"] == 1

    with pytest.raises(SwarmlabError, match="already read"):  # another lr: refused without --retest ...
        piece(_toy_params(lr=3e-3))
    assert log.read_bytes() == first  # ... and not logged: the test split was not read
    piece(_toy_params(lr=3e-3), retest=True)
    piece(_toy_params(lr=3e-3, layers=2))  # another model config: a new identity, the same subject

    monkeypatch.setattr("swarmlab.drive.ablation_runs.REPO_ROOT", tmp_path)  # as if the grid ran inside the repo
    grid = ablate(
        _toy_params(lr=3e-3),
        "layers",
        only=["num_layers=3"],
        tracking=False,
        out_root=tmp_path / "outputs" / "ablations",
        report_root=tmp_path / "reports",
    )
    (ran,) = [p for p in grid["points"] if p["point"] == "num_layers=3"]
    assert ran["status"] == "ok", ran

    later = log.read_bytes()
    assert later.startswith(first)  # the first read's line is unchanged
    lines = load_log(log)
    assert [line["kind"] for line in lines] == ["first", "re-read", "re-read", "re-read"]
    assert len({line["subject"] for line in lines}) == 1 and len({line["identity"] for line in lines}) == 3
    assert [line["train_settings"]["lr"] for line in lines] == [1e-3, 3e-3, 3e-3, 3e-3]
    point = lines[-1]
    assert (point["grid"], point["point"], point["overrides"]["num_layers"]) == ("layers", "num_layers=3", 3)
    assert point["where"].endswith("outputs/ablations/layers/num_layers=3/reports/evaluate/toy_counting")
    assert point["result"]["test_accuracy"] == ran["evaluate"]["transformer-seed0"]["test_accuracy"]
    (worded,) = log_rereads(lines)
    assert (
        worded.startswith("`toy_counting` `transformer` seed 0: 4 reads of the test split (")
        and "layers grid" in worded
    )


# ------------------------------------------------------------------------------------------------------ backfill


def _backfill_module():
    spec = importlib.util.spec_from_file_location(
        "backfill_test_reads", REPO_ROOT / "scripts" / "backfill_test_reads.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commit(repo, files: dict, date: str) -> str:
    for name, value in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(json.dumps(value))
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", date]):
        subprocess.run(cmd, cwd=repo, env=env, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def _read(commit, lr=1e-3, layers=1):
    entry = read_entry(
        task="toy",
        registered="toy",
        options={},
        model="m",
        overrides={"num_layers": layers},
        seed=0,
        train={"lr": lr},
        run="m-seed0",
        profile="claims",
        commit=commit,
    )
    return {**entry, "retest": False}


def test_the_backfill_recovers_a_read_a_later_commit_overwrote_and_adds_nothing_twice(tmp_path, capsys):
    """A claims piece's folder read at one model config, then overwritten by a read at another (a new identity: the
    per-folder record kept only the second); then rerun unchanged (a reproduction it does not record); and a grid."""
    repo, log = tmp_path / "repo", tmp_path / "test_reads.jsonl"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    folder = "reports/claims/evaluate/toy"
    metrics = lambda commit, acc: {"m-seed0": {"model": "m", "seed": 0, "test_accuracy": acc, "git_commit": commit}}
    _commit(
        repo,
        {
            f"{folder}/test_reads.json": {"reads": [_read("e1" * 20)]},
            f"{folder}/metrics.json": metrics("e1" * 20, 0.84),
        },
        "2026-01-01T10:00:00+02:00",
    )
    _commit(
        repo,
        {
            f"{folder}/test_reads.json": {"reads": [_read("e2" * 20, layers=2)]},
            f"{folder}/metrics.json": metrics("e2" * 20, 0.86),
        },
        "2026-01-02T10:00:00+00:00",
    )
    _commit(repo, {f"{folder}/metrics.json": metrics("e3" * 20, 0.86)}, "2026-01-03T10:00:00+00:00")
    point = {
        "point": "num_layers=3",
        "label": "num_layers=3",
        "model": "m",
        "overrides": {"layers": 3},
        "status": "ok",
        "workspace": "outputs/claims/outputs/ablations/g/num_layers=3",
        "evaluate": metrics("e4" * 20, 0.8),
    }
    _commit(
        repo,
        {
            "reports/claims/ablations/g/results.json": {
                "grid": "g",
                "task": "toy",
                "profile": "claims",
                "points": [point],
            }
        },
        "2026-01-04T10:00:00+00:00",
    )
    # a read the log already holds (appended live by the piece's evaluate in its work folder) is not added again
    live = log_line(
        _read("e2" * 20, layers=2),
        task="toy",
        registered=None,
        options=None,
        data_fingerprint=None,
        overrides=None,
        where="outputs/claims/reports/evaluate/toy",
        result={},
        time="2026-01-02T09:00:00+00:00",
    )
    append_reads([live], log)

    backfill = _backfill_module()
    backfill.main(["--repo", str(repo), "--log", str(log)])
    assert "added 3 line(s)" in capsys.readouterr().out
    lines = load_log(log)
    assert lines[0] == {**live, "kind": "first"}
    recovered = lines[1:]
    assert [(line["commit"][:2], line["kind"], line["result"]["test_accuracy"]) for line in recovered] == [
        ("e1", "first", 0.84),  # the read the later commit overwrote ...
        ("e3", "reproduction", 0.86),  # the rerun the record did not add
        ("e4", "re-read", 0.8),  # the grid point: the same model and seed on the same split
    ]
    assert recovered[0]["time"] == "2026-01-01T08:00:00+00:00" and recovered[0]["where"] == folder
    assert recovered[0]["backfilled"].endswith(f":{folder}/test_reads.json")
    assert (recovered[2]["grid"], recovered[2]["point"]) == ("g", "num_layers=3")
    assert recovered[2]["where"] == "outputs/claims/outputs/ablations/g/num_layers=3/reports/evaluate/toy"
    before = log.read_bytes()
    backfill.main(["--repo", str(repo), "--log", str(log)])
    assert "added 0 line(s)" in capsys.readouterr().out and log.read_bytes() == before
