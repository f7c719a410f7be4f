"""Our numbers beside the papers': per task and paper table, the paper's rows and our runs of the exact configurations
they name (``swarmlab.drive.report.baselines.matches``), each test number with its 95% interval; where a matched number
disagrees beyond the paper's stated noise (``rep.disagreements``, which ``memory`` adds to as well); and the paper
rows logged to MLflow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarmlab.document import Bullets, Document, Heading, Para, Table
from swarmlab.drive.report import stats
from swarmlab.drive.report.baselines import EXPERIMENT, matches
from swarmlab.drive.report.cells import fmt, profile_heading, rounding
from swarmlab.drive.report.inputs import TaskData
from swarmlab.drive.report.ledger import run_tuning
from swarmlab.drive.report.presentation import RUNTIME_PREFIXES, TASKS

if TYPE_CHECKING:  # a type only: assemble imports this module
    from swarmlab.drive.report.assemble import Report


def papers_section(rep: Report) -> list:
    d = Document("")
    d.add(
        Heading(2, profile_heading("Our numbers beside the papers'", rep.params.get("profile"))),
        Para(
            "Per task and per paper table: the paper's rows, then our runs of the models the table names. Each paper "
            "row names the registered model and the config fields it fixes (`ours`, `overrides` in "
            "`pipelines/paper_baselines.yaml`); a run of ours is set against a row only when its effective config "
            "has every one of those fields (column *matches*), never against the closest row. Test numbers carry "
            "their 95% interval (bootstrap over the test items, or across seeds)."
        ),
    )
    tasks = [k for k in rep.keys if any(b["task"] == k for b in rep.baselines)]
    for k in tasks:
        t = rep.tasks[k]
        d.add(Heading(3, f"`{k}`: {TASKS.get(k, {}).get('title', k)}"))
        groups: dict[tuple, list] = {}
        for b in rep.baselines:
            if b["task"] == k:
                groups.setdefault((b["source"], b["where"]), []).append(b)
        for (source, where), entries in groups.items():
            metrics = []
            for b in entries:
                metrics += [m for m in b["metrics"] if not m.endswith("_std") and m not in metrics]
            wanted = list(dict.fromkeys(b["ours"] for b in entries if b.get("ours")))
            ours = [key for key in t.models if t.model_of(key) in wanted]
            matched = {
                key: [
                    b
                    for b in entries
                    if b.get("ours") == t.model_of(key) and matches(b, rep.config_of(k, t.model_of(key)))
                ]
                for key in ours
            }
            rows = []
            for b in entries:
                label = b["model"] + (f" ({b['config']})" if b.get("config") else "")
                runs = [key for key in ours if b in matched[key]]
                rows.append(
                    [f"{label} — paper"]
                    + [rep.paper_cell(b, m) for m in metrics]
                    + [
                        ", ".join(f"`{r}`" for r in runs) if runs else no_match(rep, k, b),
                        "the authors' own tuning",
                        rep.paper_link(b),
                    ]
                )
            for key in ours:
                hits = matched[key]
                rows.append(
                    [f"`{key}` — ours"]
                    + [our_cell(rep, k, key, m) for m in metrics]
                    + [
                        ", ".join(f"`{b['key']}`" for b in hits)
                        if hits
                        else f"no row: its config ({config_text(rep, k, t.model_of(key), entries)}) is none of the table's",
                        tuning_cell(rep, k, key),
                        rep.provenance(t, key),
                    ]
                )
                for b in hits:
                    check_against(rep, t, key, b)
            missing = [m for m in wanted if not any(t.model_of(key) == m for key in t.models)]
            for model in missing:
                rows.append(
                    [f"`{model}` — ours"]
                    + ["not run"]
                    + [""] * (len(metrics) - 1)
                    + ["", "", f"`dvc repro evaluate@{k}` with `{model}` in `tasks.{k}.models`"]
                )
            d.add(
                Heading(4, f"{rep.sources[source].get('short', source)}: {where}"),
                Table(
                    ["model"] + metrics + ["matches", "settings chosen", "source / run · commit · command"],
                    rows,
                    "l" + "r" * len(metrics) + "lll",
                ),
            )
            notes = [f"{b['model']}: {b['note']}" for b in entries if b.get("note")]
            if notes:
                d.add(Bullets(notes))
        protocol = TASKS.get(k, {}).get("protocol")
        if protocol:
            d.add(Para("**Protocol for this task:** " + " ".join(protocol)))
        if not t.models:
            d.add(
                Para(
                    f"No run of ours on `{k}` at profile `{rep.params.get('profile')}` (see What is missing; the "
                    "claims ledger above reads the `claims` profile's runs too)."
                )
            )
    return d.blocks


def tuning_cell(rep: Report, task: str, key: str) -> str:
    """How a run of ours had its settings chosen (its training's record; swarmlab/drive/tuning.py): pinned in
    params.yaml, or by its sweep (trials and budget per trial)."""
    r = rep.result_of(task, key)
    return run_tuning(r) if r is not None else "pinned"


def config_text(rep: Report, task: str, model: str, entries: list[dict]) -> str:
    cfg = rep.config_of(task, model) or {}
    fields = sorted({f for b in entries for f in (b.get("overrides") or {})})
    return ", ".join(f"{f}={cfg.get(f)}" for f in fields) or "unknown"


def no_match(rep: Report, task: str, entry: dict) -> str:
    if not entry.get("ours"):
        return "no counterpart here"
    over = entry.get("overrides") or {}
    spec = ", ".join(f"{k}: {v}" for k, v in over.items())
    return (
        f"no matching run: set `tasks.{task}.model_overrides.{entry['ours']}` to `{{{spec}}}` in the profile "
        f"(with `{entry['ours']}` in `tasks.{task}.models`), then `dvc repro evaluate@{task}`"
        if over
        else f"no run: add `{entry['ours']}` to `tasks.{task}.models`, `dvc repro evaluate@{task}`"
    )


def our_interval(rep: Report, task: str, key: str, metric: str):
    """(value, Interval or None) of one run's metric; an interval for test metrics with per-item scores."""
    r = rep.result_of(task, key)
    if r is None:
        return rep.tasks[task].value(key, metric), None
    value = r.value(metric) if r.value(metric) is not None else rep.tasks[task].value(key, metric)
    if metric.startswith("test_") and r.items is not None:
        try:
            return value, stats.bootstrap(r.items, metric[5:])
        except (KeyError, ValueError):
            pass
    return value, None


def our_cell(rep: Report, task: str, key: str, metric: str) -> str:
    value, iv = our_interval(rep, task, key, metric)
    if iv is not None:
        return f"{fmt(iv.value, metric)} [{fmt(iv.lo, metric)}, {fmt(iv.hi, metric)}]"
    if value is not None and metric.startswith("test_") and not metric.startswith(RUNTIME_PREFIXES):
        return f"{fmt(value, metric)} (no interval: no per-item scores)"
    return fmt(value, metric)


def check_against(rep: Report, t: TaskData, key: str, entry: dict):
    """Our run against a row it matches, metric by metric: a disagreement when our 95% interval lies outside the
    paper's value give or take its stated noise (or its rounding); without an interval nothing is called."""
    m = entry["metrics"]
    for metric, paper in m.items():
        if metric.endswith("_std") or metric == "num_params":
            continue
        if any(other < metric and m[other] == -paper for other in m if not other.endswith("_std")):
            continue  # the same number under another name (loss = -log-likelihood)
        value, iv = our_interval(rep, t.key, key, metric)
        if value is None:
            continue
        std = m.get(f"{metric}_std")
        noise = std if std is not None else rounding(paper)
        stated = (
            f"± {fmt(std, metric)} (stated)"
            if std is not None
            else f"± {fmt(noise, metric)} (rounding; no noise stated)"
        )
        label = f"`{key}` vs {entry['model']}{' (' + entry['config'] + ')' if entry.get('config') else ''}"
        if iv is None:
            rep.uncalled.append(
                f"`{t.key}` {label} {metric}: ours {fmt(value, metric)}, paper {fmt(paper, metric)} "
                f"— no interval, so no call"
            )
            continue
        if iv.lo > paper + noise or iv.hi < paper - noise:
            rep.disagreements.append(
                [
                    f"`{t.key}`",
                    label,
                    metric,
                    fmt(paper, metric),
                    f"{fmt(iv.value, metric)} [{fmt(iv.lo, metric)}, {fmt(iv.hi, metric)}]",
                    fmt(iv.value - paper, metric),
                    stated,
                    f"{entry['source']} {entry['where']}",
                    iv.test,
                ]
            )


def disagreement_section(rep: Report) -> list:
    d = Document("")
    d.add(
        Heading(2, profile_heading("Where we disagree with a paper beyond its stated noise", rep.params.get("profile")))
    )
    if not rep.disagreements:
        d.add(Para("No matched number of ours has its 95% interval outside the paper's value ± its stated noise."))
    else:
        d.add(
            Para(
                "Every metric where our run of a paper row's exact configuration has its 95% interval outside the "
                "paper's value ± the paper's stated standard deviation (or, where it states none, ± the rounding "
                "of its printed number). Why they differ is for the ledger and the protocol notes: budgets differ "
                "by profile."
            ),
            Table(
                [
                    "task",
                    "model",
                    "metric",
                    "paper",
                    "ours [95%]",
                    "ours − paper",
                    "paper's noise",
                    "paper row",
                    "test / measure",
                ],
                rep.disagreements,
                "lllrrrlll",
            ),
        )
    if rep.uncalled:
        d.add(
            Para(
                "Matched numbers without an interval (their runs saved no per-item scores), so neither agreement "
                "nor disagreement is called:"
            ),
            Bullets(rep.uncalled),
        )
    return d.blocks


def baselines_section(rep: Report) -> list:
    d = Document("")
    d.add(
        Heading(2, "Paper baselines in MLflow"),
        Para(
            f"`python -m pipelines.paper_baselines` logs each row of `pipelines/paper_baselines.yaml` as a run of "
            f"experiment `{EXPERIMENT}` (tags `source=paper`, `citation`, `baseline_key`); rerunning it adds no "
            "duplicates. Metric names are ours, so the MLflow UI compares them with our runs column by column."
        ),
    )
    rows = [
        [
            f"`{b['key']}`",
            f"`{b['task']}`",
            b["model"] + (f" ({b['config']})" if b.get("config") else ""),
            f"`{b['ours']}`" if b.get("ours") else "—",
            ", ".join(f"{m} {rep.paper_cell(b, m)}" for m in b["metrics"] if not m.endswith("_std")),
            rep.ml.link(rep.paper_runs[b["key"]])
            if b["key"] in rep.paper_runs
            else ("not logged" if rep.ml.ok else "—"),
        ]
        for b in rep.baselines
    ]
    d.add(
        Table(["key", "task", "paper's model", "ours", "numbers", "MLflow"], rows, "llllll"),
        Para("Sources:"),
        Bullets([f"**{k}**: {v['citation']}" for k, v in sorted(rep.sources.items())]),
    )
    return d.blocks
