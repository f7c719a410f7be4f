"""Memory scaling beside paper 000 Figure 3: our forward's memory increment per model at the largest N measured
(``reports/memory_scaling/``, ``dvc repro memory_scaling``) against the paper's figure at N = 100,000; a difference
beyond the paper's rounding is a disagreement (``rep.disagreements``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from swarmlab.document import Document, Heading, Para, Table
from swarmlab.drive.report.cells import fmt, is_number, rounding, short
from swarmlab.drive.report.inputs import read_json
from swarmlab.drive.report.presentation import MEMORY_REASON

if TYPE_CHECKING:  # a type only: assemble imports this module
    from swarmlab.drive.report.assemble import Report


def memory_section(rep: Report) -> list:
    d = Document("")
    d.add(Heading(2, "Memory scaling (paper 000 Figure 3)"))
    folder = rep.reports / "memory_scaling"
    results = read_json(folder / "results.json")
    if not results:
        rep.missing.append("memory scaling: no `reports/memory_scaling/results.json`: `dvc repro memory_scaling`")
        d.add(Para("Not run yet: `dvc repro memory_scaling`."))
        return d.blocks
    env = results.get("environment") or {}
    d.add(
        Para(
            f"One inference forward per (model, N), each in its own process, on `{env.get('device', '?')}` "
            f"(torch {env.get('torch', '?')}, commit {short(env.get('git_commit'))}, `dvc repro memory_scaling`). "
            "Ours is the forward's memory increment (peak minus baseline); the paper's is its Figure 3 text at "
            "N = 100,000, measured on a GPU."
        )
    )
    if (folder / "memory_scaling.png").is_file():
        d.add(rep.embed(folder / "memory_scaling.png", "`memory_scaling/memory_scaling.png`"))
    tokens = max((p.get("tokens", 0) for p in results.get("points", [])), default=0)
    if not tokens:
        d.add(Para("`reports/memory_scaling/results.json` holds no points."))
        return d.blocks
    paper = {b["ours"]: b for b in rep.baselines if b["task"] == "memory_scaling" and b.get("ours")}
    rows = []
    for p in results.get("points", []):
        if p.get("tokens") != tokens:
            continue
        ours = p.get("increment_bytes") / 1e9 if is_number(p.get("increment_bytes")) else None
        b = paper.get(p["model"])
        pv = b["metrics"].get("memory_gb_at_100k") if b and tokens == 100000 else None
        if pv is not None and ours is not None and abs(ours - pv) > rounding(pv):
            rep.disagreements.append(
                [
                    "`memory_scaling`",
                    f"`{p['model']}` vs {b['model']}",
                    "memory_gb_at_100k",
                    fmt(pv),
                    fmt(ours),
                    fmt(ours - pv),
                    f"± {fmt(rounding(pv))} (rounding; no noise stated)",
                    f"{b['source']} {b['where']}",
                    MEMORY_REASON,
                ]
            )
        rows.append(
            [
                f"`{p['model']}`",
                p.get("status", "?"),
                fmt(ours) + " GB"
                if ours is not None
                else (
                    f"predicted {fmt(p['predicted_bytes'] / 1e9)} GB" if is_number(p.get("predicted_bytes")) else "—"
                ),
                fmt(p.get("time_s")) + " s" if is_number(p.get("time_s")) else "—",
                (fmt(pv) + " GB") if pv is not None else "",
                (rep.paper_link(b) if b else ""),
            ]
        )
    d.add(
        Heading(3, f"At N = {tokens:,} tokens"),
        Table(["model", "status", "ours (increment)", "time", "paper", "paper row"], rows, "llrrrl"),
    )
    table_md = folder / "table.md"
    if table_md.is_file():
        d.add(Heading(3, "Every point (`memory_scaling/table.md`)"))
        d.add(*markdown_blocks(table_md.read_text(encoding="utf-8")))
    return d.blocks


def markdown_blocks(text: str) -> list:
    """A Markdown fragment of pipe tables and paragraphs (benchmark tables) as document blocks."""
    blocks, table, para = [], [], []

    def flush():
        if table:
            cells = [
                [c.strip() for c in ln.strip().strip("|").split("|")]
                for ln in table
                if not re.match(r"^\|[-:| ]+\|$", ln.strip())
            ]
            if cells:
                blocks.append(Table(cells[0], cells[1:]))
            table.clear()
        if para:
            blocks.append(Para(" ".join(para)))
            para.clear()

    for line in text.splitlines():
        if line.strip().startswith("|"):
            if para:
                flush()
            table.append(line)
        elif line.strip():
            if table:
                flush()
            blocks.append(Para(line.strip()))
        else:
            flush()
    flush()
    return blocks
