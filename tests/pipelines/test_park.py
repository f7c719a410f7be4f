"""scripts/park.py: a claims task piece's finished runs, and a grid piece's finished points, parked in git and
restored in a fresh clone, only where the code that made them and the CPU class are the same; an unfinished or
tampered run is never parked or restored, and a grid's unfinished points run again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import park
from swarmlab.drive.records import CODE_DIRS, tree_code_hash
from swarmlab.errors import SwarmlabError
from swarmlab.integrity import file_sha256

TASK = "clustering_direct"


def _checkout(root: Path) -> Path:
    for name in CODE_DIRS:
        (root / name).mkdir(parents=True)
        (root / name / "code.py").write_text(f"# {name}\n")
    (root / "params.yaml").write_text("profile: cpu\n")
    return root


def _run(repo: Path, name: str, *, sealed: bool = True, hidden: bool = False) -> Path:
    folder = park.runs_root(repo, TASK) / (f".{name}.run" if hidden else name)
    folder.mkdir(parents=True)
    (folder / "best.pt").write_bytes(name.encode() * 10)
    for extra in ("summary.json", "history.csv", "last.pt", "best_optimizer.pt"):
        (folder / extra).write_text("{}" if extra.endswith("json") else "x")
    record = {"run_id": f"mlflow-{name}", "model": name.split("-")[0], "fingerprint": "f"}
    if sealed:
        record["best_sha256"] = file_sha256(folder / "best.pt")
    (folder / "run.json").write_text(json.dumps(record))
    return folder


def test_finished_runs_are_parked_and_restored_in_a_fresh_checkout(tmp_path):
    a = _checkout(tmp_path / "a")
    _run(a, "swarm-seed0")
    _run(a, "lstm-seed0")
    _run(a, "isab-seed0", hidden=True)  # in progress: starts again
    _run(a, "sab-seed0", sealed=False)  # no sealed checkpoint: not finished
    dest = park.save(TASK, a)
    manifest = json.loads((dest / "manifest.json").read_text())
    assert sorted(manifest["runs"]) == ["lstm-seed0", "swarm-seed0"]
    assert manifest["runs"]["swarm-seed0"]["mlflow_run_id"] == "mlflow-swarm-seed0"
    assert manifest["code_hash"] == tree_code_hash(a) and manifest["cpu_class"] == park.cpu_class()
    assert not (dest / "swarm-seed0" / "last.pt").exists() and not (dest / "swarm-seed0" / "best_optimizer.pt").exists()
    assert "run_id" not in json.loads((dest / "swarm-seed0" / "run.json").read_text())

    b = _checkout(tmp_path / "b")  # a fresh clone: the same code, nothing in its work folder but one run
    _run(b, "lstm-seed0")
    (b / "claims").mkdir()
    park.shutil.copytree(dest, b / "claims" / "parked" / TASK)
    assert park.restore(TASK, b) == ["swarm-seed0"]  # a run already there is left alone
    restored = park.runs_root(b, TASK) / "swarm-seed0"
    assert (restored / "best.pt").read_bytes() == b"swarm-seed0" * 10
    assert park.finished_runs(park.runs_root(b, TASK)) == [park.runs_root(b, TASK) / "lstm-seed0", restored]
    assert park.restore(TASK, b) == []  # twice: nothing more
    assert park.drop(TASK, b) == b / "claims" / "parked" / TASK and not (b / "claims" / "parked" / TASK).exists()
    assert park.drop(TASK, b) is None and (restored / "best.pt").is_file()  # the restored runs stay


def test_restore_refuses_other_code_another_cpu_class_and_a_changed_checkpoint(tmp_path, monkeypatch):
    a = _checkout(tmp_path / "a")
    _run(a, "swarm-seed0")
    dest = park.save(TASK, a)

    b = _checkout(tmp_path / "b")
    (b / "models" / "code.py").write_text("# changed\n")
    with pytest.raises(SwarmlabError, match="runs parked in .* made at commit .* whose code differs"):
        park.restore(TASK, b, parked_root=dest.parent)
    assert not park.runs_root(b, TASK).exists()  # refused before copying anything

    c = _checkout(tmp_path / "c")
    monkeypatch.setattr(park, "cpu_class", lambda: ["avx2", "avx512_bf16", "avx512f"])
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["cpu_class"] = ["avx2"]
    (dest / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SwarmlabError, match="the two classes do not train alike"):
        park.restore(TASK, c, parked_root=dest.parent)
    assert not park.runs_root(c, TASK).exists()

    (dest / "swarm-seed0" / "best.pt").write_bytes(b"tampered")
    with pytest.raises(SwarmlabError, match="not the checkpoint its run.json sealed"):
        park.restore(TASK, c, parked_root=dest.parent, any_cpu=True)


def test_the_command_line_is_one_line_on_bad_input(tmp_path):
    a = _checkout(tmp_path / "a")
    script = Path(park.__file__)
    proc = subprocess.run(
        [sys.executable, str(script), "save", TASK, "--repo", str(a)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: no finished run of clustering_direct"), proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    proc = subprocess.run(
        [sys.executable, str(script), "restore", TASK, "--repo", str(a)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and not proc.stderr  # nothing parked: nothing to do
    proc = subprocess.run(
        [sys.executable, str(script), "save", "swarm_head", "--grid", "--evaluate", "--repo", str(a)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        proc.returncode == 2
        and proc.stderr.strip() == "error: --evaluate is for save <task> (a grid parks no checkpoints)"
    )


def test_a_save_bigger_than_max_mb_is_refused_before_anything_is_written(tmp_path):
    """Parked files stay in git's history for good: a save over --max-mb is one line, and writes nothing."""
    a = _checkout(tmp_path / "a")
    for name in ("hsw_small-seed0", "hsw_small-seed1"):
        folder = _run(a, name)
        (folder / "best.pt").write_bytes(os.urandom(600 * 1024))  # 0.6 MB each, resealed
        record = json.loads((folder / "run.json").read_text())
        record["best_sha256"] = file_sha256(folder / "best.pt")
        (folder / "run.json").write_text(json.dumps(record))
    script = Path(park.__file__)

    def save(max_mb: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, str(script), "save", TASK, "--repo", str(a), "--max-mb", max_mb]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    proc = save("1")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "would add 1 MB" in proc.stderr and "hsw_small-seed" in proc.stderr and "--max-mb 1" in proc.stderr
    assert not (a / park.PARKED).exists()
    proc = save("2")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (a / park.PARKED / TASK).iterdir()) == [
        "hsw_small-seed0",
        "hsw_small-seed1",
        park.MANIFEST,
    ]


def _two_clones(tmp_path: Path):
    """Two checkouts of this repository's code and params (``a`` runs a piece, ``b`` is the next session's fresh
    clone), and a runner of commands in one, each clone with its own MLflow store and log of test reads."""
    from tests.conftest import REPO_ROOT, SHARED_DATASETS

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SWARMLAB_")},
        "SWARMLAB_PROGRESS": "0",
        "SWARMLAB_DATASETS": str(SHARED_DATASETS),
    }
    clones = []
    for name in ("a", "b"):
        repo = tmp_path / name
        for part in ("scripts", *CODE_DIRS):
            park.shutil.copytree(REPO_ROOT / part, repo / part, ignore=park.shutil.ignore_patterns("__pycache__"))
        park.shutil.copy(REPO_ROOT / "params.yaml", repo / "params.yaml")
        clones.append(repo)

    def run(cmd, cwd):
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env={**env, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / cwd.name}.db"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return proc.stdout + proc.stderr

    return *clones, run


PIECE = [sys.executable, "-m", "pipelines.claims", "--profile", "smoke", "task", TASK]


@pytest.mark.slow
def test_train_keeps_the_restored_runs_and_evaluate_reads_them(tmp_path):
    a, b, run = _two_clones(tmp_path)
    run(PIECE, a)
    run([sys.executable, "scripts/park.py", "save", TASK], a)
    park.shutil.copytree(a / "claims" / "parked", b / "claims" / "parked")
    out = run([sys.executable, "scripts/park.py", "restore", TASK], b)
    out += run(PIECE, b)  # a fresh clone: a new MLflow store, which knows none of a's runs
    models = json.loads((a / "reports" / "claims" / "train" / TASK / "metrics.json").read_text())
    assert out.count("finished with the same settings, code and data") == len(models), out
    assert "start" not in "".join(line for line in out.splitlines() if line.startswith("[train"))
    tested = {
        repo.name: json.loads((repo / "reports" / "claims" / "evaluate" / TASK / "metrics.json").read_text())
        for repo in (a, b)
    }
    assert {k: v["test_loss"] for k, v in tested["a"].items()} == {k: v["test_loss"] for k, v in tested["b"].items()}


@pytest.mark.slow
def test_a_piece_parked_evaluated_goes_on_in_a_fresh_clone_reading_each_run_once(tmp_path):
    """The session ends mid-piece: park.py save --evaluate reads the test split with the finished runs and parks them
    without checkpoints; the next session's clone restores them, trains the rest, and its evaluation keeps their
    results: the piece's results are a whole piece's, and the log holds one read per run."""
    a, b, run = _two_clones(tmp_path)
    run(PIECE, a)
    whole = json.loads((a / "reports" / "claims" / "evaluate" / TASK / "metrics.json").read_text())
    log = a / "reports" / "test_reads.jsonl"
    log.unlink()  # as if the piece had stopped before its evaluation, with its last run still training:
    park.shutil.rmtree(park.evaluate_root(a, TASK))
    late = sorted(whole)[-1]
    park.shutil.rmtree(park.runs_root(a, TASK) / late)
    out = run([sys.executable, "scripts/park.py", "save", TASK, "--evaluate", "--profile", "smoke"], a)
    assert "python -m pipelines.evaluate --task clustering_direct --profile smoke --finished" in out, out
    parked = a / "claims" / "parked" / TASK
    assert sorted(json.loads((parked / "manifest.json").read_text())["runs"]) == sorted(set(whole) - {late})
    assert not list(parked.rglob("best.pt"))
    assert sorted(line["run"] for line in map(json.loads, log.read_text().splitlines())) == sorted(set(whole) - {late})

    park.shutil.copytree(a / "claims" / "parked", b / "claims" / "parked")  # committed with the log's lines
    (b / "reports").mkdir()
    park.shutil.copy(log, b / "reports" / "test_reads.jsonl")
    out = run([sys.executable, "scripts/park.py", "restore", TASK], b) + run(PIECE, b)
    assert out.count("finished with the same settings, code and data") == len(whole) - 1, out
    tested = json.loads((b / "reports" / "claims" / "evaluate" / TASK / "metrics.json").read_text())
    assert list(tested) == list(whole)
    assert {k: v["test_loss"] for k, v in tested.items()} == {k: v["test_loss"] for k, v in whole.items()}
    lines = [json.loads(line) for line in (b / "reports" / "test_reads.jsonl").read_text().splitlines()]
    assert sorted(line["run"] for line in lines) == sorted(whole)  # one read a run: the kept ones not read again


def _evaluated(repo: Path, names: list[str]) -> Path:
    """The work folder's evaluate report as ``pipelines.evaluate`` writes it for ``names``, each result naming the
    checkpoint its run sealed."""
    root = park.evaluate_root(repo, TASK)
    (root / "items").mkdir(parents=True)
    results = {}
    for name in names:
        results[name] = {"test_loss": 1.5, "best_sha256": park.sealed(park.runs_root(repo, TASK) / name)}
        (root / "items" / f"{name}.npz").write_bytes(b"items")
    (root / "metrics.json").write_text(json.dumps(results))
    (root / "test_reads.json").write_text(json.dumps({"reads": [{"run": n} for n in names]}))
    return root


def test_evaluated_runs_are_parked_without_checkpoints_and_restored_with_their_results(tmp_path, monkeypatch):
    """save --evaluate: the finished runs go without best.pt (their test results stand for them), with the evaluate
    folder; restored, the results come back with them, checked against each run's sealed hash."""
    a = _checkout(tmp_path / "a")
    for name in ("hsw_small-seed0", "longformer-seed0", "hsw_small-seed1"):
        _run(a, name)
    _run(a, "hsw_small-seed2", hidden=True)  # in progress: starts again
    calls = []

    def evaluate(
        task, repo, profile
    ):  # stands for pipelines.evaluate --finished (tests/pipelines/test_evaluate_kept.py)
        calls.append((task, repo, profile))
        _evaluated(a, ["hsw_small-seed0", "longformer-seed0", "hsw_small-seed1"])
        return 0

    monkeypatch.setattr(park, "evaluate_finished", evaluate)
    dest = park.save_evaluated(TASK, a)
    assert calls == [(TASK, a, "claims")]
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["evaluated"] and sorted(manifest["runs"]) == [
        "hsw_small-seed0",
        "hsw_small-seed1",
        "longformer-seed0",
    ]
    assert not list(dest.glob("*/best.pt")) and (dest / "hsw_small-seed0" / "summary.json").is_file()
    assert (dest / park.EVALUATED / "items" / "hsw_small-seed1.npz").is_file()
    assert "evaluated, without checkpoints" in park.show(TASK, a)

    b = _checkout(tmp_path / "b")
    park.shutil.copytree(a / "claims", b / "claims")
    assert park.restore(TASK, b) == ["hsw_small-seed0", "hsw_small-seed1", "longformer-seed0"]
    assert not list(park.runs_root(b, TASK).glob("*/best.pt"))
    assert park.evaluated_runs(b, TASK) == [
        park.runs_root(b, TASK) / n for n in json.loads((park.evaluate_root(b, TASK) / "metrics.json").read_text())
    ]
    with pytest.raises(SwarmlabError, match="have no best.pt .* park with --evaluate"):  # plain save would lose them
        _run(b, "hsw_small-seed3")
        park.save(TASK, b)

    c = _checkout(tmp_path / "c")
    results = json.loads((dest / park.EVALUATED / "metrics.json").read_text())
    results["longformer-seed0"]["best_sha256"] = "0" * 64  # a result of another checkpoint
    (dest / park.EVALUATED / "metrics.json").write_text(json.dumps(results))
    with pytest.raises(
        SwarmlabError, match="holds no result of the checkpoint .*longformer-seed0.* the parked copy changed"
    ):
        park.restore(TASK, c, parked_root=dest.parent)
    assert not park.evaluate_root(c, TASK).exists()

    monkeypatch.setattr(park, "evaluate_finished", lambda task, repo, profile: 2)
    with pytest.raises(SwarmlabError, match="evaluating the finished runs of clustering_direct failed"):
        park.save_evaluated(TASK, a)
    assert json.loads((dest / "manifest.json").read_text()) == manifest  # what was parked stays


def _grid_results(repo: Path, grid: str, statuses: dict) -> Path:
    """A grid's results folder in ``repo``'s work folder as pipelines.ablate writes it, a point per status."""
    root = park.grid_root(repo, grid)
    (root / "history").mkdir(parents=True)
    points = []
    for name, status in statuses.items():
        entry = {"point": name, "status": status}
        if status == "ok":
            entry["made"] = {"code": "c", "settings": name, "precision": {"swarm": "fp32"}}
            (root / "history" / f"{name}.csv").write_text("step,val_loss\n1,0.5\n")
        points.append(entry)
    (root / "results.json").write_text(json.dumps({"grid": grid, "task": TASK, "points": points}))
    (root / ".results.json.tmp-1").write_text("a write a kill cut")  # never parked
    return root


def test_a_grid_parks_its_finished_points_and_restores_them_in_a_fresh_checkout(tmp_path):
    a = _checkout(tmp_path / "a")
    src = _grid_results(a, "swarm_head", {"mean": "ok", "pma": "not run", "both": "failed"})
    dest = park.save_grid("swarm_head", a)
    assert dest == a / "claims" / "parked" / "grids" / "swarm_head"
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["points"] == ["mean"] and manifest["grid"] == "swarm_head"
    assert manifest["code_hash"] == tree_code_hash(a) and manifest["cpu_class"] == park.cpu_class()
    assert not list((dest / "results").glob(".*"))
    assert "grid swarm_head: 1 finished point(s) parked" in park.show("swarm_head", a, grid=True)
    assert "nothing parked" in park.show("swarm_head", a)  # a grid's parking is not a task's

    b = _checkout(tmp_path / "b")
    park.shutil.copytree(a / "claims", b / "claims")
    assert park.restore_grid("swarm_head", b) == ["mean"]
    restored = park.grid_root(b, "swarm_head")
    assert json.loads((restored / "results.json").read_text()) == json.loads((src / "results.json").read_text())
    assert (restored / "history" / "mean.csv").read_text() == (src / "history" / "mean.csv").read_text()
    assert park.restore_grid("swarm_head", b) == []  # the work folder has its own results now: left alone
    assert park.restore_grid("t_local", b) == []  # nothing parked: nothing to do
    assert park.restore("swarm_head", b) == []  # a grid's parking is not a task's


def test_a_grid_restore_refuses_other_code_another_cpu_class_and_a_changed_copy(tmp_path, monkeypatch):
    a = _checkout(tmp_path / "a")
    _grid_results(a, "cluster_size", {"c2": "ok", "c4": "ok", "c8": "not run"})
    dest = park.save_grid("cluster_size", a)
    with pytest.raises(SwarmlabError, match="no finished point of grid t_local"):
        park.save_grid("t_local", a)

    b = _checkout(tmp_path / "b")
    (b / "pipelines" / "code.py").write_text("# changed\n")
    with pytest.raises(SwarmlabError, match="points parked in .* whose code differs.*restore --grid cluster_size"):
        park.restore_grid("cluster_size", b, parked_root=dest.parent.parent)
    assert not park.grid_root(b, "cluster_size").exists()  # refused before copying anything

    c = _checkout(tmp_path / "c")
    monkeypatch.setattr(park, "cpu_class", lambda: ["avx2"])
    with pytest.raises(SwarmlabError, match="the two classes do not train alike"):
        park.restore_grid("cluster_size", c, parked_root=dest.parent.parent)
    assert not park.grid_root(c, "cluster_size").exists()

    results = json.loads((dest / "results" / "results.json").read_text())
    results["points"][2] = {**results["points"][0], "point": "c8"}  # a point marked finished by hand
    (dest / "results" / "results.json").write_text(json.dumps(results))
    with pytest.raises(SwarmlabError, match="the parked copy changed"):
        park.restore_grid("cluster_size", c, parked_root=dest.parent.parent, any_cpu=True)
    assert not park.grid_root(c, "cluster_size").exists()


def test_the_code_hash_leaves_out_the_report_code_and_texts(tmp_path):
    """Editing the report's code or its claims and amendments texts leaves every trained run's fingerprint current;
    editing the training code does not."""
    repo = _checkout(tmp_path / "repo")
    report = repo / "swarmlab" / "drive" / "report"
    report.mkdir(parents=True)
    (report / "amendments.yaml").write_text("- id: A1\n")
    before = tree_code_hash(repo)
    (report / "amendments.yaml").write_text("- id: A1\n  after: seen\n")
    (report / "ledger.py").write_text("# new\n")
    assert tree_code_hash(repo) == before
    (repo / "swarmlab" / "drive" / "reporting.py").write_text("# not the report package\n")
    assert tree_code_hash(repo) != before
