"""The claims file: every entry valid, every quote in its paper, every seed covered; bad entries are one line each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from swarmlab.drive.report.baselines import normalise_quote
from swarmlab.drive.report.claims import CLAIMS_FILE, check_file, load_claims
from swarmlab.errors import SwarmlabError
from tests.conftest import REPO_ROOT

PAPERS = Path(os.environ.get("SWARMLAB_PAPERS", REPO_ROOT.parent / "shared" / "papers"))
FILES = {"000": "swarmformer.txt", "001": "swarmformer_enhanced_zh.txt", "002": "hsw.md", "003": "swarm_mappings.md"}
PROFILES = set(yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["profiles"]) | {"default"}
CLAIMS = load_claims(profiles=PROFILES)


def test_every_seed_has_claims_and_the_issue_s_named_claims_are_there():
    assert {c.paper_id for c in CLAIMS} == set(FILES)
    by_id = {c.id: c for c in CLAIMS}
    assert by_id["s000-small-accuracy"].decided_by["value"] == 0.862
    assert by_id["s003-swarm-beats-isab-direct"].decided_by["protocol"] == "equal net time"
    assert by_id["s002-train-10x"].decided_by["value"] == 10.0
    assert (
        by_id["s000-augmentation"].decided_by["low"] == 0.03 and by_id["s000-augmentation"].decided_by["high"] == 0.05
    )
    assert {"s001-fewer-flops", "s001-faster-inference", "s001-accuracy-kept"} <= set(by_id)
    assert {c.kind for c in CLAIMS} == {"threshold", "pairwise", "ratio", "delta", "best_of", "figure", "untestable"}


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_each_claim_s_words_are_in_its_paper(claim):
    paper = PAPERS / FILES[claim.paper_id]
    if not paper.is_file():
        pytest.skip(f"{paper} is not on this machine (set SWARMLAB_PAPERS)")
    assert normalise_quote(claim.words) in normalise_quote(paper.read_text(encoding="utf-8")), claim.id


def test_bad_entries_are_one_line_each_and_all_reported(tmp_path):
    raw = yaml.safe_load(CLAIMS_FILE.read_text())
    raw["claims"][0]["decided_by"]["op"] = "=>"
    raw["claims"][1].pop("words")
    raw["claims"][2]["decided_by"]["kind"] = "vibes"
    raw["claims"].append(dict(raw["claims"][3]))  # a duplicate id
    bad = tmp_path / "claims.yaml"
    bad.write_text(yaml.safe_dump(raw, allow_unicode=True))
    errors, claims = check_file(bad)
    assert len(errors) == 4 and all("\n" not in e for e in errors)
    assert errors[0].startswith(raw["claims"][0]["id"] + ": decided_by.op")
    assert "missing ['words']" in errors[1] and "decided_by.kind" in errors[2] and "used twice" in errors[3]
    with pytest.raises(SwarmlabError, match="4 bad claim"):
        load_claims(bad)
    proc = subprocess.run(
        [sys.executable, "-m", "swarmlab.drive.report.claims", str(bad)], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert proc.returncode == 2 and proc.stderr.count("error: ") == 4


def test_a_ratio_count_flag_must_be_a_boolean(tmp_path):
    raw = yaml.safe_load(CLAIMS_FILE.read_text())
    entry = next(c for c in raw["claims"] if c["decided_by"].get("count") is True)
    entry["decided_by"]["count"] = "yes"
    bad = tmp_path / "claims.yaml"
    bad.write_text(yaml.safe_dump(raw, allow_unicode=True))
    errors, _ = check_file(bad)
    assert errors == [
        f"{entry['id']}: decided_by.count must be true or false (true: the fields are counts, such as FLOPs, not timings)"
    ]


def test_issue_35_evidence_is_attributed_and_kept():
    """Issue 35, item 8: each quote decided by the experiment it is about, and the rows a reviewer found missing."""
    by_id = {c.id: c for c in CLAIMS}
    # 003 §5's "outperforms ... in an amortized clustering experiment" is Table 2's (direct); Table 3 says "on par"
    s5 = "it outperforms other state of the art models in an amortized clustering experiment"
    assert {c.task for c in CLAIMS if c.words == s5} == {"clustering_direct"}
    assert "s003-swarm-beats-isab-mog" not in by_id
    assert all(
        c.decided_by.get("direction") in ("equal", "a_not_worse")
        for c in CLAIMS
        if c.task == "clustering_mog"
        and {c.decided_by.get("a"), c.decided_by.get("b")} == {"swarm", "set_transformer_isab"}
    )
    # 002's 10x: each paper-style row has a matched-width sibling read from the same GPU table
    for step in ("train", "infer"):
        paper, matched = by_id[f"s002-{step}-10x"].decided_by, by_id[f"s002-{step}-10x-matched"].decided_by
        assert matched["path"] == paper["path"] and matched["numerator"]["field"] == paper["numerator"]["field"]
        assert matched["numerator"]["model"] != paper["numerator"]["model"]
    # 000's memory at every cluster size of Figure 3, and its fall with C
    assert {"s000-memory-c2", "s000-memory-c4", "s000-memory-c8", "s000-memory-falls-with-c"} <= set(by_id)
    # 001: the whole model's count, and one row per switch of the grid that measures them
    whole = by_id["s001-whole-model-params"].decided_by
    assert (whole["a"], whole["b"], whole["metric"]) == (
        "swarmformer_enhanced_small",
        "swarmformer_enhanced_small_all_off",
        "num_params",
    )
    switched = {
        c.decided_by["b"]
        for c in CLAIMS
        if c.decided_by.get("grid") == "enhanced_switches" and c.decided_by.get("metric") == "test_accuracy"
    }
    assert switched == {
        f"swarmformer_enhanced_small_no_{s}"
        for s in ("window", "mha", "routing", "gated_mlp", "preln", "tied_qkv", "pyramid")
    }


TABLE_RATIOS = [c for c in CLAIMS if c.kind == "ratio" and c.decided_by["source"] == "table"]


def _first_row(text: str, sel: dict) -> tuple[int, dict] | None:
    """(table number, row) of the row a `table` ratio reads: the first of the model and length with the column."""
    table, in_table, header = -1, False, None
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("|"):
            in_table, header = False, None
            continue
        cells = [x.strip() for x in s.strip("|").split("|")]
        if not in_table:
            table, in_table, header = table + 1, True, cells
            continue
        row = dict(zip(header, cells))
        if row.get("model") == sel["model"] and row.get("L") == str(sel["tokens"]) and sel["field"] in row:
            return table, row
    return None


@pytest.mark.parametrize("claim", TABLE_RATIOS, ids=lambda c: c.id)
def test_a_table_ratio_reads_both_sides_from_one_table(claim):
    """A `table` ratio reads the first row of a model and length that has the column; the runtime table names each
    group's Longformer "Longformer", so a ratio whose two sides land in different tables (one group's HSW over the
    other group's Longformer) would compare models of different widths without a word."""
    d = claim.decided_by
    path = REPO_ROOT / "reports" / d["path"]
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    text = path.read_text(encoding="utf-8")
    found = {side: _first_row(text, d[side]) for side in ("numerator", "denominator") if d.get(side)}
    assert all(found.values()), f"{claim.id}: a side matches no row of {d['path']}"
    assert len({table for table, _ in found.values()}) == 1, f"{claim.id}: its sides are read from different tables"
