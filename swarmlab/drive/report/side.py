"""The side runs under ``reports/side/``: runs made outside DVC with the same stages, each folder committed with a
README of its commands. Their rows go under each task's cross-family table (``side_rows``) and into a section of
their own (``side_section``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from swarmlab.document import Document, Heading, Para, Table
from swarmlab.drive.report.cells import fmt, is_number, prov_text, rel
from swarmlab.drive.report.inputs import side_dirs, side_metrics
from swarmlab.drive.report.presentation import TASKS
from swarmlab.drive.report.provenance import provenance

if TYPE_CHECKING:  # a type only: assemble imports this module
    from swarmlab.drive.report.assemble import Report


def side_rows(rep: Report, key: str) -> list[list[str]]:
    rows = []
    mon = rep.tasks[key].monitor if key in rep.tasks else "loss"
    for side in side_dirs(rep.reports):
        mapped = side.name in TASKS.get(key, {}).get("side", [])
        for d, tr, ev in side_metrics(side):
            if not (mapped or key in d.relative_to(side).parts):
                continue
            for model in sorted(set(tr) | set(ev)):
                a, b = tr.get(model) or {}, ev.get(model) or {}
                if not isinstance(a, dict) or not isinstance(b, dict):
                    continue
                rows.append(
                    [
                        f"`{model}`",
                        fmt(a.get("num_params", b.get("num_params")), "num_params"),
                        fmt(a.get(f"val_{mon}"), mon),
                        fmt(b.get(f"test_{mon}"), mon),
                        fmt(a.get("train_samples_per_s")),
                        f"[{rel(d, rep.reports)}]({rel(side, rep.reports)}/README.md) · "
                        f"{prov_text(provenance(b or a, d))}",
                    ]
                )
    return rows


def side_section(rep: Report) -> list:
    d = Document("")
    d.add(
        Heading(2, "Side runs (`reports/side/`)"),
        Para("Runs made outside DVC with the same stages, committed with their commands (each folder's README)."),
    )
    sides = side_dirs(rep.reports)
    if not sides:
        d.add(Para("None."))
        return d.blocks
    for side in sides:
        readme = side / "README.md"
        title = (
            next(
                (
                    ln.lstrip("# ").strip()
                    for ln in readme.read_text(encoding="utf-8").splitlines()
                    if ln.startswith("#")
                ),
                side.name,
            )
            if readme.is_file()
            else side.name
        )
        d.add(Heading(3, f"`{side.name}`: {title}"))
        if readme.is_file():
            d.add(Para(f"Commands and settings: [{rel(readme, rep.reports)}]({rel(readme, rep.reports)})."))
        for folder, tr, ev in side_metrics(side):
            metrics = sorted(
                {
                    k
                    for m in list(tr.values()) + list(ev.values())
                    if isinstance(m, dict)
                    for k, v in m.items()
                    if re.match(r"(val|test)_", k) and k != "test_rows" and is_number(v)
                }
            )
            rows = []
            for model in sorted(set(tr) | set(ev)):
                a, b = tr.get(model) or {}, ev.get(model) or {}
                if not isinstance(a, dict) or not isinstance(b, dict):
                    continue
                merged = {**a, **b}
                rows.append(
                    [f"`{model}`", fmt(merged.get("num_params"), "num_params")]
                    + [fmt(merged.get(m), m) for m in metrics]
                    + [fmt(a.get("train_samples_per_s")), prov_text(provenance(b or a, folder))]
                )
            d.add(
                Para(f"`{rel(folder, rep.reports)}`:"),
                Table(
                    ["model", "parameters"] + metrics + ["train samples/s", "commit"],
                    rows,
                    "l" + "r" * (len(metrics) + 2) + "l",
                ),
            )
    return d.blocks
