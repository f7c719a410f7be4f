"""A claim's protocol is frozen at its first deciding read; a later change is an amendment or is flagged."""

from __future__ import annotations

import dataclasses

from swarmlab.drive.report.amendments import Amendment
from swarmlab.drive.report.claims import Claim
from swarmlab.drive.report.protocols import FILE, freeze, status


def make_claim(**decided) -> Claim:
    d = {
        "kind": "pairwise",
        "task": "t",
        "a": "x",
        "b": "y",
        "metric": "test_accuracy",
        "direction": "a_higher",
        "protocol": "equal steps",
        "seeds": 3,
        **decided,
    }
    return Claim("c1", "003", "§1", "w", "test_accuracy", {}, "paper", d)


def amendment(date: str) -> Amendment:
    return Amendment("A9", ("c1",), date, "seeds 3 -> 5", "power", True, True, "inconclusive", "supported", "standing")


def test_a_protocol_changed_after_its_first_read_is_flagged_unless_amended(tmp_path):
    c = make_claim()
    frozen = freeze(tmp_path, [(c, ["abc1234"])], today="2026-11-25")
    assert status(c, frozen, []) == (f"as frozen at its first read (2026-11-25, {c.protocol_hash})", False)
    before = (tmp_path / FILE).read_bytes()
    changed = make_claim(seeds=5)  # more seeds after a look
    again = freeze(tmp_path, [(changed, ["def5678"])], today="2026-11-26")
    assert (tmp_path / FILE).read_bytes() == before  # the first freeze stands: nothing is rewritten or added
    line, flagged = status(changed, again, [])
    assert flagged and "without an amendment" in line and c.protocol_hash in line
    line, flagged = status(changed, again, [amendment("2026-11-26")])
    assert not flagged and line.startswith("amended (A9)")
    _, flagged = status(changed, again, [amendment("2026-11-20")])  # an amendment older than the freeze covers nothing
    assert flagged


def test_a_claim_without_a_deciding_read_is_not_frozen(tmp_path):
    c = make_claim()
    assert freeze(tmp_path, [(c, [])]) == {} and not (tmp_path / FILE).exists()
    assert status(c, {}, []) == ("not frozen yet (no test read decides it)", False)
    assert dataclasses.replace(c, note="a note").protocol_hash == c.protocol_hash  # only the experiment counts


def test_each_claims_piece_runs_the_seeds_its_claims_protocols_fix():
    """The protocol's seed count (decided_by.seeds, fixed from power) is what `dvc repro claims/dvc.yaml` runs: each
    claims piece's seeds at the claims profile (a grid's `set`, else its task's) cover every claim it decides, so the
    pipeline cannot silently run fewer seeds than a protocol promises."""
    from swarmlab.drive.params import load_params
    from swarmlab.drive.report.claims import load_claims

    params = load_params(profile="claims")
    checked = 0
    for claim in load_claims():
        d = claim.decided_by
        if not d.get("seeds") or not (d.get("grid") or d.get("task")):
            continue
        if d.get("grid"):
            grid = params["ablations"][d["grid"]]
            seeds = (grid.get("set") or {}).get(f"tasks.{grid['task']}.seeds") or params["tasks"][grid["task"]]["seeds"]
            piece = f"grid@{d['grid']}"
        else:
            seeds, piece = params["tasks"][d["task"]]["seeds"], f"task@{d['task']}"
        assert len(set(seeds)) >= d["seeds"], f"{claim.id}: protocol {d['seeds']} seeds, {piece} runs {seeds}"
        checked += 1
    assert checked >= 20  # the claims decided by seeded comparisons (a vacuous loop would pass anything)
