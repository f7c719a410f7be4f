"""`dvc exp run -S profile=smoke` end to end in a temporary copy of the repository, tracked in MLflow."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from swarmlab.drive.report.claims import load_claims
from tests.conftest import REPO_ROOT, SHARED_DATASETS

pytestmark = pytest.mark.slow


# who commits in a test's throwaway repository (CI's machine has no git identity)
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def copy_repo(dest: Path) -> Path:
    """The working tree's tracked and untracked-but-not-ignored files, as a fresh one-commit git repo."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    for name in filter(None, files):
        src = REPO_ROOT / name
        if src.is_file() and not name.startswith(("data/", "reports/")) and name != "dvc.lock":
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    env = {**os.environ, **GIT_IDENTITY}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "copy"]):
        subprocess.run(cmd, cwd=dest, check=True, env=env)
    return dest


def stage_env(db: Path) -> dict:
    """The environment of `dvc` run in a copy: its own MLflow store ``db``, this venv's python on PATH, no bars,
    and the copy as its own work folder."""
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{db}",
        "DVC_NO_ANALYTICS": "1",
        "SWARMLAB_PROGRESS": "0",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("SWARMLAB_WORKDIR", None)
    return env


# Its own limit, above CI's --timeout 1200: alone on a 2-core AVX2-only EPYC the `dvc exp run` took 979 s and the test
# about 1,190 s with ruamel.yaml's pure-Python parser, 726 s and about 830 s with its C parser (2026-11-28); beside the
# other xdist worker it runs slower, and it ran past 1200 s in CI once (2026-11-28).
@pytest.mark.timeout(2400)
def test_smoke_profile_through_dvc(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    db = tmp_path / "mlruns.db"
    env = stage_env(db)
    # the copy is a repository of its own: its evaluations append to its own reports/test_reads.jsonl, which its report
    # stage reads (a dependency in dvc.yaml), not to the tmp log the other tests use (tests/conftest.py)
    env.pop("SWARMLAB_TEST_READ_LOG", None)
    dvc = [sys.executable, "-m", "dvc"]
    proc = subprocess.run(
        [*dvc, "exp", "run", "-S", "profile=smoke", "-S", f"paths.datasets={SHARED_DATASETS}"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=2100,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sets = {
        "derive@clustering_direct",
        "derive@clustering_mog",
        "train@clustering_direct",
        "evaluate@clustering_direct",
        "train@clustering_mog",
        "evaluate@clustering_mog",
        "frontier@clustering_direct",
    }
    images = {
        f"{stage}@{key}" for stage in ("data", "train", "evaluate", "sample") for key in ("mnist", "fashion_mnist")
    }
    long_stages = {f"{stage}@{task}" for stage in ("derive", "train", "evaluate") for task in ("lra_text", "listops")}
    for stage in (
        "prepare",
        "augment",
        "tokenize",
        "train@imdb",
        "evaluate@imdb",
        *sorted(sets),
        *sorted(images),
        *sorted(long_stages),
        "paper_baselines",
        "summary",
        "report",
    ):
        assert f"Running stage '{stage}'" in proc.stdout, proc.stdout
    evaluation = json.loads((repo / "reports" / "evaluate" / "imdb" / "metrics.json").read_text())[
        "swarmformer_small-seed0"
    ]
    assert evaluation["test_rows"] == 400 and 0.0 <= evaluation["test_accuracy"] <= 1.0
    assert (
        evaluation["latency_ms_p95"] >= evaluation["latency_ms_p50"] > 0 and evaluation["throughput_samples_per_s"] > 0
    )
    assert sum(map(sum, evaluation["confusion_matrix"])) == 400
    training = json.loads((repo / "reports" / "train" / "imdb" / "metrics.json").read_text())["swarmformer_small-seed0"]
    assert training["evaluations"] == 2 and training["num_params"] == evaluation["num_params"]
    assert (repo / "reports" / "train" / "imdb" / "history" / "swarmformer_small-seed0.csv").is_file()
    assert (repo / "reports" / "evaluate" / "imdb" / "plots" / "confusion_swarmformer_small-seed0.png").is_file()
    assert (repo / "dvc.lock").is_file()
    for key in ("mnist", "fashion_mnist"):  # the image track (tasks/image_generation.py) at smoke size
        scored = json.loads((repo / "reports" / "evaluate" / key / "metrics.json").read_text())[
            "swarm_transformer_small-seed0"
        ]
        assert scored["test_rows"] == 100 and 0 < scored["test_bits_per_dim"] < 8.5
        assert scored["approximate_train_images"] is (key == "mnist")
        assert (repo / "reports" / "sample" / key / "swarm_transformer_small-seed0" / "samples.png").is_file()
    report = (
        repo / "reports" / "REPORT.md"
    ).read_text()  # the last stage: the ledger, then our runs beside the papers'
    assert "| `swarmformer_small-seed0` — ours |" in report and "#/experiments/" in report
    assert report.split("\n## ")[1].startswith("Claims ledger")  # the report opens with the ledger
    ledger = report.split("\n## Claims ledger")[1].split("\n### ")[0]  # the first screen's table
    rows = [r.split(" | ") for r in ledger.splitlines() if r.startswith("| `s0")]
    assert len(rows) == len(load_claims())
    numbered = [r for r in rows if r[2] != "—"]  # column "ours (95% interval)"
    assert numbered and all("[" in r[2] or r[2].endswith("(exact)") for r in numbered), numbered
    small = next(r for r in rows if r[0].startswith("| `s000-small-accuracy`"))
    assert small[3].split(" · ")[0] in ("**not supported at this budget**", "**inconclusive**", "**supported**")
    how = report.split("\n### How each claim was decided")[1].split("\n### ")[0]
    small_how = next(r for r in how.splitlines() if r.startswith("| `s000-small-accuracy` ("))
    assert "bootstrap" in small_how
    for key in ("lra_text", "listops", "imdb", "mnist", "clustering_mog"):  # per-item test scores for every run
        assert sorted(p.name for p in (repo / "reports" / "evaluate" / key / "items").glob("*.npz")), key
    assert (repo / "reports" / "report.html").is_file() and (
        repo / "reports" / "report" / "plots" / "curves" / "imdb"
    ).is_dir()

    # The default pipeline's outputs match its lock file (sweeps/dvc.yaml is a separate pipeline, not run here).
    status = subprocess.run([*dvc, "status", "dvc.yaml"], cwd=repo, env=env, capture_output=True, text=True)
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout + status.stderr
    # The README's headline view (#38): one row per task and model, whole on a 200-column terminal
    shown = subprocess.run(
        [*dvc, "metrics", "show", "reports/summary"],
        cwd=repo,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
    )
    lines = shown.stdout.splitlines()
    summary = json.loads((repo / "reports" / "summary.json").read_text())
    headlines = [f"reports/summary/{task}/{model}.json" for task, models in summary.items() for model in models]
    assert shown.returncode == 0 and max(map(len, lines)) <= 200, shown.stdout + shown.stderr
    assert sorted(line.split()[0] for line in lines[1:]) == sorted(headlines), shown.stdout
    assert lines[0].split() == ["Path", "hi", "lo", "metric", "seeds", "train_time_s", "value"], lines[0]

    # Each override the README documents marks exactly the stages that read it (checked before anything reruns).
    def stages_marked(edit) -> set[str]:
        original = (repo / "params.yaml").read_text()
        raw = yaml.safe_load(original)
        edit(raw)
        (repo / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        try:
            out = subprocess.run(
                [*dvc, "status", "--json", "dvc.yaml"], cwd=repo, env=env, capture_output=True, text=True
            )
            return set(json.loads(out.stdout or "{}"))
        finally:
            (repo / "params.yaml").write_text(original)

    everything = {
        "prepare",
        "augment",
        "tokenize",
        "train@imdb",
        "evaluate@imdb",
        "memory_scaling",
        *sets,
        *images,
        *long_stages,
        "paper_baselines",
        "summary",
        "report",
    }
    trained = {
        f"{stage}@{key}"
        for stage in ("train", "evaluate")
        for key in ("imdb", "clustering_direct", "clustering_mog", "lra_text", "listops")
    }
    trained_images = {s for s in images if not s.startswith("data@")}
    # the report reads the training settings (its budget lines) and the task sections
    assert stages_marked(lambda raw: raw["train"].update(lr=3.0e-4)) == trained | trained_images | {
        "report"
    }  # +train.lr=
    assert stages_marked(lambda raw: raw["defaults"]["sample"].update(num_samples=30)) == {
        "sample@mnist",
        "sample@fashion_mnist",
    }
    assert stages_marked(lambda raw: raw["defaults"]["tasks"]["mnist"]["options"].update(val_size=4000)) == {
        s for s in images if s.endswith("@mnist")
    } | {"summary", "report"}  # the summary reads the task sections (each task's headline metric)
    assert stages_marked(lambda raw: raw["augment"].update(enabled=False)) == {"augment"}  # -S augment.enabled=false
    assert stages_marked(lambda raw: raw.update(profile="cpu")) == everything  # -S profile=cpu
    assert stages_marked(lambda raw: raw["defaults"]["tasks"]["imdb"].update(models=["transformer"])) == {
        "train@imdb",
        "evaluate@imdb",
        "summary",
        "report",
    }
    assert stages_marked(lambda raw: raw["defaults"]["tasks"]["listops"]["options"].update(max_args=5)) == {
        "derive@listops",
        "train@listops",
        "evaluate@listops",
        "summary",
        "report",
    }
    for task in ("lra_text", "listops"):  # the long track: every model, the task's own metrics
        evaluation = json.loads((repo / "reports" / "evaluate" / task / "metrics.json").read_text())
        assert len(evaluation) == 5 and all({"test_macro_f1", "per_class_f1"} <= set(r) for r in evaluation.values())

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name("imdb")
    runs = client.search_runs([exp.experiment_id])
    assert [r.data.tags["run"] for r in runs] == ["swarmformer_small-seed0"]
    run = runs[0]
    # named after its DVC experiment (`-S profile=` has the name's profile part; paths.datasets is no setting)
    exp_name = run.data.tags["dvc_exp_name"]
    assert run.info.run_name == f"swarmformer_small-seed0 | smoke | exp {exp_name}", run.info.run_name
    assert run.data.tags["dvc_stage"] == "train@imdb" and run.data.tags["params_overrides"] == ""
    assert run.info.status == "FINISHED"
    assert {"val_accuracy", "train_loss", "test_accuracy", "latency_ms_p50", "peak_memory_mb"} <= set(run.data.metrics)
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")]  # optimizer steps
    assert len(steps) == 2 and steps[1] == 2 * steps[0] == training["steps"]
    assert run.data.params["model.d_model"] == "128" and run.data.params["profile"] == "smoke"
    assert run.data.tags["git_commit"] != "unknown" and run.data.tags["num_params"] == "4302850"
    # MLflow's own Source and Version columns (#38); an evaluation's settings are params, not one-value charts
    assert run.data.tags["mlflow.source.git.commit"] == run.data.tags["git_commit"]
    assert run.data.tags["mlflow.source.name"] == "pipelines/train.py"
    assert not {"seed", "num_params", "test_rows", "batch_size", "batches", "best_step", "backtracks"} & set(
        run.data.metrics
    )
    assert run.data.tags["best_step"] == str(training["best_step"]) and run.data.tags["backtracks"] == "0"
    assert run.data.params["evaluate.batches"] and run.data.params["evaluate.test_rows"]
    (data,) = run.inputs.dataset_inputs  # MLflow's Datasets column: the tokenized data, by its fingerprint (#38)
    assert data.dataset.name == "imdb" and data.dataset.digest
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"training_curve.png", "run_spec.yaml", "confusion_swarmformer_small-seed0.png"} <= artifacts
    # the best checkpoint is the run's MLflow model (#38), its inputs what the text models read
    (output,) = run.outputs.model_outputs
    import mlflow.pyfunc

    mlflow.set_tracking_uri(f"sqlite:///{db}")
    signature = mlflow.pyfunc.load_model(f"models:/{output.model_id}").metadata.signature
    assert signature.inputs.input_names() == ["input_ids", "attention_mask"] and output.step == training["best_step"]
    model_tags = client.get_logged_model(output.model_id).tags  # "Logged from" and "Created by": the run's, not Ray's
    assert model_tags["mlflow.source.name"] == "pipelines/train.py", model_tags
    assert model_tags["mlflow.user"] == run.data.tags["mlflow.user"]
    assert exp.artifact_location.startswith(tmp_path.as_uri())  # beside the database, not under the cwd
