"""The report stage: deterministic bytes, a report (not a crash) when inputs are missing, a self-contained page."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarmlab.drive.params import load_params
from pipelines.report import write_report
from swarmlab.errors import SwarmlabError
from tests.conftest import REPO_ROOT

TASK = "toy_counting"  # registered on every branch; the report must not care which task it is


def history(rows: int, offset: float) -> str:
    lines = [
        "evaluation,step,epoch,train_loss,train_accuracy,val_loss,val_accuracy,lr,train_time_s,train_samples_per_s,backtracks,event"
    ]
    for i in range(1, rows + 1):
        lines.append(
            f"{i},{100 * i},0,{0.7 - 0.1 * i + offset},{0.5 + 0.1 * i},{0.72 - 0.1 * i + offset},"
            f"{0.48 + 0.1 * i - offset},0.001,{1.5 * i},{2000 + i},0,{'backtrack' if i == 2 else ''}"
        )
    return "\n".join(lines) + "\n"


def fake_reports(work: Path, *, evaluate: bool = True) -> Path:
    """What train, evaluate and memory_scaling leave for one task with two models."""
    reports = work / "reports"
    train = reports / "train" / TASK
    (train / "history").mkdir(parents=True)
    summaries = {}
    for k, model in enumerate(["transformer", "longformer"]):
        (train / "history" / f"{model}.csv").write_text(history(3, 0.02 * k))
        summaries[model] = {
            "best_step": 300,
            "best_epoch": 0,
            "steps": 300,
            "evaluations": 3,
            "stopped": "max_steps",
            "backtracks": 0,
            "num_params": 10_000 + 5_000 * k,
            "train_time_s": 4.5,
            "train_samples_per_s": 2003.0,
            "bf16_autocast": False,
            "val_accuracy": 0.78 - 0.02 * k,
            "val_loss": 0.42 + 0.02 * k,
        }
    (train / "metrics.json").write_text(json.dumps(summaries, indent=2))
    if evaluate:
        ev = reports / "evaluate" / TASK
        (ev / "plots").mkdir(parents=True)
        from swarmlab.plots import confusion_matrix

        results = {}
        for k, model in enumerate(["transformer", "longformer"]):
            cm = [[100 - 10 * k, 28 + 10 * k], [20, 108]]
            confusion_matrix(cm, ["0", "1"], ev / "plots" / f"confusion_{model}.png", model)
            results[model] = {
                "test_accuracy": (cm[0][0] + cm[1][1]) / 256,
                "test_loss": 0.45,
                "latency_ms_mean": 3.0,
                "latency_ms_p50": 2.9,
                "latency_ms_p95": 3.4,
                "throughput_samples_per_s": 9000.0,
                "batch_size": 128,
                "peak_memory_mb": 400.0,
                "peak_memory_kind": "process_peak_rss",
                "device": "cpu",
                "bf16_autocast": False,
                "num_params": 10_000 + 5_000 * k,
                "test_rows": 256,
                "confusion_matrix": cm,
                "git_commit": "0123456789abcdef0123456789abcdef01234567",
            }
        (ev / "metrics.json").write_text(json.dumps(results, indent=2))
    ms = reports / "memory_scaling"
    ms.mkdir(parents=True)
    (ms / "results.json").write_text(
        json.dumps(
            {
                "environment": {"device": "cpu", "git_commit": "abc"},
                "points": [
                    {"model": "transformer", "tokens": 100000, "status": "ok", "increment_bytes": 5e8, "time_s": 100.0},
                    {
                        "model": "swarmformer_small cluster_size=8",
                        "tokens": 100000,
                        "status": "ok",
                        "increment_bytes": 2.9e8,
                        "time_s": 5.0,
                    },
                ],
            }
        )
    )
    (ms / "table.md").write_text(
        "| model | N=100000 |\n|---|---:|\n| transformer | 0.5 GB |\n\nmemory: goal met\nspeed: goal missed\n"
    )
    return reports


def tiny_store(uri: str) -> str:
    """A store with the papers' first rows and one training run of the fake task; returns that run's id."""
    from mlflow.tracking import MlflowClient

    from swarmlab.tracking import MlflowTracker
    from swarmlab.drive.report.baseline_runs import log_baselines
    from swarmlab.drive.report.baselines import load_baselines

    sources, entries = load_baselines()
    log_baselines(sources, entries[:2], uri)
    tracker = MlflowTracker(TASK, "transformer-seed0", uri=uri, tags={"git_commit": "feedface" * 5})
    tracker.log_metrics({"val_accuracy": 0.78})
    tracker.finish()
    assert MlflowClient(uri).get_run(tracker.run_id).info.status == "FINISHED"
    return tracker.run_id


def report_process(work: Path, uri: str, hashseed: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SWARMLAB_WORKDIR": str(work), "MLFLOW_TRACKING_URI": uri, "PYTHONHASHSEED": hashseed}
    return subprocess.run(
        [sys.executable, "-m", "pipelines.report", "--profile", "smoke"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_report(work: Path, uri: str, hashseed: str) -> dict[str, bytes]:
    proc = report_process(work, uri, hashseed)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return snapshot(work / "reports")


def snapshot(reports: Path) -> dict[str, bytes]:
    files = [reports / "REPORT.md", reports / "report.html"] + sorted((reports / "report").rglob("*"))
    return {str(p.relative_to(reports)): p.read_bytes() for p in files if p.is_file()}


def test_the_report_is_byte_identical_when_rerun_in_process(tmp_path):
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    first = snapshot(reports)
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    assert first == snapshot(reports)
    # without the store the report claims no run names: the commit and the command, and where the runs would be
    md = first["REPORT.md"].decode()
    assert "Every number of ours names the MLflow run" not in md
    assert "names the git commit and the command that made it; the MLflow runs' ids and links come from" in md
    assert sum(name.endswith(".png") for name in first) == 2  # curves and score-vs-parameters of the one task


@pytest.mark.slow
def test_the_report_is_byte_identical_when_rerun(tmp_path):
    """Two processes with different string-hash seeds, with an MLflow store: the same bytes, and our run linked."""
    work = tmp_path / "work"
    fake_reports(work)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    run_id = tiny_store(uri)
    first = run_report(work, uri, "1")
    second = run_report(work, uri, "2")  # another process, another string-hash order
    assert sorted(first) == sorted(second)
    for name in first:
        assert first[name] == second[name], f"{name} differs between two runs on the same inputs"
    md = first["REPORT.md"].decode()
    assert "#/experiments/" in md and run_id[:8] in md, "our run's MLflow link is missing"
    assert "Every number of ours names the MLflow run that produced it" in md
    assert (
        "report/figures/curves_toy_counting.png" in md
        and "report/plots/confusion/toy_counting/transformer.csv" in first
    )
    for name, data in first.items():
        if name.endswith(".png"):
            assert b"Software" not in data and b"matplotlib" not in data.lower(), f"{name} carries metadata"
    # a store that cannot be read: one line, in seconds, and the report with its links is kept (issue 39)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    (tmp_path / "garbage.db").write_bytes(b"this is not a database" * 100)
    for bad in (f"http://127.0.0.1:{closed}", f"sqlite:///{tmp_path / 'garbage.db'}"):
        start = time.monotonic()
        proc = report_process(work, bad, "1")
        ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
        assert proc.returncode == 2 and len(ours) == 1 and "--no-mlflow" in ours[0], (bad, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and time.monotonic() - start < 60, bad
        assert snapshot(work / "reports") == first, f"{bad}: the report was rewritten without its store"


def test_a_run_id_the_committed_summary_records_is_cited_not_replaced(tmp_path, monkeypatch):
    """A checkout without the work folder (the runs were trained in another clone): the id the committed training
    summary records is shown, and saying why it has no link; a store that lacks it never links another run of the
    same key in its place (that run did not make these numbers)."""
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    path = reports / "train" / TASK / "metrics.json"
    summaries = json.loads(path.read_text())
    recorded = "0123456789abcdef0123456789abcdef"
    summaries["transformer"]["mlflow_run_id"] = recorded
    path.write_text(json.dumps(summaries))

    def rows() -> dict[str, str]:
        md = (reports / "REPORT.md").read_text()
        found = {}
        for model in ("transformer", "longformer"):
            lines = [
                ln for ln in md.splitlines() if ln.startswith(f"| `{model}`") and f"dvc repro evaluate@{TASK}`" in ln
            ]
            assert lines, f"no provenance row for {model}"
            found[model] = lines[0]
        return found

    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    without = rows()
    assert "run `01234567` (no store read here)" in without["transformer"]
    assert "no MLflow run" in without["longformer"] and "01234567" not in without["longformer"]

    uri = f"sqlite:///{tmp_path / 'store.db'}"
    other = tiny_store(uri)  # a finished run of the key transformer-seed0, not the recorded one
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=True)
    stored = rows()
    assert "run `01234567` (not in this store)" in stored["transformer"]
    assert other[:8] not in stored["transformer"]


def test_missing_inputs_give_a_report_that_says_what_is_missing(tmp_path):
    params = load_params(profile="smoke")
    reports = tmp_path / "reports"
    result = write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)  # nothing at all
    md = (reports / "REPORT.md").read_text()
    assert "no `reports/train/imdb/metrics.json` (`dvc repro train@imdb`)" in md
    assert "Not run yet: `dvc repro memory_scaling`" in md
    assert "`clustering_direct`" in md and "`mnist`" in md, "tracks that have not landed are listed, not dropped"
    assert "MLflow store: not read" in md
    assert result["missing"] and (reports / "report.html").is_file()

    fake_reports(tmp_path, evaluate=False)  # a task trained but not evaluated, and a damaged file
    (reports / "augment").mkdir()
    (reports / "augment" / "metrics.json").write_text("{not json")
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    md = (reports / "REPORT.md").read_text()
    assert f"no `reports/evaluate/{TASK}/metrics.json` (`dvc repro evaluate@{TASK}`)" in md
    assert f"no `reports/train/{TASK}/metrics.json`" not in md
    assert "| `transformer` | 10,000 | 0.7800 |" in md  # the cross-family row of what exists


def test_the_html_page_is_self_contained(tmp_path):
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    page = (reports / "report.html").read_text()
    assert "<script" not in page.lower() and "<link" not in page.lower() and "@import" not in page
    assert not re.search(r"url\(", page), "CSS must not fetch anything"
    sources = re.findall(r'\bsrc="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    for m in re.finditer(r'(\w+)="(https?://[^"]*)"', page):  # only links a reader clicks may point elsewhere
        before = page[: m.start()]
        assert m.group(1) == "href" and before.rfind("<a ") > before.rfind("<"), (
            f"external URL outside a link: {m.group(0)}"
        )
    assert "swarmlab report" in page and page.count("<img") >= 3


def test_the_dvc_plot_data_is_in_long_form(tmp_path):
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    confusion = (reports / "report" / "plots" / "confusion" / TASK / "transformer.csv").read_text().splitlines()
    assert confusion[0] == "actual,predicted" and len(confusion) == 1 + 256
    assert confusion.count("0,1") == 28 and confusion.count("1,0") == 20
    curves = (reports / "report" / "plots" / "curves" / TASK / "longformer.csv").read_text().splitlines()
    assert curves[0] == "step,epoch,train_loss,val_loss,val_monitored,monitored" and curves[1].startswith("100,0,")


def test_dvc_yaml_runs_the_report_last_and_plots_its_data():
    import yaml

    dvc = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())
    assert list(dvc["stages"])[-1] == "report"
    deps = dvc["stages"]["report"]["deps"]
    assert {"reports/train", "reports/evaluate", "reports/paper_baselines/runs.json"} <= set(deps)
    plots = {next(iter(p)): p[next(iter(p))] for p in dvc["plots"]}
    assert plots["reports/report/plots/confusion"]["template"] == "confusion"
    assert "val_loss" in plots["reports/report/plots/curves"]["y"]


def test_a_run_is_set_only_against_the_paper_rows_its_config_matches(tmp_path):
    """Explicit mapping, no closest row: ISAB with 32 inducing points and a PMA head is compared with the ISAB (32) + PMA
    row only; SWARM 768-20-1 with mean pooling with the (768-20-1) pooling row only; a disagreement needs our 95%
    interval (from per-item scores) outside the paper's value ± its stated noise."""
    import copy

    import numpy as np

    from swarmlab.drive.report.testsplit import write_items

    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"]["clustering_mog"]["model_overrides"] = {
        "swarm": {"head": "mean", "dim_hidden": 768, "n_iter": 20},
        "set_transformer_isab": {"head": "pma", "dim_hidden": 128, "num_inds": 32, "num_layers": 3},
    }
    reports = tmp_path / "reports"
    rng = np.random.default_rng(0)
    loglik = {
        "swarm": -1.5065 + 0.001 * rng.standard_normal(400),
        "set_transformer_isab": -2.0 + 0.01 * rng.standard_normal(400),
    }
    ev = {
        f"{m}-seed0": {
            "model": m,
            "seed": 0,
            "test_loss": float(-v.mean()),
            "test_loglik": float(v.mean()),
            "test_rows": 400,
        }
        for m, v in loglik.items()
    }
    tr = {f"{m}-seed0": {"model": m, "seed": 0, "val_loss": 1.6, "num_params": 1000} for m in loglik}
    for stage, metrics in (("train", tr), ("evaluate", ev)):
        (reports / stage / "clustering_mog").mkdir(parents=True)
        (reports / stage / "clustering_mog" / "metrics.json").write_text(json.dumps(metrics))

    class Meter:
        def __init__(self, v):
            self.v = v

        def item_scores(self):
            return {"loglik": self.v, "loss": -self.v}

    for m, v in loglik.items():
        write_items(reports / "evaluate" / "clustering_mog", f"{m}-seed0", Meter(v), [0.01])
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    md = (reports / "REPORT.md").read_text()
    table = md.split("#### Paper 003 (Vollgraf, SWARM mappings): Table 3")[1].split("\n#")[0]
    isab16 = next(r for r in table.splitlines() if r.startswith("| Set Transformer ISAB (16) + PMA — paper"))
    isab32 = next(r for r in table.splitlines() if r.startswith("| Set Transformer ISAB (32) + PMA — paper"))
    assert "no matching run" in isab16 and "`set_transformer_isab-seed0`" in isab32
    swarm = next(r for r in table.splitlines() if r.startswith("| `swarm-seed0` — ours"))
    assert "`seed003/table3/swarm-768-20-1-pooling`" in swarm and "pma" not in swarm and "[" in swarm
    section = md.split("## Where we disagree")[1].split("\n## ")[0]
    rows = [r for r in section.splitlines() if r.startswith("| `clustering_mog`")]
    assert len(rows) == 2, rows  # loss and -loglik count once per row
    assert any("Set Transformer ISAB (32) + PMA" in r for r in rows) and not any("(16)" in r for r in rows)
    assert any("SWARM + pooling (768-20-1)" in r and "± 0.0053 (stated)" in r for r in rows)


@pytest.mark.parametrize("eval_name", ["eval_metrics.json", "evaluate_metrics.json"])
def test_side_runs_show_their_test_metric_under_either_file_name(tmp_path, eval_name):
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    side = reports / "side" / "gpu_run" / TASK
    side.mkdir(parents=True)
    (side.parent / "README.md").write_text("# a side run\n")
    (side / "train_metrics.json").write_text(json.dumps({"hsw": {"num_params": 123, "val_accuracy": 0.6420}}))
    (side / eval_name).write_text(json.dumps({"hsw": {"test_accuracy": 0.6357, "git_commit": "feedface" * 5}}))
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    row = next(line for line in (reports / "REPORT.md").read_text().splitlines() if line.startswith("| `hsw` |"))
    assert "0.6420" in row and "0.6357" in row and "feedfac" in row


def test_the_budget_line_names_per_model_training_settings(tmp_path):
    import copy

    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"][TASK]["train"] = {**params["tasks"][TASK]["train"], "transformer": {"lr": 1e-4}}
    reports = fake_reports(tmp_path)
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    line = next(
        x for x in (reports / "REPORT.md").read_text().splitlines() if x.startswith("Budget") and "`transformer`" in x
    )
    assert line.rstrip(".").endswith("`transformer`: lr 0.0001")


def test_a_task_the_profile_skips_is_reported_with_its_reason(tmp_path):
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    for stage in ("train", "evaluate"):
        (reports / stage / "listops").mkdir(parents=True)
        (reports / stage / "listops" / "metrics.json").write_text(json.dumps({"skipped": "needs the `claims` profile"}))
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    md = (reports / "REPORT.md").read_text()
    assert "`listops`: skipped by profile `smoke`: needs the `claims` profile" in md
    rows = [r for r in md.splitlines() if r.startswith("| `s002-beats-longformer-listops`")]
    first, how = rows[0], rows[1]  # the first screen's table, then "How each claim was decided"
    assert "**not testable here**" in first and "profile `smoke` skips `listops`: needs the `claims` profile" in how


def grid_results(task: str, points: dict[str, list[float]]) -> dict:
    """An ablation grid's results.json: per point label, one train and evaluate entry per seed's test accuracy."""
    entries = []
    for label, accs in points.items():
        runs = {f"transformer-seed{s}": {"model": "transformer", "seed": s} for s in range(len(accs))}
        entries.append(
            {
                "label": label,
                "point": label,
                "status": "ok",
                "model": "transformer",
                "train": {
                    k: {**v, "val_accuracy": 0.7, "num_params": 100, "stopped": "max_steps"} for k, v in runs.items()
                },
                "evaluate": {
                    k: {**v, "test_accuracy": a, "latency_ms_p50": 10.0 + s, "peak_memory_mb": 500.0 + 100 * s}
                    for s, (k, v) in enumerate(runs.items())
                    for a in [accs[s]]
                },
            }
        )
    return {"task": task, "profile": "claims", "monitor": "accuracy", "command": "ablate", "points": entries}


def test_the_ablations_section_shows_the_claims_profile_grids_with_seeds_pooled(tmp_path):
    """A grid run by scripts/claims.sh (reports/claims/ablations/) is shown, its seeds pooled per point into a mean
    with its t-interval; a grid run nowhere says both commands."""
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    (reports / "claims" / "ablations" / "t_local").mkdir(parents=True)
    (reports / "claims" / "ablations" / "t_local" / "results.json").write_text(
        json.dumps(grid_results("imdb", {"t_local=1": [0.70, 0.72, 0.74], "t_local=3": [0.69, 0.71, 0.73]}))
    )
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    md = (reports / "REPORT.md").read_text()
    section = md[md.index("## Ablations") :]
    t_local = section[section.index("### `t_local`") : section.index("### `cluster_size`")]
    assert "From reports/claims" in t_local and "Not run yet" not in t_local
    # mean 0.72, t(0.975, 2) * 0.02 / sqrt(3) = 0.0497: [0.6703, 0.7697]; latency: mean of 10, 11, 12 ms; peak
    # memory: mean of 500, 600, 700 MB
    row = next(r for r in t_local.splitlines() if r.startswith("| t_local=1 "))
    assert "| 3 |" in row and "0.7200 [0.6703, 0.7697] (0.7000, 0.7200, 0.7400)" in row and "| 11 | 600 |" in row
    assert "report/figures/ablation_claims_t_local.png" in t_local
    cluster = section[section.index("### `cluster_size`") :]
    assert "Not run yet: `bash scripts/claims.sh grid cluster_size`" in cluster.split("###")[1]


DAMAGE = {
    "garbage": lambda path: path.write_text('{"transformer-seed0": {"test_acc'),
    "not an object": lambda path: path.write_text("[1, 2]\n"),
    "deleted": lambda path: path.unlink(),
}


@pytest.mark.parametrize("stage", ["train", "evaluate"])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_metrics_file_stops_summary_and_report_leaving_theirs(tmp_path, stage, damage):
    """A metrics.json that is garbage or deleted was read as "no results": the report and summary.json silently
    dropped the task (or summary raised a traceback). Now: one line naming the file and the stage that writes it,
    and the previous REPORT.md and summary.json stay as they were."""
    from pipelines.summary import summary

    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    summary(params, reports)
    before = snapshot(reports) | {"summary.json": (reports / "summary.json").read_bytes()}
    path = reports / stage / TASK / "metrics.json"
    DAMAGE[damage](path)
    for build in (
        lambda: write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False),
        lambda: summary(params, reports),
    ):
        with pytest.raises(SwarmlabError) as info:
            build()
        msg = str(info.value)
        assert "\n" not in msg and msg.startswith(str(path))
        assert f"the {stage} stage writes it" in msg or f"not the {stage} stage's object" in msg
        assert f"rerun `dvc repro {stage}@{TASK}`" in msg
    assert snapshot(reports) | {"summary.json": (reports / "summary.json").read_bytes()} == before


@pytest.mark.slow
def test_summary_cli_on_a_garbage_metrics_file_is_one_line_exit_2(tmp_path):
    import os
    import subprocess
    import sys

    from swarmlab.paths import REPO_ROOT

    reports = fake_reports(tmp_path)
    (reports / "evaluate" / TASK / "metrics.json").write_text("garbage")
    (reports / "summary.json").write_text("{}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.summary", "--profile", "smoke"],
        cwd=REPO_ROOT,
        env={**os.environ, "SWARMLAB_WORKDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {reports / 'evaluate' / TASK / 'metrics.json'} is not JSON")
    assert f"rerun `dvc repro evaluate@{TASK}`" in lines[0]
    assert (reports / "summary.json").read_text() == "{}\n"


def sweeps_section(params: dict, reports: Path, tmp_path: Path) -> tuple[str, str]:
    """The report written from ``reports``, and its section on the sweeps."""
    write_report(params, reports=reports, outputs=tmp_path / "outputs", mlflow=False)
    md = (reports / "REPORT.md").read_text()
    section = md[md.index("## Sweeps: how the searched settings were chosen") :]
    return md, section[: section.index("\n## ", 10)]


def fake_sweep(reports: Path, task: str = "lra_text") -> None:
    """What claims/dvc.yaml sweep@<task> keeps (reports/claims/sweep/<task>/): a choice for hsw_small, none for
    longformer (every trial at chance), and every trial in summary.csv; and the task's runs, hsw_small's trained with
    the choice, longformer's before the sweep (no tuning recorded: pinned)."""
    folder = reports / "claims" / "sweep" / task
    folder.mkdir(parents=True)
    record = {
        "task": task,
        "profile": "claims",
        "tuning": "sweep",
        "sweep_id": "abc123",
        "metric": "best_val_accuracy",
        "mode": "max",
        "budget": {"time_budget_s": 240.0},
        "chance": [0.5, 1000],
        "models": {
            "hsw_small": {
                "trials": 3,
                "score": 0.61,
                "learned": True,
                "train": {"lr": 0.000123, "weight_decay": 0.01},
                "model_overrides": {"window": 128},
            },
            "longformer": {
                "trials": 3,
                "score": 0.5,
                "learned": False,
                "why": "did not learn at this budget: best best_val_accuracy 0.5000; chance 0.5000 over 1000 rows",
            },
        },
    }
    (folder / "chosen.json").write_text(json.dumps(record))
    (folder / "summary.md").write_text("# Sweep of lra_text\n")
    rows = [
        "rank,model,trial,status,val_accuracy,num_params,best_step,best_epoch,evaluations,params,mlflow_run_id,error"
    ]
    for i, (model, lr, score) in enumerate(
        [("hsw_small", 0.000123, 0.61), ("hsw_small", 0.001, 0.55), ("hsw_small", 2e-5, 0.52)]
        + [("longformer", lr, 0.5) for lr in (1e-5, 1e-4, 1e-3)]
    ):
        rows.append(f"{i + 1},{model},t{i},ok,{score},1000,100,0,3,lr={lr:.3g} weight_decay=0.01 window=128,r{i},")
    (folder / "summary.csv").write_text("\n".join(rows) + "\n")
    train = reports / "claims" / "train" / task
    train.mkdir(parents=True)
    runs = {
        "hsw_small-seed0": {"model": "hsw_small", "seed": 0, "tuning": "sweep abc123: 3 trials of 240 s, chosen"},
        "hsw_small-seed1": {"model": "hsw_small", "seed": 1, "tuning": "sweep abc123: 3 trials of 240 s, chosen"},
        "longformer-seed0": {"model": "longformer", "seed": 0},
    }
    (train / "metrics.json").write_text(json.dumps(runs))


def test_the_sweeps_section_shows_each_choice_and_whether_the_decisive_runs_trained_it(tmp_path):
    """Issue 37 item 3: a claims sweep (reports/claims/sweep/<task>/) is a section row per model: its trials, best
    validation score, what was chosen or that it did not learn (never a tie-break), and whether the task's runs
    recorded that sweep as their tuning; with a figure of every trial against its learning rate."""
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    fake_sweep(reports)
    md, section = sweeps_section(params, reports, tmp_path)
    assert "### `lra_text` (reports/claims/sweep (the `claims` profile))" in section
    assert "| model | trials | best val_accuracy | learned | settings chosen | decisive runs |" in section
    assert "`bash scripts/claims.sh sweep lra_text`" in section and "trials of 240 net s" in section
    hsw = next(r for r in section.splitlines() if r.startswith("| `hsw_small` "))
    assert "| 3 | 0.6100 | yes | lr=0.000123, weight_decay=0.01, window=128 | yes (2 runs) |" in hsw
    longformer = next(r for r in section.splitlines() if r.startswith("| `longformer` "))
    assert "| **no** | did not learn at this budget: best val_accuracy 0.5000; chance" in longformer
    assert "trains its pinned settings" in longformer
    assert "not yet: 1 of 1 runs trained pinned" in longformer
    assert "report/figures/sweep_claims_lra_text.png" in section
    assert (reports / "report" / "figures" / "sweep_claims_lra_text.png").is_file()
    assert "[claims/sweep/lra_text/summary.md](claims/sweep/lra_text/summary.md)" in section
    assert "`longformer` did not learn at the sweep's budget" in md  # and What is missing says so


def test_the_sweeps_section_lists_no_pinned_task(tmp_path):
    """A pinned task's record (the sweep stage under `tuning: pinned`) searched nothing: no row, and the section
    says how to sweep one."""
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    (reports / "sweep" / TASK).mkdir(parents=True)
    (reports / "sweep" / TASK / "chosen.json").write_text(
        json.dumps({"task": TASK, "profile": "smoke", "tuning": "pinned", "models": {}})
    )
    md, section = sweeps_section(params, reports, tmp_path)
    assert "None yet: every task's settings are pinned" in section and "###" not in section


def test_a_side_record_sweep_is_shown_as_not_carried(tmp_path):
    """A sweep kept under reports/side/<run>/sweep/<task>/ (one that failed a condition of its protocol, say) is
    listed with its choice, but as read by no run; and its models that did not learn are not a missing input."""
    params = load_params(profile="smoke")
    reports = fake_reports(tmp_path)
    fake_sweep(reports)
    side = reports / "side" / "sweep_avx2"
    (side / "sweep").mkdir(parents=True)
    (reports / "claims" / "sweep" / "lra_text").rename(side / "sweep" / "lra_text")
    (side / "README.md").write_text("# A sweep on a slower machine\n")
    md, section = sweeps_section(params, reports, tmp_path)
    assert "### `lra_text` (side record `sweep_avx2`, not carried: its README says why)" in section
    assert "A side record: no run reads this choice." in section
    rows = [r for r in section.splitlines() if r.startswith("| `")]
    assert len(rows) == 2 and all(r.endswith("| not carried (side record) |") for r in rows)
    assert "trains its pinned settings" not in section  # no run reads a side record
    assert "report/figures/sweep_side_sweep_avx2_lra_text.png" in section
    assert "did not learn at the sweep's budget" not in md
