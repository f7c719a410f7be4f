"""Which points of a claims grid may be kept when the grid piece runs again: only those trained by this checkout's code
and settings. scripts/claims.sh runs it before every grid piece.

    python scripts/grid_resume.py <grid> [<grid>...] [--repo <checkout>]

A grid piece (``python -m pipelines.claims grid <grid>``) resumes from the grid's results: its work folder's
(``outputs/claims/reports/ablations/<grid>``), else the ones kept in ``reports/claims/ablations/<grid>``, copied into
the work folder; ``pipelines.ablate --resume`` then skips every point those results mark ``ok``. That is what lets a
killed grid continue; but a grid that is stale because its code or params changed would then run no point at all,
and DVC would record the old numbers as made by the new code. So, before the piece runs, this marks ``not run`` (in
the work folder's copy; the kept results are not touched) every ``ok`` point

* one of whose runs was trained at another code hash than this checkout's (the train record's ``code``: the hash
  ``pipelines.train`` fingerprints its runs with, swarmlab/drive/records.py), or recorded none;
* one of whose runs was trained in another precision than this machine would train it: bf16 autocast on one side
  only (``amp: auto`` is bf16 on a CPU with native bf16, fp32 on one without), so that a grid whose pieces ran on
  two CPU classes would compare fp32 points with bf16 ones; and every point when
* claims/dvc.lock records the grid with params that differ from params.yaml (a setting changed: the points' runs
  were trained under the old one).

The points left ``ok`` were made by this code, these settings and this precision: the piece keeps them, as
``pipelines.train`` keeps a finished run with an unchanged fingerprint. Nothing here is a stage's code: it changes no
DVC dependency.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from scripts.park import WORK, code_hash  # noqa: E402
from swarmlab.drive.ablations import grid_points, grid_spec, point_params  # noqa: E402
from swarmlab.drive.params import load_params  # noqa: E402
from swarmlab.drive.run_config import train_config  # noqa: E402
from swarmlab.drive.report.provenance import CLAIMS_LOCK, stale_stages  # noqa: E402
from swarmlab.engine import resolve_amp  # noqa: E402
from swarmlab.errors import SwarmlabError, cli  # noqa: E402
from swarmlab.io import atomic_write_text  # noqa: E402

KEPT = Path("reports") / "claims" / "ablations"


def bf16_here(repo: Path, grid: str) -> dict[str, bool]:
    """Per point of the claims grid: whether its runs would train in bf16 autocast on this machine."""
    params = load_params(Path(repo) / "params.yaml", profile="claims")
    spec = grid_spec(params, grid)
    return {
        point["point"]: resolve_amp(
            train_config(point_params(params, spec, point, grid), spec["task"], point["model"]).amp, torch.device("cpu")
        )
        for point in grid_points(params, grid)
    }


def stale_points(
    results: dict, code: str, params_changed: list[str], bf16: dict[str, bool] | None = None
) -> dict[str, str]:
    """The ``ok`` points of ``results`` (a grid's results.json) that must run again, each with why; ``bf16``: per
    point, whether this machine trains it in bf16 autocast (``bf16_here``)."""
    why = {}
    for entry in results.get("points") or []:
        if entry.get("status") != "ok":
            continue
        if params_changed:
            why[entry["point"]] = f"params changed since claims/dvc.lock ({', '.join(params_changed)})"
            continue
        codes = {str((record or {}).get("code") or "") for record in (entry.get("train") or {}).values()}
        if codes != {code[:16]}:
            other = ", ".join(sorted(c or "none recorded" for c in codes)) or "no runs recorded"
            why[entry["point"]] = f"trained at code {other}, this checkout's is {code[:16]}"
            continue
        if bf16 is not None and entry["point"] in bf16:
            flags = {bool((record or {}).get("bf16_autocast")) for record in (entry.get("train") or {}).values()}
            if flags != {bf16[entry["point"]]}:
                made = " and ".join("bf16 autocast" if f else "fp32" for f in sorted(flags)) or "no runs recorded"
                here = "bf16 autocast" if bf16[entry["point"]] else "fp32"
                why[entry["point"]] = f"trained in {made}, this machine trains it in {here} (another CPU class)"
    return why


def prepare(repo: Path, grid: str, *, work: Path | None = None) -> dict[str, str]:
    """Leave in the work folder the grid's results with every point this checkout did not make marked ``not run``;
    returns those points and why. The kept results are copied first where the work folder has none (what
    ``pipelines.claims`` would do), so that the piece resumes from the marked copy."""
    repo = Path(repo)
    work_dir = (Path(work) if work is not None else repo / WORK) / "reports" / "ablations" / grid
    kept = repo / KEPT / grid
    if not (work_dir / "results.json").is_file():
        if not (kept / "results.json").is_file():
            return {}  # nothing to resume from: every point runs
        if work_dir.exists():
            shutil.rmtree(work_dir)  # a copy without results.json is of no use
        shutil.copytree(kept, work_dir)
    results_file = work_dir / "results.json"
    try:
        results = json.loads(results_file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SwarmlabError(f"{results_file}: not JSON ({exc}); remove it to run every point of grid {grid}") from None
    stale = stale_stages(repo, lock_file=CLAIMS_LOCK).get(f"grid@{grid}")
    params_changed = [c.removeprefix("params ") for c in (stale.changed if stale else []) if c.startswith("params ")]
    why = stale_points(results, code_hash(repo), params_changed, bf16_here(repo, grid))
    if why:
        results["points"] = [
            {k: v for k, v in e.items() if k in ("point", "label", "model", "overrides")} | {"status": "not run"}
            if e.get("point") in why
            else e
            for e in results["points"]
        ]
        atomic_write_text(results_file, json.dumps(results, indent=2, sort_keys=True) + "\n")
    return why


@cli
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grids", nargs="+", help="grids under profiles.claims.ablations")
    parser.add_argument("--repo", default=str(REPO), help="the checkout whose claims piece runs next (default: this)")
    args = parser.parse_args(argv)
    repo = Path(args.repo).resolve()
    if not (repo / "params.yaml").is_file():
        raise SwarmlabError(f"--repo {repo}: not a swarmlab checkout (no params.yaml)")
    for grid in args.grids:
        why = prepare(repo, grid)
        for point, reason in why.items():
            print(f"[claims] grid {grid}: point {point} runs again: {reason}", file=sys.stderr)


if __name__ == "__main__":
    main()
