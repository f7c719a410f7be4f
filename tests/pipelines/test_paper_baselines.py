"""The papers' baselines: the table says what the papers print, and logging it to MLflow is idempotent."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from pipelines.paper_baselines import run_stage
from swarmlab.drive.report.baseline_runs import log_baselines
from swarmlab.drive.report.baselines import BASELINES_FILE, EXPERIMENT, load_baselines, normalise_quote
from swarmlab.errors import SwarmlabError
from tests.conftest import REPO_ROOT

PAPERS = Path(os.environ.get("SWARMLAB_PAPERS", REPO_ROOT.parent / "shared" / "papers"))
SOURCES, ENTRIES = load_baselines()


def numbers_in(text: str) -> list[float]:
    return [float(n.replace(",", ".")) for n in re.findall(r"\d+(?:[.,]\d+)?", text)]


def printed_as(value: float, printed: list[float]) -> bool:
    """``value`` (in our units) is one of the printed numbers, as a fraction of a percent, in k/M/G or per 1024."""
    for n in printed:
        for scale in (1, 100, 1e-3, 1e-6, 1 / 1024):
            if math_close(abs(value) * scale, n):
                return True
    return False


def math_close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def test_the_table_covers_what_the_issue_lists():
    keys = {e["key"] for e in ENTRIES}
    imdb = {e["model"]: e["metrics"] for e in ENTRIES if e["where"] == "Table 2" and e["task"] == "imdb"}
    assert imdb["SwarmFormer-Base"]["test_accuracy"] == 0.890 and imdb["SwarmFormer-Small"]["test_accuracy"] == 0.862
    assert {"BERT-base-cased", "RoBERTa-base", "DistilBERT", "ALBERT-base-v2"} <= set(imdb)
    assert all({"num_params", "test_precision", "test_recall"} <= set(m) for m in imdb.values())
    assert sum(e["where"] == "Table 2" and e["task"] == "clustering_direct" for e in ENTRIES) == 6
    assert sum(e["task"] == "clustering_mog" and e["source"] == "seed003" for e in ENTRIES) == 20
    assert any(k.startswith("seed002/") for k in keys)
    lra = {
        (e["task"], e["model"]): e["metrics"]["test_accuracy"] for e in ENTRIES if e["task"] in ("lra_text", "listops")
    }
    assert lra == {
        ("lra_text", "Transformer"): 0.6427,
        ("lra_text", "Longformer"): 0.6285,
        ("lra_text", "S4"): 0.8682,
        ("listops", "Transformer"): 0.3637,
        ("listops", "Longformer"): 0.3563,
        ("listops", "S4"): 0.5960,
    }


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.get("quote")], ids=lambda e: e["key"])
def test_each_quote_is_in_its_paper_and_holds_every_number(entry):
    paper = PAPERS / SOURCES[entry["source"]]["file"]
    if not paper.is_file():
        pytest.skip(f"{paper} is not on this machine (set SWARMLAB_PAPERS)")
    quote = normalise_quote(entry["quote"])
    assert quote in normalise_quote(paper.read_text(encoding="utf-8")), (
        f"{entry['key']}: quote not found in {paper.name}"
    )
    printed = numbers_in(quote)
    for metric, value in entry["metrics"].items():
        if metric == "test_loss" or metric == "train_loss":  # derived: minus the printed log-likelihood
            value = -entry["metrics"][metric.replace("loss", "loglik")]
        assert printed_as(value, printed), (
            f"{entry['key']}: {metric} = {value} is none of the printed numbers {printed}"
        )


def test_a_bad_table_is_a_one_line_error(tmp_path):
    raw = yaml.safe_load(BASELINES_FILE.read_text())
    dup = copy.deepcopy(raw)
    dup["baselines"].append(dup["baselines"][0])
    (tmp_path / "dup.yaml").write_text(yaml.safe_dump(dup))
    with pytest.raises(SwarmlabError, match="used twice"):
        load_baselines(tmp_path / "dup.yaml")
    bad = copy.deepcopy(raw)
    bad["baselines"][0]["metrics"]["test_accuracy"] = "89%"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(SwarmlabError, match="finite number"):
        load_baselines(tmp_path / "bad.yaml")


def test_logging_twice_adds_no_duplicates_and_edits_replace_their_run(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'store.db'}"
    entries = copy.deepcopy(ENTRIES[:3])
    first = log_baselines(SOURCES, entries, uri)
    second = log_baselines(SOURCES, entries, uri)
    assert first["created"] == 3 and second["created"] == second["replaced"] == second["deleted"] == 0
    assert first["runs"] == second["runs"]
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 3
    run = client.get_run(first["runs"][entries[0]["key"]])
    assert run.data.tags["source"] == "paper" and run.data.tags["citation"] == SOURCES[entries[0]["source"]]["citation"]
    assert run.data.metrics["test_accuracy"] == entries[0]["metrics"]["test_accuracy"] and run.info.status == "FINISHED"

    entries[1]["metrics"]["test_accuracy"] = 0.5  # an edited row replaces its run; a removed row's run goes
    third = log_baselines(SOURCES, entries[:2], uri)
    assert (third["created"], third["replaced"], third["deleted"]) == (0, 1, 1)
    assert third["runs"][entries[0]["key"]] == first["runs"][entries[0]["key"]]
    active = client.search_runs([exp.experiment_id])
    assert sorted(r.data.tags["baseline_key"] for r in active) == sorted(e["key"] for e in entries[:2])
    assert client.get_run(third["runs"][entries[1]["key"]]).data.metrics["test_accuracy"] == 0.5


def test_every_run_name_is_unique_and_says_its_task(tmp_path):
    """LRA's Transformer is a row on Text and on ListOps: the names must tell them apart in MLflow's runs table, and a
    run named by the older rule is renamed in place (its run id kept)."""
    from mlflow.tracking import MlflowClient

    from swarmlab.drive.report.baseline_runs import run_name

    names = [run_name(e) for e in ENTRIES]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    assert all(f"| {e['task']} [" in run_name(e) for e in ENTRIES)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    first = log_baselines(SOURCES, ENTRIES[:2], uri)
    client = MlflowClient(uri)
    old = first["runs"][ENTRIES[0]["key"]]
    client.update_run(old, name="Transformer [lra2021 Table 1]")
    again = log_baselines(SOURCES, ENTRIES[:2], uri)
    assert again["runs"] == first["runs"] and client.get_run(old).info.run_name == run_name(ENTRIES[0])


def test_the_stage_tags_every_experiment_for_the_training_view(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    old = client.create_experiment("made-before")  # as an older store would have it: no experimentKind
    table = tmp_path / "table.yaml"
    raw = yaml.safe_load(BASELINES_FILE.read_text())
    raw["baselines"] = raw["baselines"][:2]
    table.write_text(yaml.safe_dump(raw))
    run_stage(out_dir=tmp_path / "out", table=table)
    assert client.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"
    assert (tmp_path / "out" / "baselines.md").read_text().count("| `seed000/") == 2
    recorded = json.loads((tmp_path / "out" / "runs.json").read_text())
    assert len(recorded["runs"]) == 2 and recorded["experiment_id"]
    run_stage(out_dir=tmp_path / "out", table=table, tracking=False)  # logs nothing: must not erase the ids
    assert json.loads((tmp_path / "out" / "runs.json").read_text()) == recorded
    fresh = tmp_path / "fresh"
    run_stage(out_dir=fresh, table=table, tracking=False)  # nothing recorded before: an empty record
    assert json.loads((fresh / "runs.json").read_text())["runs"] == {}
