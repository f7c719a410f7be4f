"""Park a claims piece's finished work in git, so that a piece longer than one session (or one machine's lease) can
continue in a fresh clone: the next session restores it and runs only what is still missing.

    python scripts/park.py save <task> [--repo <checkout>]      after (or while) a task piece runs: copies its finished
                                                                runs into <checkout>/claims/parked/<task>/ (refused
                                                                over --max-mb, default 50: git keeps them for good)
    python scripts/park.py save <task> --evaluate               the same for runs too big for git (task lra_text's HSW
                                                                checkpoints: 22 MB each): evaluates the finished runs
                                                                on the test split, then parks them with their results
                                                                and without their checkpoints
    python scripts/park.py save --grid <grid>                   the same for a grid piece: its finished points, into
                                                                claims/parked/grids/<grid>/
    python scripts/park.py restore [--grid] <name> [--repo ..]  before the piece runs again (scripts/claims.sh does it)
    python scripts/park.py show [--grid] <name>                 what is parked, made where and at which code
    python scripts/park.py drop [--grid] <name>                 remove what is parked, once the piece has finished
                                                                (scripts/claims.sh does it)

``<checkout>`` (default: this one) is the clone whose work folder (``outputs/claims``) ran the piece, or will.

A finished run is kept by ``pipelines.train`` only when its fingerprint (settings, code, data, CPUs) is unchanged
(swarmlab/drive/records.py), so a parked run is kept only by a checkout whose code is the code that trained it:
``restore`` refuses another one in one line and names the commit to check out. It also refuses a machine of another
CPU class (its vector extensions): runs bounded by net time get more steps on a faster class, and bf16 autocast may
switch on, so one comparison's runs would not be comparable (docs/reports.md, "One machine class per comparison").

Per run, what evaluation and the kept records need: ``best.pt`` (checked against the SHA-256 its ``run.json``
sealed), ``run.json``, ``summary.json``, ``history.csv`` and the curve; not the optimizer state or ``last.pt``, so an
interrupted run is not parked: it starts again. The MLflow run a ``run.json`` names lives in the store of the clone
that trained it; the parked copy drops the id (kept in ``manifest.json``), so evaluation opens a new MLflow run.

``--evaluate`` parks a run without its ``best.pt``: first ``pipelines.evaluate --finished`` (at ``--profile``,
default claims, in the work folder) reads the test split with each finished run, then the runs go with the evaluate
folder (results, per-item scores, figures, its record of reads), each result naming the SHA-256 of the checkpoint it
read. Restored, train keeps the run (its fingerprint), and evaluate keeps its result because that hash is the one
the run's ``run.json`` sealed, and reads the test split only with the runs trained since. The reads are in
``reports/test_reads.jsonl``: commit it with the parked folder, as for a grid.

A grid (``--grid``) parks its finished points: its results folder as ``pipelines.ablate`` writes it (``results.json``
with each point's ``made`` record, the points' histories and test items), not their checkpoints (an IMDB model's is
about 17 MB, a grid's dozens of them too big for git). Restored into the work folder, ``ablate --resume`` keeps each
finished point that this checkout on this machine makes the same (its ``made``) and runs the others: a point in
progress when the session ended starts again, so stop a long grid between points (``[<grid>/<point>] ok`` in its
log). The same checks as a task's refuse other code and another CPU class before anything is copied. Each finished
point read its test split, and ``reports/test_reads.jsonl`` of the checkout that ran it holds the lines: commit them
with the parked folder, or the log would lose them with the session's checkout.

Nothing here is a stage's code: parking changes no fingerprint and no DVC dependency.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from swarmlab.drive.records import RUN_FILE, SUMMARY, tree_code_hash  # noqa: E402
from swarmlab.errors import SwarmlabError, cli  # noqa: E402
from swarmlab.integrity import file_sha256  # noqa: E402
from swarmlab.io import atomic_dir, atomic_write_text  # noqa: E402
from swarmlab.machine import cpu_flags, describe_cpu  # noqa: E402

PARKED = Path("claims") / "parked"
GRIDS = "grids"  # claims/parked/grids/<grid>: a grid's parked points (a task's runs are in claims/parked/<task>)
WORK = Path("outputs") / "claims"
RESULTS = "results.json"


def parked_dir(root: Path, name: str, grid: bool) -> Path:
    """Where ``name`` (a task, or a grid) is parked under ``root`` (a ``claims/parked`` folder)."""
    return root / GRIDS / name if grid else root / name


MANIFEST = "manifest.json"
MB = 1024 * 1024
MAX_MB = 50.0  # what one save may add to git's history (an LRA Text HSW checkpoint is 22 MB: 5,704,348 fp32 params)
FILES = ("best.pt", RUN_FILE, SUMMARY, "history.csv", "training_curve.png")  # what a parked run keeps
NEEDED = ("best.pt", RUN_FILE, SUMMARY, "history.csv")
RECORDS = tuple(f for f in FILES if f != "best.pt")  # what a run parked evaluated keeps (save --evaluate)
EVALUATED = "evaluate"  # claims/parked/<task>/evaluate: the evaluate folder of runs parked without their best.pt


def cpu_class() -> list[str]:
    """The CPU's vector extensions (AVX2, AVX-512, AMX): what makes net time buy a different amount of compute."""
    return sorted(f for f in cpu_flags()[1] if f == "avx2" or f.startswith(("avx512", "amx")))


def commit(repo: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def runs_root(repo: Path, task: str) -> Path:
    return repo / WORK / "outputs" / "train" / task


def finished_runs(root: Path) -> list[Path]:
    """The finished runs under ``root``: a final folder (not a hidden ``.<run>.run`` in progress) holding every file a
    parked run needs, its ``best.pt`` the one its ``run.json`` sealed."""
    found = []
    for folder in (
        sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    ):
        if not all((folder / name).is_file() for name in NEEDED):
            continue
        record = json.loads((folder / RUN_FILE).read_text())
        if record.get("best_sha256") and file_sha256(folder / "best.pt") == record["best_sha256"]:
            found.append(folder)
    return found


def save(task: str, repo: Path, *, max_mb: float = MAX_MB) -> Path:
    """Park the finished runs of ``task`` from ``repo``'s work folder in ``repo/claims/parked/<task>`` (swapped in
    whole; runs parked before and still finished there are parked again). Refuses, before writing, more than
    ``max_mb`` of files: they go into git's history for good."""
    runs = finished_runs(runs_root(repo, task))
    if not runs:
        raise SwarmlabError(f"no finished run of {task} under {runs_root(repo, task)}: nothing to park")
    without = [r.name for r in evaluated_runs(repo, task) if not (r / "best.pt").is_file()]
    if without:  # restored from an evaluated park: only their results stand for them
        raise SwarmlabError(
            f"{', '.join(without)} of {task} have no best.pt (parked with --evaluate before): park with --evaluate"
        )
    sizes = {f.name: sum((f / n).stat().st_size for n in FILES if (f / n).is_file()) for f in runs}
    if sum(sizes.values()) > max_mb * MB:
        largest = max(sizes, key=sizes.get)
        raise SwarmlabError(
            f"parking {len(runs)} finished run(s) of {task} would add {sum(sizes.values()) / MB:.0f} MB to git's "
            f"history (the largest, {largest}, {sizes[largest] / MB:.1f} MB, mostly its best.pt), over --max-mb "
            f"{max_mb:g}: finish the piece in one session, or pass a larger --max-mb if the history may carry it"
        )
    dest = parked_dir(repo / PARKED, task, grid=False)
    manifest = manifest_for(repo, task=task, runs={})
    with atomic_dir(dest) as tmp:
        copy_runs(runs, FILES, tmp, manifest)
    return dest


def evaluate_root(repo: Path, task: str) -> Path:
    """Where ``pipelines.evaluate`` writes a task's reports in the work folder (its ``reports/evaluate/<task>``)."""
    return repo / WORK / "reports" / "evaluate" / task


def sealed(folder: Path) -> str | None:
    """The SHA-256 of ``best.pt`` the run in ``folder`` sealed in its ``run.json`` (None: not a finished run)."""
    try:
        return json.loads((folder / RUN_FILE).read_text()).get("best_sha256")
    except (OSError, ValueError, AttributeError):
        return None


def evaluated_runs(repo: Path, task: str) -> list[Path]:
    """The runs of ``task`` in ``repo``'s work folder whose test result its evaluate folder holds, for the checkpoint
    the run sealed (with or without the ``best.pt`` itself)."""
    try:
        results = json.loads((evaluate_root(repo, task) / "metrics.json").read_text())
    except (OSError, ValueError):
        return []
    root = runs_root(repo, task)
    return [
        root / name
        for name, result in results.items()
        if isinstance(result, dict)
        and result.get("best_sha256")
        and sealed(root / name) == result["best_sha256"]
        and all((root / name / f).is_file() for f in NEEDED if f in RECORDS)
    ]


def evaluate_finished(task: str, repo: Path, profile: str) -> int:
    """``pipelines.evaluate --finished`` of ``task`` at ``profile`` in ``repo``'s work folder; its exit code."""
    cmd = [sys.executable, "-m", "pipelines.evaluate", "--task", task, "--profile", profile, "--finished"]
    print(f"[park] python {' '.join(cmd[1:])} (in {repo / WORK})", file=sys.stderr, flush=True)
    return subprocess.run(cmd, cwd=repo, env={**os.environ, "SWARMLAB_WORKDIR": str(repo / WORK)}).returncode


def save_evaluated(task: str, repo: Path, *, profile: str = "claims", max_mb: float = MAX_MB) -> Path:
    """Evaluate the finished runs of ``task`` in ``repo``'s work folder (``pipelines.evaluate --finished``: their
    test reads go to ``repo``'s log), then park them without their ``best.pt``, with the evaluate folder, in
    ``repo/claims/parked/<task>`` (swapped in whole). For runs whose checkpoints git should not carry."""
    if not finished_runs(runs_root(repo, task)) and not evaluated_runs(repo, task):
        raise SwarmlabError(f"no finished run of {task} under {runs_root(repo, task)}: nothing to park")
    if evaluate_finished(task, repo, profile) != 0:
        raise SwarmlabError(f"evaluating the finished runs of {task} failed (above): nothing parked")
    runs = evaluated_runs(repo, task)
    evaluated = evaluate_root(repo, task)
    size = sum(f.stat().st_size for f in evaluated.rglob("*") if f.is_file()) + sum(
        (r / n).stat().st_size for r in runs for n in RECORDS if (r / n).is_file()
    )
    if size > max_mb * MB:
        raise SwarmlabError(
            f"parking {len(runs)} evaluated run(s) of {task} would add {size / MB:.0f} MB to git's history, over "
            f"--max-mb {max_mb:g}"
        )
    dest = parked_dir(repo / PARKED, task, grid=False)
    manifest = manifest_for(repo, task=task, runs={}, evaluated=True)
    with atomic_dir(dest) as tmp:
        shutil.copytree(evaluated, tmp / EVALUATED, ignore=shutil.ignore_patterns(".*"))
        copy_runs(runs, RECORDS, tmp, manifest)
    return dest


def copy_runs(runs: list[Path], files: tuple[str, ...], tmp: Path, manifest: dict) -> None:
    """Copy ``files`` of each run folder into ``tmp/<run>``, the MLflow run id moved from its ``run.json`` into
    ``manifest`` (it names a run of the store of this clone only), and write the manifest."""
    for folder in runs:
        (tmp / folder.name).mkdir()
        for name in files:
            if (folder / name).is_file():
                shutil.copy2(folder / name, tmp / folder.name / name)
        record = json.loads((folder / RUN_FILE).read_text())
        manifest["runs"][folder.name] = {"mlflow_run_id": record.pop("run_id", None)}
        (tmp / folder.name / RUN_FILE).write_text(json.dumps(record) + "\n")
    atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=1) + "\n")


def load_manifest(parked: Path) -> dict:
    path = parked / MANIFEST
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SwarmlabError(f"{path} is missing or damaged ({exc}): the parked runs cannot be checked") from None


def restore(task: str, repo: Path, *, parked_root: Path | None = None, any_cpu: bool = False) -> list[str]:
    """Copy the parked runs of ``task`` into ``repo``'s work folder (a run already there is left alone); the names
    restored. Refuses, before copying anything, a checkout whose code differs and a CPU of another class."""
    root = parked_root or repo / PARKED
    parked = parked_dir(root, task, grid=False)
    if not parked.is_dir():
        return []
    manifest = load_manifest(parked)
    check_here(parked, manifest, repo, "runs", f"{task} --repo <dir> --from {root}", any_cpu)
    root = runs_root(repo, task)
    results = {}
    if manifest.get("evaluated"):  # runs parked without best.pt: their results stand for them
        try:
            results = json.loads((parked / EVALUATED / "metrics.json").read_text())
        except (OSError, ValueError) as exc:
            raise SwarmlabError(f"{parked / EVALUATED / 'metrics.json'} is missing or damaged ({exc})") from None
    restored = []
    for name in sorted(manifest.get("runs", {})):
        src, dst = parked / name, root / name
        if dst.exists():
            continue
        record = json.loads((src / RUN_FILE).read_text())
        if manifest.get("evaluated"):
            if (results.get(name) or {}).get("best_sha256") != record.get("best_sha256"):
                raise SwarmlabError(
                    f"{parked / EVALUATED / 'metrics.json'} holds no result of the checkpoint {src / RUN_FILE} "
                    "sealed: the parked copy changed"
                )
        elif file_sha256(src / "best.pt") != record.get("best_sha256"):
            raise SwarmlabError(f"{src / 'best.pt'} is not the checkpoint its run.json sealed: the parked copy changed")
        shutil.copytree(src, dst.parent / f".{name}.restoring", dirs_exist_ok=True)
        (dst.parent / f".{name}.restoring").rename(dst)
        restored.append(name)
    if manifest.get("evaluated") and not evaluate_root(repo, task).exists():  # one here has its own progress
        with atomic_dir(evaluate_root(repo, task)) as tmp:
            shutil.copytree(parked / EVALUATED, tmp, dirs_exist_ok=True)
    return restored


def grid_root(repo: Path, grid: str) -> Path:
    """Where ``pipelines.ablate`` writes a grid's results in the work folder (its ``reports/ablations/<grid>``)."""
    return repo / WORK / "reports" / "ablations" / grid


def finished_points(results: Path) -> list[str]:
    """The points ``results`` (a grid's results.json) has finished: status ``ok``, with the ``made`` record that
    ``ablate --resume`` checks."""
    try:
        entries = json.loads(results.read_text()).get("points", [])
    except (OSError, ValueError, AttributeError) as exc:
        raise SwarmlabError(f"{results} is missing or damaged ({exc}): no finished point can be read from it") from None
    return [e["point"] for e in entries if e.get("status") == "ok" and e.get("made")]


def manifest_for(repo: Path, **what) -> dict:
    return {
        **what,
        "commit": commit(repo),
        "code_hash": tree_code_hash(repo),
        "cpu": describe_cpu(),
        "cpu_class": cpu_class(),
        "parked_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def save_grid(grid: str, repo: Path) -> Path:
    """Park the finished points of ``grid`` from ``repo``'s work folder in ``repo/claims/parked/grids/<grid>``: the
    grid's results folder (results.json, histories, items), swapped in whole."""
    src = grid_root(repo, grid)
    points = finished_points(src / RESULTS) if (src / RESULTS).is_file() else []
    if not points:
        raise SwarmlabError(f"no finished point of grid {grid} in {src / RESULTS}: nothing to park")
    dest = parked_dir(repo / PARKED, grid, grid=True)
    with atomic_dir(dest) as tmp:
        shutil.copytree(src, tmp / "results", ignore=shutil.ignore_patterns(".*"))
        atomic_write_text(tmp / MANIFEST, json.dumps(manifest_for(repo, grid=grid, points=points), indent=1) + "\n")
    return dest


def check_here(parked: Path, manifest: dict, repo: Path, what: str, restore_args: str, any_cpu: bool) -> None:
    """Refuse, in one line, a checkout whose code differs from the code that made the parked ``what`` (naming the
    restore to run in a checkout of that code: ``restore_args``), and a CPU of another class (unless ``any_cpu``)."""
    if manifest.get("code_hash") != tree_code_hash(repo):
        raise SwarmlabError(
            f"the {what} parked in {parked} were made at commit {manifest.get('commit')}, whose code differs from "
            f"{repo}'s: they would run again. Continue in a checkout of that commit: git worktree add "
            f"<dir> {manifest.get('commit')}, then python scripts/park.py restore {restore_args}"
        )
    if manifest.get("cpu_class") != cpu_class() and not any_cpu:
        raise SwarmlabError(
            f"the {what} parked in {parked} were made on {manifest.get('cpu')}; this machine is {describe_cpu()}: "
            "the two classes do not train alike (net time buys other step counts, bf16 autocast may switch), so the "
            "piece's results would not compare (pass --any-cpu to restore anyway)"
        )


def restore_grid(grid: str, repo: Path, *, parked_root: Path | None = None, any_cpu: bool = False) -> list[str]:
    """Put the parked results of ``grid`` in ``repo``'s work folder, where ``ablate --resume`` keeps their finished
    points; the points restored. A work folder that already holds the grid's results is left alone (it has its own
    progress). Refuses, before copying, other code and another CPU class."""
    root = parked_root or repo / PARKED
    parked = parked_dir(root, grid, grid=True)
    if not parked.is_dir():
        return []
    manifest = load_manifest(parked)
    check_here(parked, manifest, repo, "points", f"--grid {grid} --repo <dir> --from {root}", any_cpu)
    dst = grid_root(repo, grid)
    if (dst / RESULTS).is_file():
        return []
    points = finished_points(parked / "results" / RESULTS)
    if sorted(points) != sorted(manifest.get("points", [])):
        raise SwarmlabError(
            f"{parked / 'results' / RESULTS} finishes {sorted(points)}, its manifest {sorted(manifest.get('points', []))}"
            ": the parked copy changed"
        )
    with atomic_dir(dst) as tmp:
        shutil.copytree(parked / "results", tmp, dirs_exist_ok=True)
    return points


def show(name: str, repo: Path, *, grid: bool = False) -> str:
    parked = parked_dir(repo / PARKED, name, grid)
    what = f"grid {name}" if grid else name
    if not parked.is_dir():
        return f"{what}: nothing parked in {parked}"
    m = load_manifest(parked)
    items = m.get("points", []) if grid else sorted(m.get("runs", {}))
    return (
        f"{what}: {len(items)} finished {'point' if grid else 'run'}(s) parked {m.get('parked_at')} at commit "
        f"{m.get('commit')} on {m.get('cpu')}{', evaluated, without checkpoints' if m.get('evaluated') else ''}: "
        f"{', '.join(items)}"
    )


def drop(name: str, repo: Path, *, grid: bool = False) -> Path | None:
    """Remove what is parked for ``name`` (its piece has finished); the folder removed, or None when none was."""
    parked = parked_dir(repo / PARKED, name, grid)
    if not parked.is_dir():
        return None
    shutil.rmtree(parked)
    return parked


@cli
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("save", "restore", "show", "drop"))
    parser.add_argument("task", help="the task of the claims piece (task@<task>), or its grid with --grid")
    parser.add_argument(
        "--grid", action="store_true", help="the name is a grid (grid@<grid>): park its finished points"
    )
    parser.add_argument(
        "--repo", default=str(REPO), help="the checkout whose work folder ran the piece (default: this)"
    )
    parser.add_argument("--from", dest="parked_root", default=None, help="restore from this claims/parked folder")
    parser.add_argument("--any-cpu", action="store_true", help="restore on a CPU of another class")
    parser.add_argument(
        "--evaluate",
        action="store_true",
        help="save <task>: evaluate the finished runs on the test split, then park them without their checkpoints",
    )
    parser.add_argument("--profile", default="claims", help="save --evaluate: the profile to evaluate at (claims)")
    parser.add_argument(
        "--max-mb",
        type=float,
        default=MAX_MB,
        help=f"save <task>: refuse more than this many MB (default {MAX_MB:g}; a grid parks no checkpoints)",
    )
    args = parser.parse_args(argv)
    repo = Path(args.repo).resolve()
    if not (repo / "params.yaml").is_file():
        raise SwarmlabError(f"{repo} is not a swarmlab checkout (no params.yaml)")
    if args.evaluate and (args.grid or args.action != "save"):
        raise SwarmlabError("--evaluate is for save <task> (a grid parks no checkpoints)")
    if args.action == "save":
        if args.grid:
            dest = save_grid(args.task, repo)
        elif args.evaluate:
            dest = save_evaluated(args.task, repo, profile=args.profile, max_mb=args.max_mb)
        else:
            dest = save(args.task, repo, max_mb=args.max_mb)
        also = " reports/test_reads.jsonl" if args.grid or args.evaluate else ""  # what read its test split
        print(
            show(args.task, repo, grid=args.grid)
            + f"\nparked in {dest}: commit it (git add {dest.relative_to(repo)}{also})"
        )
    elif args.action == "restore":
        parked_root = Path(args.parked_root).resolve() if args.parked_root else None
        names = (restore_grid if args.grid else restore)(args.task, repo, parked_root=parked_root, any_cpu=args.any_cpu)
        if names:
            kind = "point(s) of grid" if args.grid else "run(s) of"
            print(f"[park] restored {len(names)} finished {kind} {args.task}: {', '.join(names)}", file=sys.stderr)
    elif args.action == "drop":
        gone = drop(args.task, repo, grid=args.grid)
        if gone:
            kind = "grid" if args.grid else "task"
            print(f"[park] {kind} {args.task} finished: {gone} is no longer needed (removed)", file=sys.stderr)
    else:
        print(show(args.task, repo, grid=args.grid))


if __name__ == "__main__":
    main()
