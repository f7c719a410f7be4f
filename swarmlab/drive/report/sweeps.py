"""The sweeps that chose settings (issue 37, tuning on the page): for every task whose models were searched (a
``chosen.json`` of tuning ``sweep``: the claims profile's under ``reports/claims/sweep/<task>/``, this profile's under
``reports/sweep/<task>/``, and side records under ``reports/side/<run>/sweep/<task>/``, which no run reads: a sweep
kept but not carried, its README says why), each model's trial count, the budget of one trial, its best validation
score, what was chosen or that it did not learn at this budget, and whether the task's decisive runs trained that
choice yet; then a figure of every trial's validation score against its learning rate, so that a reader sees whether
the range held the best one. A pinned task's record searched nothing and is not shown."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from swarmlab.document import Document, Heading, Para, Table
from swarmlab.drive.report import reruns
from swarmlab.drive.report.cells import fmt, is_number, rel
from swarmlab.drive.report.inputs import read_csv, read_json, side_dirs
from swarmlab.plots import COLORS, pyplot, save

if TYPE_CHECKING:  # a type only: assemble imports this module
    from swarmlab.drive.report.assemble import Report

LR = re.compile(r"(?:^|\s)lr=(\S+)")  # a trial's learning rate in summary.csv's params column ("lr=0.000161 ...")


def chosen_text(entry: dict, carried: bool = True) -> str:
    """A learned model's chosen values (engine settings, then model config), or why nothing was chosen."""
    if not entry.get("learned"):
        # the record names its objective (best_<metric>) after the word "best": say it once
        why = str(entry.get("why") or "did not learn at this budget").replace("best best_", "best ")
        return why + (": trains its pinned settings" if carried else "")
    chosen = {**(entry.get("train") or {}), **(entry.get("model_overrides") or {})}
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(chosen.items()))


def number(v) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:g}"


def trained_with(train_metrics: dict | None, model: str, sweep_id: str) -> str:
    """Whether the task's runs of ``model`` (its train stage's metrics.json) recorded this sweep as their tuning."""
    runs = [e for e in (train_metrics or {}).values() if isinstance(e, dict) and e.get("model") == model]
    if not runs:
        return "no run yet"
    used = [e for e in runs if str(e.get("tuning") or "").startswith(f"sweep {sweep_id}")]
    if len(used) == len(runs):
        return f"yes ({len(runs)} runs)"
    ways = sorted({str(e.get("tuning") or "pinned").split(":")[0] for e in runs if e not in used})
    return f"not yet: {len(runs) - len(used)} of {len(runs)} runs trained {' / '.join(ways)}"


def trial_points(rows: list[dict], metric: str) -> dict[str, list[tuple[float, float]]]:
    """Per model, (lr, validation score) of each finished trial whose params name a learning rate (``metric``: the
    validation metric, its column ``best_<metric>`` in a sweep's summary.csv, or ``<metric>``)."""
    points: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        match = LR.search(str(row.get("params") or ""))
        score = row.get(f"best_{metric}", row.get(metric))
        if row.get("status") in ("error", "interrupted") or match is None or not is_number(score):
            continue
        try:
            lr = float(match.group(1))
        except ValueError:
            continue
        points.setdefault(str(row.get("model")), []).append((lr, float(score)))
    return points


def trials_plot(
    points: dict[str, list[tuple[float, float]]], ringed: set[str], mode: str, chance, metric: str, title: str
):
    """``draw(path)``: every trial's validation score against its lr (log scale), one colour per model, the best
    trial of each model in ``ringed`` (the learned ones: the trial the sweep chose) ringed, the chance floor dashed."""

    def draw(path: Path):
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        for i, (model, pts) in enumerate(sorted(points.items())):
            color = COLORS[i % len(COLORS)]
            ax.scatter(*zip(*pts), color=color, label=model, s=24)
            if model in ringed:
                best = (max if mode == "max" else min)(pts, key=lambda p: p[1])
                ax.scatter([best[0]], [best[1]], s=110, facecolors="none", edgecolors=color, linewidths=1.5)
        if chance is not None:
            ax.axhline(chance, color="gray", linestyle="--", linewidth=1, label="chance")
        ax.set_xscale("log")
        ax.set(xlabel="learning rate (one point per trial)", ylabel=f"best {metric}", title=title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return save(fig, path)

    return draw


def _sweep_blocks(rep: Report, folder: Path, record: dict, source: str, again: str, train_metrics, side: bool) -> list:
    d = Document("")
    task, sweep_id, metric = record.get("task"), str(record.get("sweep_id")), str(record.get("metric") or "")
    metric = metric.removeprefix("best_")  # the sweep's objective is each trial's best validation score
    budget = record.get("budget") or {}
    per_trial = (
        " or ".join(
            f"{number(budget[k])} {unit}"
            for k, unit in (("time_budget_s", "net s"), ("max_steps", "steps"), ("max_epochs", "epochs"))
            if budget.get(k)
        )
        or "no limit"
    )
    chance = record.get("chance")
    floor = (
        f"; a model learned when its best trial beat chance ({chance[0]:.4f}, always the most frequent class, over "
        f"{chance[1]} validation rows) by two standard errors"
        if chance
        else ""
    )
    d.add(
        Heading(3, f"`{task}` ({source})"),
        Para(
            f"Sweep `{sweep_id}` at profile `{record.get('profile')}`"
            + (f" (`{again}`)" if again else "")
            + f": each model searched with its own trials of {per_trial}, chosen on validation ({metric}, "
            f"{record.get('mode')}){floor}. "
            + (
                "A side record: no run reads this choice."
                if side
                else "The task's decisive runs read the choice as a DVC dependency; the last column says whether "
                "they trained it yet."
            )
        ),
    )
    models = record.get("models") or {}
    rows = [
        [
            f"`{model}`",
            str(entry.get("trials", "—")),
            fmt(entry.get("score"), metric),
            "yes" if entry.get("learned") else "**no**",
            chosen_text(entry, carried=not side),
            "not carried (side record)" if side else trained_with(train_metrics, model, sweep_id),
        ]
        for model, entry in sorted(models.items())
    ]
    d.add(Table(["model", "trials", f"best {metric}", "learned", "settings chosen", "decisive runs"], rows, "lrrlll"))
    if not side and any(not e.get("learned") for e in models.values()):
        rep.missing.append(
            f"sweep `{task}` ({source}): "
            + ", ".join(f"`{m}`" for m, e in sorted(models.items()) if not e.get("learned"))
            + " did not learn at the sweep's budget: nothing was chosen for it"
        )
    points = trial_points(read_csv(folder / "summary.csv"), metric)
    if points:
        learned = {m for m, e in models.items() if e.get("learned")}
        # the figure named by where the sweep is kept: claims/sweep/<task> -> claims_, side/<run>/sweep/<task> ->
        # side_<run>_, sweep/<task> -> nothing
        tag = "".join(f"{part}_" for part in folder.relative_to(rep.reports).parts[:-2])
        image = rep.figure(
            f"sweep_{tag}{task}",
            trials_plot(
                points,
                learned,
                str(record.get("mode")),
                chance[0] if chance else None,
                metric,
                f"sweep {sweep_id}: {task}",
            ),
        )
        if image is not None:
            image.caption = (
                f"sweep `{sweep_id}` ({task}): each trial's best {metric} against its learning rate; ringed: the trial "
                f"chosen; dashed: chance"
            )
            d.add(image)
    summary = folder / "summary.md"
    if summary.is_file():
        d.add(Para(f"Every trial, ranked: [{rel(summary, rep.reports)}]({rel(summary, rep.reports)})."))
    return d.blocks


def sweep_section(rep: Report) -> list:
    d = Document("")
    d.add(
        Heading(2, "Sweeps: how the searched settings were chosen"),
        Para(
            "Ray Tune with Optuna's TPE over each model's space (params.yaml `sweep.spaces`), the same trial count and "
            "the same budget per trial for every model of a task, chosen on validation; the test split is not read. "
            "A task whose `tuning` is `pinned` searches nothing and is not listed. The claims profile's first."
        ),
    )
    # (folder, how the report names where it is from, the command that remakes it, its task's runs or None: a side
    # record, kept but not carried into any run)
    found = []
    for root, source, again, runs in (
        (
            rep.reports / "claims" / "sweep",
            "reports/claims/sweep (the `claims` profile)",
            reruns.CLAIMS_SWEEP,
            "claims",
        ),
        (rep.reports / "sweep", f"reports/sweep (profile `{rep.params.get('profile')}`)", reruns.SWEEP, ""),
    ):
        found += [(folder, source, again, runs) for folder in sorted(p for p in root.glob("*") if p.is_dir())]
    for side in side_dirs(rep.reports):
        for folder in sorted(p for p in (side / "sweep").glob("*") if p.is_dir()):
            found.append((folder, f"side record `{side.name}`, not carried: its README says why", "", None))
    shown = 0
    for folder, source, again, runs in found:
        record = read_json(folder / "chosen.json")
        if not isinstance(record, dict) or record.get("tuning") != "sweep" or not record.get("models"):
            continue
        metrics = read_json(rep.reports / runs / "train" / folder.name / "metrics.json") if runs is not None else None
        d.add(*_sweep_blocks(rep, folder, record, source, again.format(task=folder.name), metrics, runs is None))
        shown += 1
    if not shown:
        d.add(
            Para(
                "None yet: every task's settings are pinned in params.yaml. Sweep one with `bash scripts/claims.sh "
                "sweep <task>` (the claims profile) or `dvc repro sweeps/dvc.yaml:sweep@<task>` under `tuning: sweep`."
            )
        )
    return d.blocks
