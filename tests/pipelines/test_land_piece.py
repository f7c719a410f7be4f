"""scripts/land_piece.py: a claims piece run in a clone lands in main with its results, its claims/dvc.lock entries and
its test reads; two pieces from one commit land one after the other; whatever would lose or overwrite work (a code
change in the clone, two pieces writing one file or one lock entry, a rewritten test-read log, landing twice) is
refused in one line before anything is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scripts import land_piece
from swarmlab.errors import SwarmlabError

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _entry(name: str, md5: str) -> str:
    return f"  {name}:\n    cmd: python -m pipelines.claims {name.replace('@', ' ')}\n    deps:\n    - path: models\n      md5: {md5}\n"


LOCK = "schema: '2.0'\nstages:\n" + _entry("grid@a", "1") + _entry("task@b", "2") + _entry("grid@c", "3")
READS = '{"read": 1}\n{"read": 2}\n'


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch):
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _write(repo: Path, path: str, text: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)


def _commit(repo: Path, message: str = "c") -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def main(tmp_path) -> Path:
    repo = tmp_path / "main"
    repo.mkdir()
    _git(repo, "init", "-q")
    _write(repo, "params.yaml", "profile: cpu\n")
    _write(repo, "swarmlab/code.py", "x = 1\n")
    _write(repo, ".gitignore", "outputs/\n")
    _write(repo, land_piece.LOCK, LOCK)
    _write(repo, land_piece.READS, READS)
    _write(repo, "reports/claims/ablations/a/results.json", '{"old": 1}\n')
    _write(repo, "claims/parked/grids/a/manifest.json", "{}\n")
    _write(repo, "claims/parked/grids/a/results/results.json", "{}\n")
    _commit(repo, "base")
    return repo


def _clone(main: Path, name: str) -> Path:
    clone = main.parent / name
    subprocess.run(["git", "clone", "-q", str(main), str(clone)], check=True)
    _write(clone, "outputs/claims/work.bin", "ignored work")  # the work folder: ignored, never landed
    return clone


def _run_grid_a(clone: Path) -> None:
    """What `bash scripts/claims.sh grid a` leaves: results rewritten, a new file, its lock entry, two reads appended,
    its parked points dropped."""
    _write(clone, "reports/claims/ablations/a/results.json", '{"new": 1}\n')
    _write(clone, "reports/claims/ablations/a/figure.png", "png")
    _write(clone, land_piece.LOCK, LOCK.replace("md5: 1", "md5: 1a"))
    _write(clone, land_piece.READS, READS + '{"read": "a1"}\n{"read": "a2"}\n')
    for path in ("claims/parked/grids/a/manifest.json", "claims/parked/grids/a/results/results.json"):
        (clone / path).unlink()


def _run_task_b(clone: Path) -> None:
    _write(clone, "reports/claims/task/b/results.json", '{"b": 1}\n')
    lock = LOCK.replace("md5: 2", "md5: 2b") + _entry("sample@b", "4")
    _write(clone, land_piece.LOCK, lock)
    _write(clone, land_piece.READS, READS + '{"read": "b1"}\n')


def test_two_pieces_from_one_commit_land_one_after_the_other(main):
    a, b = _clone(main, "a"), _clone(main, "b")
    _run_grid_a(a)
    _run_task_b(b)
    _write(main, land_piece.READS, READS + '{"read": "main"}\n')  # main read its test split since (a hand read)
    _commit(main, "a read on main")
    log = main.parent / "console.log"
    log.write_text("grid a ran\n")

    landing = land_piece.plan(a, main)
    assert landing.stages == ["grid@a"] and landing.piece() == "grid_a"
    written = land_piece.land(landing, log)
    assert "claims/logs/grid_a.log" in written and (main / "claims/logs/grid_a.log").read_text() == "grid a ran\n"
    assert (main / "reports/claims/ablations/a/results.json").read_text() == '{"new": 1}\n'
    assert (main / "reports/claims/ablations/a/figure.png").is_file()
    assert not (main / "claims/parked/grids/a").exists() and (main / "claims/parked").is_dir() is False
    assert not (main / "outputs").exists()

    landing = land_piece.plan(b, main)  # b's commit is main's base too: it lands on top of a
    assert landing.stages == ["task@b", "sample@b"] and landing.piece() == "task_b"
    land_piece.land(landing)
    stages = yaml.safe_load((main / land_piece.LOCK).read_text())["stages"]
    assert list(stages) == ["grid@a", "task@b", "grid@c", "sample@b"]
    assert [stages[s]["deps"][0]["md5"] for s in stages] == ["1a", "2b", 3, 4]
    assert (main / land_piece.LOCK).read_text().startswith("schema: '2.0'\nstages:\n  grid@a:\n")
    reads = (main / land_piece.READS).read_text().splitlines()
    assert reads == [*READS.splitlines(), '{"read": "main"}', '{"read": "a1"}', '{"read": "a2"}', '{"read": "b1"}']


def test_landing_twice_is_refused(main):
    a = _clone(main, "a")
    _run_grid_a(a)
    land_piece.land(land_piece.plan(a, main))
    _commit(main, "landed a")
    with pytest.raises(SwarmlabError, match="already"):
        land_piece.plan(a, main)


def _snapshot(repo: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda main, clone: _write(clone, "swarmlab/code.py", "x = 2\n"), "changed files a piece does not write"),
        (
            lambda main, clone: (
                _write(main, "reports/claims/ablations/a/results.json", '{"other": 1}\n'),
                _commit(main),
            ),
            "two pieces wrote one file",
        ),
        (
            lambda main, clone: _write(main, "reports/claims/ablations/a/results.json", '{"uncommitted": 1}\n'),
            "two pieces wrote one file",
        ),
        (
            lambda main, clone: (_write(main, land_piece.LOCK, LOCK.replace("md5: 1", "md5: 1z")), _commit(main)),
            "two runs of one stage",
        ),
        (lambda main, clone: _write(clone, land_piece.READS, '{"read": 1}\n{"read": "a1"}\n'), "append-only"),
        (lambda main, clone: (_write(main, land_piece.READS, '{"read": 1}\n'), _commit(main)), "append-only"),
        (
            lambda main, clone: _git(clone, "commit", "-q", "--allow-empty", "-m", "clone's own"),
            "not in .* history",
        ),
    ],
    ids=[
        "code-change",
        "file-both",
        "file-uncommitted-here",
        "lock-entry-both",
        "reads-rewritten-there",
        "reads-rewritten-here",
        "clone-commit",
    ],
)
def test_what_would_lose_work_is_refused_before_anything_is_written(main, change, match):
    clone = _clone(main, "a")
    _run_grid_a(clone)
    change(main, clone)
    before = _snapshot(main)
    with pytest.raises(SwarmlabError, match=match):
        land_piece.plan(clone, main)
    assert _snapshot(main) == before


def test_cli_checks_everything_first_and_says_what_landed(main, capsys):
    clone = _clone(main, "a")
    _run_grid_a(clone)
    script = Path(land_piece.__file__)
    before = _snapshot(main)

    def run(*args):
        return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)

    bad = run(str(clone), "--into", str(main), "--log", str(main.parent / "missing.log"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: --log") and len(bad.stderr.splitlines()) == 1
    bad = run(str(clone), "--into", str(main), "--log-as", "../escape")
    assert bad.returncode == 2 and "--log-as" in bad.stderr
    dry = run(str(clone), "--into", str(main), "--dry-run")
    assert dry.returncode == 0 and "grid@a" in dry.stdout and "2 new test read(s)" in dry.stdout
    assert _snapshot(main) == before
    log = main.parent / "console.log"
    log.write_text("ran\n")
    ok = run(str(clone), "--into", str(main), "--log", str(log))
    assert ok.returncode == 0, ok.stderr
    assert (main / "claims/logs/grid_a.log").read_text() == "ran\n"
    assert "dvc repro -s -f report" in ok.stdout


def test_a_parked_half_lands_with_its_reads_and_needs_a_log_name(main):
    """A session that parks a grid's finished points (scripts/park.py save --grid) lands the parked folder and the
    reads its points made; no lock entry changed, so its log needs --log-as."""
    clone = _clone(main, "a")
    _write(clone, "claims/parked/grids/c/manifest.json", '{"points": ["p1"]}\n')
    _write(clone, land_piece.READS, READS + '{"read": "c1"}\n')
    landing = land_piece.plan(clone, main)
    assert landing.stages == [] and landing.piece() is None
    assert landing.copies == ["claims/parked/grids/c/manifest.json"]
    log = main.parent / "console.log"
    log.write_text("half\n")
    with pytest.raises(SwarmlabError, match="--log-as"):
        land_piece.land(landing, log)
    land_piece.land(landing, log, "grid_c")
    assert (main / "claims/logs/grid_c.log").is_file()
    assert (main / land_piece.READS).read_text().endswith('{"read": "c1"}\n')


def _park_point(clone: Path, points: list[str], reads: list[str]) -> None:
    """What `scripts/park.py save --grid c` leaves while grid c goes on: its finished points parked, their reads."""
    for point in points:
        _write(clone, f"claims/parked/grids/c/results/{point}.csv", f"{point}\n")
    _write(clone, "claims/parked/grids/c/manifest.json", f'{{"points": {points!r}}}\n'.replace("'", '"'))
    _write(clone, land_piece.READS, READS + "".join(f'{{"read": "{r}"}}\n' for r in reads))


def _land_and_commit(clone: Path, main: Path) -> None:
    land_piece.land(land_piece.plan(clone, main), log=None)
    _write(main, "reports/REPORT.md", f"report after {len(list((main / 'claims/parked/grids/c/results').iterdir()))}\n")
    _write(main, "docs/reports.md", "a point landed\n")
    _commit(main, "landed a point")


def test_a_running_piece_follows_its_landing_and_lands_its_next_point_on_top(main):
    """A grid parks point 1 and lands it while point 2 trains in the same clone; --follow moves the clone to the
    commit that landed point 1, work folder kept, and point 2 then lands alone on top (from the old commit it would
    be refused: landed twice)."""
    clone = _clone(main, "c")
    _park_point(clone, ["p1"], ["c1"])
    _land_and_commit(clone, main)
    head = _git(main, "rev-parse", "HEAD").strip()

    assert land_piece.follow(clone, main, dry_run=True) == ["docs/reports.md", "reports/REPORT.md"]
    assert _git(clone, "rev-parse", "HEAD").strip() != head  # a dry run moves nothing
    assert land_piece.follow(clone, main) == ["docs/reports.md", "reports/REPORT.md"]
    assert _git(clone, "rev-parse", "HEAD").strip() == head
    assert land_piece.worktree_changes(clone) == {}  # the clone is the landing commit, and its work folder stays
    assert (clone / "outputs/claims/work.bin").read_text() == "ignored work"
    assert (clone / "docs/reports.md").read_text() == "a point landed\n"

    _park_point(clone, ["p1", "p2"], ["c1", "c2"])  # point 2 finished: parked beside point 1
    landing = land_piece.plan(clone, main)
    assert landing.new_reads == ['{"read": "c2"}\n']
    assert landing.copies == ["claims/parked/grids/c/manifest.json", "claims/parked/grids/c/results/p2.csv"]
    land_piece.land(landing)
    assert (main / land_piece.READS).read_text().splitlines()[-2:] == ['{"read": "c1"}', '{"read": "c2"}']
    assert (main / "claims/parked/grids/c/manifest.json").read_text() == '{"points": ["p1", "p2"]}\n'


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda main, clone: (_write(main, "swarmlab/code.py", "x = 2\n"), _commit(main)), "cannot follow a change"),
        (lambda main, clone: (_write(main, "params.yaml", "profile: claims\n"), _commit(main)), "params.yaml"),
        (lambda main, clone: _write(main, "docs/reports.md", "uncommitted\n"), "commit the landing first"),
        (
            lambda main, clone: (
                _write(main, land_piece.READS, READS + '{"read": "c1"}\n{"read": "x"}\n'),
                _commit(main),
            ),
            "does not begin with",
        ),
        (lambda main, clone: _write(clone, "claims/parked/grids/c/results/p1.csv", "p1 again\n"), "land it first"),
        (lambda main, clone: _git(clone, "commit", "-q", "--allow-empty", "-m", "own"), "not in .* history"),
    ],
    ids=["code-since", "params-since", "landing-uncommitted", "reads-from-elsewhere", "changed-since-landing", "own"],
)
def test_follow_refuses_what_the_running_piece_cannot_follow_and_moves_nothing(main, change, match):
    clone = _clone(main, "c")
    _park_point(clone, ["p1"], ["c1"])
    _land_and_commit(clone, main)
    change(main, clone)
    before_head, before = _git(clone, "rev-parse", "HEAD"), _snapshot(clone)
    with pytest.raises(SwarmlabError, match=match):
        land_piece.follow(clone, main)
    assert _git(clone, "rev-parse", "HEAD") == before_head and _snapshot(clone) == before


def test_follow_cli_says_where_the_clone_moved(main):
    clone = _clone(main, "c")
    _park_point(clone, ["p1"], ["c1"])
    _land_and_commit(clone, main)
    script = Path(land_piece.__file__)

    def run(*args):
        cmd = [sys.executable, str(script), str(clone), "--into", str(main), *args]
        return subprocess.run(cmd, capture_output=True, text=True)

    bad = run("--follow", "--log-as", "grid_c")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --follow") and len(bad.stderr.splitlines()) == 1
    ok = run("--follow")
    assert ok.returncode == 0, ok.stderr
    assert "moved the clone" in ok.stdout and "2 file(s)" in ok.stdout
    again = run("--follow")
    assert again.returncode == 2 and "already" in again.stderr
