"""The report's tables per task that are not the papers': what was read (status), every model per task
(cross-family, with its budget and side runs), runtime, the data summaries, and how to reproduce it all.
Each section is a function of the ``Report`` (``swarmlab.drive.report.assemble``) that returns document blocks and adds
what it finds missing to ``rep.missing``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarmlab.document import Code, Document, Heading, Para, Table
from swarmlab.engine.config import TrainConfig
from swarmlab.drive.report.baselines import EXPERIMENT
from swarmlab.drive.report.cells import fmt, is_number, profile_heading
from swarmlab.drive.report.presentation import BENCHMARKS, RUNTIME_PREFIXES
from swarmlab.drive.report.side import side_rows
from swarmlab.settings import fields_with, flatten

if TYPE_CHECKING:  # a type only: assemble imports this module
    from swarmlab.drive.report.assemble import Report


def status_section(rep: Report) -> list:
    rows = []
    for k in rep.keys:
        t = rep.tasks[k]
        yes = lambda ok, n="": ("yes" + (f" ({n})" if n else "")) if ok else "**missing**"  # noqa: E731
        optional = lambda ok: "yes" if ok else "—"  # noqa: E731
        papers = sum(1 for b in rep.baselines if b["task"] == k)
        rows.append(
            [
                f"`{k}`",
                "yes" if t.section is not None else "**no section**",
                t.registered if not t.registry_note else f"{t.registered} (not registered)",
                yes(bool(t.train), f"{len(t.train)} models"),
                yes(bool(t.evaluate), f"{len(t.evaluate)} models"),
                optional(t.sweep),
                optional(t.data),
                optional(t.samples),
                optional(t.frontier),
                str(papers),
            ]
        )
        notes = []
        if t.section is None:
            notes.append(f"no `tasks.{k}` section in params.yaml on this branch (its track has not landed)")
        if t.registry_note:
            notes.append(t.registry_note)
        if t.skipped:
            notes.append(f"skipped by profile `{rep.params.get('profile')}`: {t.skipped}")
        elif not t.train:
            notes.append(f"no `reports/train/{k}/metrics.json` (`dvc repro train@{k}`)")
        if not t.evaluate and not t.skipped:
            notes.append(f"no `reports/evaluate/{k}/metrics.json` (`dvc repro evaluate@{k}`)")
        if notes:
            rep.missing_by_task[k] = notes
    if rep.ml.ok and len(rep.paper_runs) < len(rep.baselines):
        rep.missing.append(
            f"paper baselines: {len(rep.baselines) - len(rep.paper_runs)} of the table's rows have no "
            f"run in `{EXPERIMENT}`: `python -m pipelines.paper_baselines`"
        )
    if not rep.ml.ok:
        rep.missing.append(f"MLflow: {rep.ml.status}")
    return [
        Heading(2, "Status: what was read"),
        Table(
            [
                "task",
                "params section",
                "registered task",
                "train",
                "evaluate",
                "sweep",
                "data",
                "samples",
                "frontier",
                "paper rows",
            ],
            rows,
            "llllllllll",
        ),
        Para(
            f"MLflow store: {rep.ml.status}. Paper baselines in MLflow: "
            f"{len(rep.paper_runs)} of {len(rep.baselines)} runs found in experiment `{EXPERIMENT}`."
        ),
    ]


def cross_family_section(rep: Report) -> list:
    d = Document("")
    d.add(
        Heading(2, profile_heading("Cross-family comparison", rep.params.get("profile"))),
        Para(
            "Every model run on a task, at that task's settings of the active profile: the same data, the same "
            "engine, the same budget (the `stopped` column says which limit ended each run). Side runs (below "
            "each table) used the same settings unless their README says otherwise."
        ),
    )
    for k in rep.keys:
        t = rep.tasks[k]
        if not t.models and not side_rows(rep, k):
            continue
        d.add(Heading(3, f"`{k}`"))
        mon = t.monitor
        extra_loss = mon != "loss"  # the test loss beside a monitored score
        header = (
            ["model", "parameters", f"val {mon}", f"test {mon}"]
            + (["test loss"] if extra_loss else [])
            + ["train samples/s", "net train s", "steps", "stopped", "peak memory", "run · commit · command"]
        )
        rows = []
        for model in t.models:
            tr, ev = t.train.get(model) or {}, t.evaluate.get(model) or {}
            mem = (
                f"{fmt(ev.get('peak_memory_mb'), 'peak_memory_mb')} MB ({ev.get('peak_memory_kind', '?')}, {ev.get('device', '?')})"
                if is_number(ev.get("peak_memory_mb"))
                else "—"
            )
            rows.append(
                [
                    f"`{model}`",
                    fmt(t.value(model, "num_params"), "num_params"),
                    fmt(tr.get(f"val_{mon}"), mon),
                    fmt(ev.get(f"test_{mon}"), mon),
                ]
                + ([fmt(ev.get("test_loss"), "loss")] if extra_loss else [])
                + [
                    fmt(tr.get("train_samples_per_s")),
                    fmt(tr.get("train_time_s")),
                    fmt(tr["steps"]) if "steps" in tr else (f"{tr['epochs']} epochs" if "epochs" in tr else "—"),
                    str(tr.get("stopped", "—")),
                    mem,
                    rep.provenance(t, model),
                ]
            )
        if rows:
            d.add(Table(header, rows, "l" + "r" * (len(header) - 4) + "lll"))
        settings = budget(rep, k)
        if settings:
            d.add(Para(f"Budget (profile `{rep.params.get('profile')}`): {settings}."))
        side = side_rows(rep, k)
        if side:
            d.add(
                Para(f"Side runs of `{k}` (not DVC outputs; their README gives the exact commands and settings):"),
                Table(
                    ["model", "parameters", f"val {mon}", f"test {mon}", "train samples/s", "side run"],
                    side,
                    "lrrrrl",
                ),
            )
        if t.kind:
            fitting = [m for m in rep.code.models_of_kind(t.kind) if m not in {t.model_of(k) for k in t.models}]
            if fitting:
                d.add(
                    Para(
                        f"Registered `{t.kind}` models not run on `{k}` in the pipeline: "
                        + ", ".join(f"`{m}`" for m in fitting)
                        + "."
                    )
                )
    return d.blocks


def budget(rep: Report, key: str) -> str:
    try:
        s = rep.code.train_settings(rep.params, key)
    except Exception:
        return ""
    keys = fields_with(TrainConfig, "budget")  # what TrainConfig declares as a run's budget
    text = ", ".join(f"{k} {s[k]}" for k in keys if k in s)
    own = {m: v for m, v in (rep.params["tasks"].get(key, {}).get("train") or {}).items() if isinstance(v, dict)}
    for model, values in sorted(own.items()):  # per-model settings (tasks.<task>.train.<model or glob>)
        text += f"; `{model}`: " + ", ".join(f"{k} {v}" for k, v in values.items())
    return text


def runtime_section(rep: Report) -> list:
    d = Document("")
    d.add(
        Heading(2, profile_heading("Runtime", rep.params.get("profile"))),
        Para(
            "Training throughput (net, from the train stage) and inference latency, throughput and peak memory "
            "(evaluate stage, test split), per task and model; then the papers' runtime figures."
        ),
    )
    rows = []
    for k in rep.keys:
        t = rep.tasks[k]
        for model in sorted(t.evaluate):
            ev, tr = t.evaluate[model] or {}, t.train.get(model) or {}
            rows.append(
                [
                    f"`{k}`",
                    f"`{model}`",
                    str(ev.get("device", "?")) + (" bf16" if ev.get("bf16_autocast") else ""),
                    fmt(tr.get("train_samples_per_s")),
                    str(ev.get("batch_size", "?")),
                    f"{fmt(ev.get('latency_ms_p50'))} / {fmt(ev.get('latency_ms_p95'))}",
                    fmt(ev.get("throughput_samples_per_s")),
                    f"{fmt(ev.get('peak_memory_mb'), 'peak_memory_mb')} ({ev.get('peak_memory_kind', '?')})",
                    rep.provenance(t, model),
                ]
            )
    if rows:
        d.add(
            Table(
                [
                    "task",
                    "model",
                    "device",
                    "train samples/s",
                    "eval batch",
                    "latency p50 / p95 ms",
                    "inference samples/s",
                    "peak memory MB",
                    "run · commit · command",
                ],
                rows,
                "lllrrrrll",
            )
        )
    else:
        d.add(Para("No evaluation yet."))
    paper_rows = [
        b
        for b in rep.baselines
        if any(m.startswith(RUNTIME_PREFIXES) for m in b["metrics"]) and b["task"] != "memory_scaling"
    ]
    if paper_rows:
        metrics = []
        for b in paper_rows:
            metrics += [m for m in b["metrics"] if m.startswith(RUNTIME_PREFIXES) and m not in metrics]
        d.add(
            Heading(3, "The papers' runtime figures"),
            Table(
                ["paper row", "task"] + metrics + ["where ours is"],
                align="ll" + "r" * len(metrics) + "l",
                rows=[
                    [f"{b['model']} — {b['source']} {b['where']}", f"`{b['task']}`"]
                    + [rep.paper_cell(b, m) for m in metrics]
                    + [BENCHMARKS.get(b["task"], "the table above")]
                    for b in paper_rows
                ],
            ),
        )
    return d.blocks


def data_section(rep: Report) -> list:
    d = Document("")
    d.add(Heading(2, "Data"))
    shown = False
    for k in rep.keys:
        data, steps = rep.tasks[k].data, rep.tasks[k].data_steps
        if data:
            flat = {kk: v for kk, v in flatten(data).items() if is_number(v) or isinstance(v, str)}
            d.add(
                Para(
                    f"`{k}` (`reports/data/{k}/<step>/metrics.json`, a step each: "
                    + ", ".join(f"`dvc repro {s}`" for s in steps)
                    + "):"
                    if steps
                    else f"`{k}` (`reports/data/{k}/metrics.json`, `dvc repro data@{k}`):"
                ),
                Table(["field", "value"], [[kk, fmt(v) if is_number(v) else str(v)] for kk, v in sorted(flat.items())]),
            )
            shown = True
    if not shown:
        d.add(Para("No data summaries yet."))
    return d.blocks


def reproduce_section(rep: Report) -> list:
    return [
        Heading(2, "Reproduce"),
        Code(
            "\n".join(
                [
                    "dvc repro                                   # every stage of the default profile, this report last",
                    "dvc exp run -S profile=smoke                # another profile as a DVC experiment",
                    "python -m pipelines.paper_baselines         # the papers' numbers into MLflow (idempotent)",
                    "python -m pipelines.ablate --list           # the ablation grids; then --grid <name>",
                    "python -m pipelines.report                  # this report, from whatever exists",
                    "dvc exp show; dvc plots diff                # compare DVC experiments (docs/tracking.md, Compare runs)",
                    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow server --host 127.0.0.1 --port 5000 --workers 1 \\",
                    "    --backend-store-uri sqlite:///$PWD/mlruns.db   # then open http://127.0.0.1:5000/#/experiments",
                ]
            )
        ),
    ]
