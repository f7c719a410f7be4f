"""Staleness: a number whose stage's dependencies changed since dvc.lock was written is marked stale, with the stages
to rerun; the committed report lists exactly the stages that are stale against the committed code and dvc.lock."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from swarmlab.drive.params import load_params
from pipelines.report import write_report
from swarmlab.drive.report.provenance import file_md5, stale_stages
from swarmlab.drive.report.render import stale_listed
from tests.conftest import REPO_ROOT
from tests.pipelines.test_report import TASK, fake_reports

DVC = shutil.which("dvc") or str(Path(os.sys.executable).with_name("dvc"))


def test_the_committed_report_marks_as_stale_exactly_what_is_stale():
    """CI: REPORT.md, as committed, lists the stages whose dependencies differ from the committed dvc.lock; so a stale
    number can never look current. Fails when code changed after the report was written: rerun
    `python -m pipelines.report` (and `dvc repro` to make the numbers current)."""
    listed = stale_listed((REPO_ROOT / "reports" / "REPORT.md").read_text(encoding="utf-8"))
    stale = stale_stages(REPO_ROOT)
    assert "report" not in stale, f"reports/REPORT.md is out of date: {stale['report']}"
    assert listed == set(stale), "reports/REPORT.md is out of date: rerun python -m pipelines.report"


@pytest.mark.skipif(not Path(DVC).exists(), reason="dvc is not installed")
def test_our_hashes_are_dvc_s_and_a_changed_file_or_param_marks_the_stage_and_its_dependants(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "a.py").write_text("A = 1\n")
    (tmp_path / "code" / "__pycache__").mkdir()
    (tmp_path / "code" / "__pycache__" / "a.cpython.pyc").write_bytes(b"\0")  # ignored, as .dvcignore says
    (tmp_path / "b.py").write_text("B = 2\n")
    (tmp_path / "params.yaml").write_text("x: 1\ny: {z: 2}\n")
    (tmp_path / ".dvcignore").write_text("__pycache__/\n*.pyc\n")
    (tmp_path / "dvc.yaml").write_text(
        yaml.safe_dump(
            {
                "stages": {
                    "first": {
                        "cmd": "cat code/a.py > out1.txt",
                        "deps": ["code"],
                        "params": ["x"],
                        "outs": ["out1.txt"],
                    },
                    "second": {
                        "cmd": "cat out1.txt b.py > out2.txt",
                        "deps": ["out1.txt", "b.py"],
                        "params": ["y.z"],
                        "outs": ["out2.txt"],
                    },
                }
            }
        )
    )
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    for cmd in (["init", "--no-scm", "-q"], ["repro", "-q"]):
        subprocess.run([DVC, *cmd], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=120)
    assert stale_stages(tmp_path) == {}
    (tmp_path / "code" / "a.py").write_text("A = 3\n")
    stale = stale_stages(tmp_path)
    assert set(stale) == {"first", "second"} and stale["first"].changed == ["code"]
    assert stale["second"].changed == [] and stale["second"].rerun == ["first", "second"]
    (tmp_path / "code" / "a.py").write_text("A = 1\n")
    (tmp_path / "params.yaml").write_text("x: 1\ny: {z: 5}\n")
    stale = stale_stages(tmp_path)
    assert set(stale) == {"second"} and stale["second"].changed == ["params y.z"]
    # the stage writing now (the report, under dvc repro) does not judge itself; its upstream still counts
    assert stale_stages(tmp_path, writing=("second",)) == {}
    (tmp_path / "code" / "a.py").write_text("A = 4\n")
    stale = stale_stages(tmp_path, writing=("second",))
    assert set(stale) == {"first", "second"} and stale["second"].changed == [] and stale["first"].changed == ["code"]


def test_changing_a_code_file_after_a_run_marks_its_numbers_stale_in_the_report(tmp_path):
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    code = tmp_path / "pipelines" / "evaluate.py"
    code.parent.mkdir()
    code.write_text("# the evaluate stage\n")
    (tmp_path / "dvc.lock").write_text(
        yaml.safe_dump(
            {
                "schema": "2.0",
                "stages": {
                    f"evaluate@{TASK}": {
                        "cmd": "python -m pipelines.evaluate",
                        "deps": [
                            {
                                "path": "pipelines/evaluate.py",
                                "hash": "md5",
                                "md5": file_md5(code),
                                "size": code.stat().st_size,
                            }
                        ],
                        "outs": [{"path": f"reports/evaluate/{TASK}/items", "hash": "md5", "md5": "x.dir"}],
                    }
                },
            }
        )
    )
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    md = (reports / "REPORT.md").read_text()
    assert stale_listed(md) == set() and "**stale**" not in md
    code.write_text("# the evaluate stage, changed after the run\n")
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    md = (reports / "REPORT.md").read_text()
    assert stale_listed(md) == {f"evaluate@{TASK}"}
    rows = [line for line in md.splitlines() if line.startswith("| `transformer` |") and f"evaluate@{TASK}" in line]
    assert rows and all(f"**stale** (rerun evaluate@{TASK})" in r for r in rows)


def test_a_param_dvc_wrote_in_exponent_form_is_the_same_float(tmp_path):
    """DVC writes 3.0e-5 from params.yaml as 3e-05 in dvc.lock; YAML 1.1 reads that as a string, DVC as a float."""
    (tmp_path / "dvc.lock").write_text(
        "schema: '2.0'\nstages:\n  first:\n    cmd: echo\n    params:\n      params.yaml:\n        x: [3e-05, 1e3]\n"
    )
    (tmp_path / "params.yaml").write_text("x: [3.0e-5, 1.0e+3]\n")
    assert stale_stages(tmp_path) == {}
    (tmp_path / "params.yaml").write_text("x: [1.0e-4, 1.0e+3]\n")  # a real change still counts
    assert set(stale_stages(tmp_path)) == {"first"}


def _accuracy_claim():
    """A threshold claim on task t's test accuracy (model m), read from reports/claims."""
    from swarmlab.drive.report.claims import Claim

    decided_by = {"kind": "threshold", "task": "t", "model": "m", "metric": "test_accuracy", "op": ">=", "value": 0.5}
    return Claim("c", "000", "§1", "w", "test_accuracy", {}, "paper", decided_by)


def test_a_claims_result_is_stale_once_a_model_file_changes_after_it(tmp_path):
    """reports/claims is not a DVC output: its rows compare the code that dvc.lock lists for the result's stages
    with the commit that made it. Changing a model file after the result marks the row stale and names the command."""
    from swarmlab.drive.report.ledger import Ledger
    from swarmlab.drive.report.provenance import code_changes, in_history
    from swarmlab.drive.report.reruns import CLAIMS_TASK

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text("WIDTH = 8\n")
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "train.py").write_text("")
    deps = [{"path": "models", "md5": "x"}, {"path": "pipelines/train.py", "md5": "y"}, {"path": "data/t", "md5": "z"}]
    (tmp_path / "dvc.lock").write_text(
        yaml.safe_dump({"schema": "2.0", "stages": {"train@t": {"cmd": "c", "deps": deps}}})
    )
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "code")
    sha = git("rev-parse", "HEAD")
    reports = tmp_path / "reports" / "claims"
    (reports / "evaluate" / "t").mkdir(parents=True)
    entry = {"model": "m", "seed": 0, "test_accuracy": 0.9, "test_rows": 100, "git_commit": sha}
    (reports / "evaluate" / "t" / "metrics.json").write_text(json.dumps({"m-seed0": entry}))
    c = _accuracy_claim()

    def row(pieces=None):
        return Ledger(
            reports,
            profile="claims",
            source="reports/claims",
            rerun=CLAIMS_TASK,
            known=in_history(tmp_path),
            code_changes=code_changes(tmp_path),
            pieces=pieces,
        ).decide(c)

    assert row().stale == "" and row().stale_known
    (tmp_path / "models" / "net.py").write_text("WIDTH = 16\n")  # a model file changes after the result
    stale = row().stale
    assert stale == (
        f"no claims/dvc.lock entry for `task@t` (made before it was a DVC stage); code changed since {sha[:7]} "
        "(models): rerun `dvc repro claims/dvc.yaml:task@t`"
    )

    # once the piece is a DVC stage that ran (claims/dvc.lock records it), DVC's record decides, as for the pipeline
    from swarmlab.drive.report.provenance import locked_stages, path_md5, stale_stages

    lock = {
        "task@t": {
            "cmd": "python -m pipelines.claims task t",
            "deps": [
                {"path": "models", "md5": path_md5(tmp_path / "models")},
                {"path": "../shared/absent", "md5": "gone"},  # a dependency absent here (the datasets) is no evidence
            ],
        }
    }
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims" / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": lock}))

    def piece_row():
        return row((locked_stages(tmp_path, "claims/dvc.lock"), stale_stages(tmp_path, "claims/dvc.lock")))

    assert piece_row().stale == ""  # the lock's models are the tree's: current, whatever git says
    (tmp_path / "models" / "net.py").write_text("WIDTH = 32\n")
    assert piece_row().stale == (
        "stale since claims/dvc.lock (models): `dvc repro claims/dvc.yaml:task@t` reruns task@t"
    )


def test_a_piece_dvc_records_as_current_is_stale_when_its_runs_were_trained_before_its_code_changed(tmp_path):
    """A grid rerun through `dvc repro` alone resumes from every point its kept results mark done: DVC then records the
    piece as current while its numbers are the old code's. The row compares the commit each run was trained at with
    the code claims/dvc.lock lists for the piece, and says so; a dataset outside the work tree does not void the
    comparison (git refuses such a path)."""
    from swarmlab.drive.report.ledger import Ledger
    from swarmlab.drive.report.provenance import code_changes, in_history, locked_stages, path_md5

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    def commit(message):
        git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
        return git("rev-parse", "HEAD")

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text("WIDTH = 8\n")
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {}}))
    git("init", "-q")
    trained = commit("the code the runs were trained at")
    reports = tmp_path / "reports" / "claims"
    for stage in ("train", "evaluate"):
        (reports / stage / "t").mkdir(parents=True)
        entry = {"model": "m", "seed": 0, "test_accuracy": 0.9, "test_rows": 100, "git_commit": trained}
        (reports / stage / "t" / "metrics.json").write_text(json.dumps({"m-seed0": entry}))
    c = _accuracy_claim()

    def lock_now():  # the piece's lock entry as a rerun writes it: the tree's code, whatever its runs were trained at
        deps = [
            {"path": "models", "md5": path_md5(tmp_path / "models")},
            {"path": "../shared/datasets", "md5": "elsewhere"},
        ]
        lock = {"schema": "2.0", "stages": {"task@t": {"cmd": "python -m pipelines.claims task t", "deps": deps}}}
        (tmp_path / "claims").mkdir(exist_ok=True)
        (tmp_path / "claims" / "dvc.lock").write_text(yaml.safe_dump(lock))

    def row():
        return Ledger(
            reports,
            profile="claims",
            source="reports/claims",
            known=in_history(tmp_path),
            code_changes=code_changes(tmp_path),
            pieces=(locked_stages(tmp_path, "claims/dvc.lock"), {}),
            piece_changes=code_changes(tmp_path, "claims/dvc.lock"),
        ).decide(c)

    lock_now()
    commit("lock")
    assert row().stale == ""  # trained at the code the lock records
    (tmp_path / "models" / "net.py").write_text("WIDTH = 16\n")
    lock_now()  # the rerun kept the runs and rewrote the lock
    later = commit("a model change, and a rerun that trained nothing")
    assert later != trained
    assert row().stale == (
        f"claims/dvc.lock records `task@t` as current, but its runs were trained at {trained[:7]}, before changes to "
        "code it depends on (models): a rerun kept them; rerun `dvc repro claims/dvc.yaml:task@t`"
    )
