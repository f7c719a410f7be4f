"""The report's Figures section: training curves (and their `dvc plots` data), the evaluate stage's own figures and
confusion matrices, score against parameters beside the papers', sample grids and frontier plots. Drawing is
``swarmlab.plots``; this module only chooses what to show."""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarmlab.document import Document, Heading, Para
from swarmlab import plots
from swarmlab.drive.report.cells import is_number, rel
from swarmlab.drive.report.dvc_plots import PLOTS, confusion_csv, curve_csv

if TYPE_CHECKING:  # a type only: assemble imports this module
    from swarmlab.drive.report.assemble import Report


def figures_section(rep: Report) -> list:

    d = Document("")
    d.add(Heading(2, "Figures"), Heading(3, "Training curves"))
    drawn = False
    for k in rep.keys:
        t = rep.tasks[k]
        if not t.histories:
            continue
        img = rep.figure(
            f"curves_{k}", lambda p, t=t: plots.training_curves(t.histories, t.monitor, f"{t.key}: training curves", p)
        )
        if img:
            img.caption = f"`{k}`: loss and validation {t.monitor} per evaluation, from `{rel(t.train_dir, rep.reports)}/history/`"
            d.add(img)
            drawn = True
        for model, rows in sorted(t.histories.items()):
            rep.plot_files[f"{PLOTS}/curves/{k}/{model}.csv"] = curve_csv(rows, t.monitor)
    if not drawn:
        d.add(Para("No training history yet (`reports/train/<task>/history/*.csv`)."))

    d.add(Heading(3, "Confusion matrices and the tasks' own evaluation figures"))
    drawn = False
    for k in rep.keys:
        t = rep.tasks[k]
        for p in t.eval_plots:
            d.add(rep.embed(p, f"`{k}`: `{rel(p, rep.reports)}` (evaluate stage, test split)"))
            drawn = True
        for model in sorted(t.evaluate):
            cm = (t.evaluate[model] or {}).get("confusion_matrix")
            if isinstance(cm, list) and cm and all(isinstance(r, list) for r in cm):
                rep.plot_files[f"{PLOTS}/confusion/{k}/{model}.csv"] = confusion_csv(cm)
    if not drawn:
        d.add(Para("No evaluation figures yet (`reports/evaluate/<task>/plots/`)."))

    d.add(
        Heading(3, "Score against parameters (paper 003 Figure 2 style)"),
        Para(
            "Our models (dots; our frontier dashed) and the papers' rows that state a parameter count (crosses), per task."
        ),
    )
    drawn = False
    for k in rep.keys:
        t = rep.tasks[k]
        metric = f"test_{t.monitor}" if t.evaluate else f"val_{t.monitor}"
        ours = [(m, t.value(m, "num_params"), t.value(m, metric)) for m in t.models]
        ours = [o for o in ours if is_number(o[1]) and is_number(o[2])]
        papers = [
            (b["model"], b["metrics"]["num_params"], b["metrics"][metric])
            for b in rep.baselines
            if b["task"] == k and "num_params" in b["metrics"] and metric in b["metrics"]
        ]
        if not ours and len(papers) < 2:
            continue
        img = rep.figure(
            f"params_{k}",
            lambda p, k=k, o=ours, pp=papers, m=metric, t=t: plots.metric_vs_params(
                o, pp, m, t.mode == "min", f"{k}: {m} against parameters", p
            ),
        )
        if img:
            img.caption = f"`{k}`: {metric} against parameter count"
            d.add(img)
            drawn = True
    if not drawn:
        d.add(Para("Nothing to plot yet."))

    d.add(Heading(3, "Sample grids"))
    drawn = False
    for k in rep.keys:
        t = rep.tasks[k]
        for p in t.samples:
            d.add(rep.embed(p, f"`{k}`: `{rel(p, rep.reports)}` (files: {', '.join(t.sample_files)})"))
            drawn = True
    if not drawn:
        d.add(Para("No sample grids yet (`reports/sample/<task>/`, the image track's `sample@<task>` stage)."))

    d.add(Heading(3, "Frontier plots (set track)"))
    drawn = False
    for k in rep.keys:
        for p in rep.tasks[k].frontier:
            d.add(rep.embed(p, f"`{k}`: `{rel(p, rep.reports)}`"))
            drawn = True
    if not drawn:
        d.add(Para("No frontier plots yet (`reports/frontier/<task>/`, the set track's `frontier@<task>` stage)."))
    return d.blocks
