"""The papers' numbers (``pipelines/paper_baselines.yaml``, loaded by ``swarmlab.drive.report.baselines``) as MLflow runs,
idempotently, and as the markdown table the ``paper_baselines`` stage writes.

Each entry of the table becomes one finished run in the experiment ``paper-baselines``, tagged ``source=paper``,
``citation``, ``baseline_key`` (the entry's stable key) and ``baseline_hash`` (of its content), with the numbers as
metrics in this project's names (``test_accuracy``, ``val_loss``, ...) so that the MLflow UI compares them with our
runs column by column. A rerun finds each run by its key: an unchanged entry is left alone, a changed one replaces
its run (params are write-once in MLflow), and a run whose key left the table is deleted; the experiment never
holds two runs of one key.
"""

from __future__ import annotations

import hashlib
import json
import time

from swarmlab.paths import tracking_uri
from swarmlab.drive.report.baselines import EXPERIMENT
from swarmlab.tracking import TRAINING_VIEW_TAGS, MlflowTracker, open_client


def entry_hash(entry: dict, citation: str) -> str:
    """A digest of everything a baseline run records: a changed entry gets a new run."""
    blob = json.dumps({"entry": entry, "citation": citation}, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_name(entry: dict) -> str:
    """``<model> [<config>] | <task> [<paper> <where>]``: unique in the experiment (one paper's table can hold a model
    on several tasks: LRA's Transformer on Text and on ListOps)."""
    config = f" {entry['config']}" if entry.get("config") else ""
    return f"{entry['model']}{config} | {entry['task']} [{entry['source']} {entry['where']}]"


def run_tags(entry: dict, source: dict, digest: str) -> dict:
    note = [
        f"**{entry['model']}**{' (' + entry['config'] + ')' if entry.get('config') else ''}: {source['citation']}, "
        f"{entry['where']}."
    ]
    if entry.get("quote"):
        note.append(f'\n\nAs printed: "{entry["quote"]}"')
    if entry.get("note"):
        note.append(f"\n\nNote: {entry['note']}")
    return {
        "source": "paper",
        "citation": source["citation"],
        "baseline_key": entry["key"],
        "baseline_hash": digest,
        "paper": entry["source"],
        "where": entry["where"],
        "task": entry["task"],
        "model": entry["model"],
        "ours": entry.get("ours") or "",
        "stage": "paper_baselines",
        "mlflow.note.content": "".join(note),
    }


def ensure_training_view(client) -> None:
    """Tag every experiment of the store so that the MLflow 3 UI opens its runs table (model-training view)."""
    from mlflow.entities import ViewType  # mlflow: heavy, and only a tracked run needs it

    for exp in client.search_experiments(view_type=ViewType.ACTIVE_ONLY):
        for key, value in TRAINING_VIEW_TAGS.items():
            if exp.tags.get(key) != value:
                client.set_experiment_tag(exp.experiment_id, key, value)


def log_baselines(sources: dict, entries: list[dict], uri: str | None = None) -> dict:
    """Make the store's ``paper-baselines`` experiment hold exactly one finished run per entry.

    Returns ``{"experiment_id": ..., "runs": {key: run_id}, "created": n, "replaced": n, "deleted": n}``.
    """
    from mlflow.entities import Metric, Param, RunTag  # mlflow: heavy, and only a tracked run needs it

    uri = uri or tracking_uri()
    client = open_client(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is not None and exp.lifecycle_stage == "deleted":
        client.restore_experiment(exp.experiment_id)
    exp_id = exp.experiment_id if exp else MlflowTracker.create_experiment(client, uri, EXPERIMENT)
    client.set_experiment_tag(
        exp_id,
        "mlflow.note.content",
        "The papers' numbers (pipelines/paper_baselines.yaml), one run per table row, tagged "
        "source=paper with the citation. Compare them with a task's runs by selecting both "
        "experiments.",
    )
    ensure_training_view(client)

    existing: dict[str, list] = {}
    page = None
    while True:
        found = client.search_runs(
            [exp_id], "tags.source = 'paper'", max_results=1000, page_token=page, order_by=["attributes.start_time ASC"]
        )
        for run in found:
            existing.setdefault(run.data.tags.get("baseline_key", ""), []).append(run)
        page = found.token
        if not page:
            break

    runs, counts = {}, {"created": 0, "replaced": 0, "deleted": 0}
    wanted = {e["key"] for e in entries}
    for key, stale in existing.items():  # keys that left the table, and duplicates from a race (keep the oldest)
        for run in stale if key not in wanted else stale[1:]:
            client.delete_run(run.info.run_id)
            counts["deleted"] += 1
    for entry in entries:
        source = sources[entry["source"]]
        digest = entry_hash(entry, source["citation"])
        previous = (existing.get(entry["key"]) or [None])[0]
        if previous is not None and previous.data.tags.get("baseline_hash") == digest:
            runs[entry["key"]] = previous.info.run_id
            if previous.info.run_name != run_name(entry):  # named by an older rule: renamed, the run id kept
                client.update_run(previous.info.run_id, name=run_name(entry))
            continue
        if previous is not None:
            client.delete_run(previous.info.run_id)
            counts["replaced"] += 1
        else:
            counts["created"] += 1
        run = client.create_run(exp_id, run_name=run_name(entry))
        now = int(time.time() * 1000)
        params = {
            "task": entry["task"],
            "model": entry["model"],
            "ours": entry.get("ours") or "-",
            "config": entry.get("config") or "-",
            "where": entry["where"],
            "paper": entry["source"],
        }
        client.log_batch(
            run.info.run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in sorted(entry["metrics"].items())],
            params=[Param(k, str(v)) for k, v in sorted(params.items())],
            tags=[RunTag(k, str(v)) for k, v in sorted(run_tags(entry, source, digest).items())],
        )
        client.set_terminated(run.info.run_id, "FINISHED")
        runs[entry["key"]] = run.info.run_id
    return {"experiment_id": exp_id, "runs": runs, **counts}


def _metric_text(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1e5 else f"{value:g}"


def baselines_markdown(sources: dict, entries: list[dict]) -> str:
    lines = [
        "# Paper baselines (logged to MLflow, experiment `paper-baselines`)",
        "",
        "Generated by `python -m pipelines.paper_baselines` from `pipelines/paper_baselines.yaml`.",
        "",
        "| key | task | paper's model | ours | metrics | source |",
        "|---|---|---|---|---|---|",
    ]
    for e in entries:
        metrics = ", ".join(f"{k} {_metric_text(v)}" for k, v in sorted(e["metrics"].items()))
        model = e["model"] + (f" ({e['config']})" if e.get("config") else "")
        lines.append(
            f"| `{e['key']}` | {e['task']} | {model} | {e.get('ours') or '-'} | {metrics} | {e['source']} {e['where']} |"
        )
    lines += ["", "Sources:", ""] + [f"- **{k}**: {v['citation']}" for k, v in sorted(sources.items())]
    return "\n".join(lines) + "\n"
