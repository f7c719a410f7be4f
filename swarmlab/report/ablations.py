"""The ablation grids (``ablations:`` in params.yaml, run by ``python -m pipelines.ablate``): per grid, its points'
scores, parameters, throughput and runs, a figure of the score per point, and the points not run or not finished."""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarmlab.document import Document, Heading, Para, Table
from swarmlab.errors import SwarmlabError
from swarmlab import plots
from swarmlab.report.cells import fmt, is_number, short
from swarmlab.report.inputs import read_json

if TYPE_CHECKING:  # a type only: assemble imports this module
    from swarmlab.report.assemble import Report


def ablation_section(rep: Report) -> list:

    d = Document("")
    grids = dict(rep.params.get("ablations") or {})
    on_disk = sorted(p.name for p in (rep.reports / "ablations").glob("*") if p.is_dir())
    d.add(
        Heading(2, "Ablations"),
        Para(
            "Grids defined under `ablations:` in params.yaml, one command each (`python -m pipelines.ablate --grid "
            "<name>`); every point trains in a workspace of its own at the active profile's settings."
        ),
    )
    for name in list(grids) + [g for g in on_disk if g not in grids]:
        spec = grids.get(name) or {}
        results = read_json(rep.reports / "ablations" / name / "results.json")
        d.add(Heading(3, f"`{name}`"))
        if spec.get("description"):
            d.add(Para(spec["description"]))
        if not results:
            try:
                points = [p["label"] for p in rep.code.grid_points(rep.params, name)]
            except SwarmlabError as exc:
                points = [f"(grid not valid: {exc})"]
            rep.missing.append(
                f"ablation `{name}`: not run: `python -m pipelines.ablate --grid {name}` ({len(points)} points)"
            )
            d.add(
                Para(
                    f"Not run yet: `python -m pipelines.ablate --grid {name}` — points: "
                    + ", ".join(f"`{p}`" for p in points)
                    + "."
                )
            )
            continue
        mon = results.get("monitor", "loss")
        rows, labels, val, test = [], [], [], []
        for e in results.get("points", []):
            models = sorted(set((e.get("train") or {})) | set((e.get("evaluate") or {}))) or [e.get("model") or "?"]
            for model in models:
                tr, ev = (e.get("train") or {}).get(model) or {}, (e.get("evaluate") or {}).get(model) or {}
                label = e["label"] if len(models) == 1 else f"{e['label']} / {model}"
                run_id = (e.get("runs") or {}).get(model)
                run = rep.ml.get(run_id) if run_id else None
                link = rep.ml.link(run) if run is not None else (f"run `{run_id[:8]}`" if run_id else "no MLflow run")
                rows.append(
                    [
                        label,
                        e.get("status", "?"),
                        fmt(tr.get(f"val_{mon}"), mon),
                        fmt(ev.get(f"test_{mon}"), mon),
                        fmt(tr.get("num_params"), "num_params"),
                        fmt(tr.get("train_samples_per_s")),
                        fmt(tr.get("train_time_s")),
                        str(tr.get("stopped", "—")),
                        f"{link} · {short(ev.get('git_commit') or results.get('git_commit'))}",
                    ]
                )
                labels.append(label)
                val.append(tr.get(f"val_{mon}") if is_number(tr.get(f"val_{mon}")) else None)
                test.append(ev.get(f"test_{mon}") if is_number(ev.get(f"test_{mon}")) else None)
        d.add(
            Para(
                f"Task `{results.get('task')}`, profile `{results.get('profile')}`, command `{results.get('command')}`, "
                f"commit {short(results.get('git_commit'))}."
            ),
            Table(
                [
                    "point",
                    "status",
                    f"val {mon}",
                    f"test {mon}",
                    "parameters",
                    "train samples/s",
                    "net train s",
                    "stopped",
                    "run · commit",
                ],
                rows,
                "llrrrrrll",
            ),
        )
        if any(v is not None for v in val + test):
            img = rep.figure(
                f"ablation_{name}",
                lambda p, n=name: plots.ablation_plot(
                    labels, {"validation": val, "test": test}, f"ablation {n}: {mon}", mon, p
                ),
            )
            if img:
                img.caption = f"ablation `{name}`: {mon} per point"
                d.add(img)
        not_run = [e["label"] for e in results.get("points", []) if e.get("status") != "ok"]
        if not_run:
            rep.missing.append(
                f"ablation `{name}`: points not finished: {', '.join(not_run)} "
                f"(`python -m pipelines.ablate --grid {name} --resume`)"
            )
    return d.blocks
