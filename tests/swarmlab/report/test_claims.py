"""The claims file: every entry valid, every quote in its paper, every seed covered; bad entries are one line each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from swarmlab.report.baselines import normalise_quote
from swarmlab.report.claims import CLAIMS_FILE, check_file, load_claims
from swarmlab.errors import SwarmlabError
from tests.conftest import REPO_ROOT

PAPERS = Path(os.environ.get("SWARMLAB_PAPERS", REPO_ROOT.parent / "shared" / "papers"))
FILES = {"000": "swarmformer.txt", "001": "swarmformer_enhanced_zh.txt", "002": "hsw.md", "003": "swarm_mappings.md"}
PROFILES = set(yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["profiles"]) | {"default"}
CLAIMS = load_claims(profiles=PROFILES)


def test_every_seed_has_claims_and_the_issue_s_named_claims_are_there():
    assert {c.seed for c in CLAIMS} == set(FILES)
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
    paper = PAPERS / FILES[claim.seed]
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
        [sys.executable, "-m", "swarmlab.report.claims", str(bad)], capture_output=True, text=True, cwd=REPO_ROOT
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
