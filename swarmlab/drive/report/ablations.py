"""The ablation grids (``ablations:`` in params.yaml, run by ``python -m pipelines.ablate``): per grid and per folder
that holds its results (``reports/claims/ablations/``, the claims profile's pieces, then the active profile's
``reports/ablations/``), each point's scores over its seeds with their interval, parameters, speed and runs, a figure
of the score per point, and the points not run or not finished."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from swarmlab.document import Document, Heading, Para, Table
from swarmlab.errors import SwarmlabError
from swarmlab import plots
from swarmlab.drive.report import reruns
from swarmlab.drive.report.cells import fmt, short
from swarmlab.drive.report.inputs import read_json
from swarmlab.drive.report.results import RunResult, mean_of, runs_from
from swarmlab.drive.report.stats import across_seeds
from swarmlab.drive.report.testsplit import ITEMS

if TYPE_CHECKING:  # a type only: assemble imports this module
    from swarmlab.drive.report.assemble import Report


def _test_cell(runs: list[RunResult], metric: str) -> tuple[str, float | None, tuple[float, float] | None]:
    """The test metric over a point's seeds: the mean with its t-interval and the per-seed values (one seed: the
    value alone)."""
    values = [(r.seed, r.value(metric)) for r in runs if r.value(metric) is not None]
    if not values:
        return "—", None, None
    if len(values) == 1:
        return fmt(values[0][1], metric), values[0][1], None
    iv = across_seeds([v for _, v in values])
    seeds = ", ".join(fmt(v, metric) for _, v in values)
    return f"{fmt(iv.value, metric)} [{fmt(iv.lo, metric)}, {fmt(iv.hi, metric)}] ({seeds})", iv.value, (iv.lo, iv.hi)


def _grid_block(rep: Report, name: str, folder: Path, results: dict, source: str, claims: bool) -> list:
    """One folder's results of one grid: a row per (point, model) with its seeds pooled, and the figure."""
    d = Document("")
    mon = results.get("monitor", "loss")
    rows, labels, val, test, spread = [], [], [], [], []
    for e in results.get("points", []):
        runs = runs_from(
            results.get("task") or "",
            e.get("evaluate") or {},
            e.get("train") or {},
            folder / ITEMS / e.get("point", ""),
            rep.default_seed,
        )
        models = sorted({r.model for r in runs}) or [e.get("model") or "?"]
        for model in models:
            mine = [r for r in runs if r.model == model]
            label = e["label"] if len(models) == 1 else f"{e['label']} / {model}"
            links = []
            for r in mine:
                run_id = (e.get("runs") or {}).get(r.run)
                run = rep.ml.get(run_id) if run_id else None
                if run_id:
                    links.append(rep.ml.cite(run, run_id))
            commits = sorted({short(r.test.get("git_commit") or results.get("git_commit")) for r in mine}) or [
                short(results.get("git_commit"))
            ]
            cell, value, interval = _test_cell(mine, f"test_{mon}")
            val_mean = mean_of(mine, f"val_{mon}")
            rows.append(
                [
                    label,
                    e.get("status", "?"),
                    str(len(mine)),
                    fmt(val_mean, mon),
                    cell,
                    fmt(mean_of(mine, "num_params"), "num_params"),
                    fmt(mean_of(mine, "train_samples_per_s")),
                    fmt(mean_of(mine, "train_time_s")),
                    fmt(mean_of(mine, "latency_ms_p50")),
                    fmt(mean_of(mine, "peak_memory_mb"), "peak_memory_mb"),
                    ", ".join(sorted({str(r.train.get("stopped", "—")) for r in mine})) or "—",
                    f"{' '.join(links) or 'no MLflow run'} · {', '.join(commits)}",
                ]
            )
            labels.append(label)
            val.append(val_mean)
            test.append(value)
            spread.append(interval)
    d.add(
        Para(
            f"From {source}: task `{results.get('task')}`, profile `{results.get('profile')}`, command "
            f"`{results.get('command')}`, commit {short(results.get('git_commit'))}. Several seeds per point: the "
            "test column is their mean with its t-interval, then each seed's value; the other columns are means "
            "over the seeds (test latency: the evaluate stage's median batch, ms; peak memory: its process's peak "
            "resident memory on CPU, or the GPU's peak allocation). The points share their seeds, so "
            "the ledger's paired test between two points is sharper than these intervals."
        ),
        Table(
            [
                "point",
                "status",
                "seeds",
                f"val {mon}",
                f"test {mon}",
                "parameters",
                "train samples/s",
                "net train s",
                "test latency ms",
                "peak memory MB",
                "stopped",
                "runs · commit",
            ],
            rows,
            "llrrrrrrrrll",
        ),
    )
    if any(v is not None for v in val + test):
        tag = "claims_" if claims else ""
        img = rep.figure(
            f"ablation_{tag}{name}",
            lambda p, n=name: plots.ablation_plot(
                labels,
                {"validation (mean over seeds)": val, "test (mean, 95% interval)": test},
                f"ablation {n} ({results.get('profile')}): {mon}",
                mon,
                p,
                intervals={"test (mean, 95% interval)": spread},
            ),
        )
        if img:
            img.caption = f"ablation `{name}` ({source}): {mon} per point"
            d.add(img)
    not_run = [e["label"] for e in results.get("points", []) if e.get("status") != "ok"]
    if not_run:
        again = (reruns.CLAIMS_GRID if claims else reruns.GRID).format(grid=name)
        rep.missing.append(f"ablation `{name}` ({source}): points not finished: {', '.join(not_run)} (`{again}`)")
    return d.blocks


def ablation_section(rep: Report) -> list:
    d = Document("")
    grids = dict(rep.params.get("ablations") or {})
    folders = [  # (root, how the report names it, whether it is the claims profile's)
        (
            rep.reports / "claims" / "ablations",
            "reports/claims (the `claims` profile: `bash scripts/claims.sh grid`)",
            True,
        ),
        (rep.reports / "ablations", f"reports/ablations (profile `{rep.params.get('profile')}`)", False),
    ]
    on_disk = sorted({p.name for root, _, _ in folders for p in root.glob("*") if p.is_dir()})
    d.add(
        Heading(2, "Ablations"),
        Para(
            "Grids defined under `ablations:` in params.yaml, one command each (`python -m pipelines.ablate --grid "
            "<name>`, or `bash scripts/claims.sh grid <name>` at the `claims` profile's budget); every point trains in "
            "a workspace of its own. A grid's results are shown from each folder that holds them, the claims "
            "profile's first."
        ),
    )
    for name in list(grids) + [g for g in on_disk if g not in grids]:
        spec = grids.get(name) or {}
        d.add(Heading(3, f"`{name}`"))
        if spec.get("description"):
            d.add(Para(spec["description"]))
        found = [(root / name, read_json(root / name / "results.json"), src, claims) for root, src, claims in folders]
        found = [entry for entry in found if entry[1]]
        if not found:
            try:
                points = [p["label"] for p in rep.code.grid_points(rep.params, name)]
            except SwarmlabError as exc:
                points = [f"(grid not valid: {exc})"]
            claims_cmd, own_cmd = reruns.CLAIMS_GRID.format(grid=name), reruns.GRID.format(grid=name)
            rep.missing.append(f"ablation `{name}`: not run: `{claims_cmd}` or `{own_cmd}` ({len(points)} points)")
            d.add(
                Para(
                    f"Not run yet: `{claims_cmd}` (the `claims` profile) or `{own_cmd}` (this profile) — points: "
                    + ", ".join(f"`{p}`" for p in points)
                    + "."
                )
            )
            continue
        for folder, results, source, claims in found:
            d.add(*_grid_block(rep, name, folder, results, source, claims))
    return d.blocks
