"""The committed report does not contradict itself: each claim's verdict and numbers read the same in the first-screen
table, the second table and the paragraph of its track; sections computed from the pipeline's own profile say so in
their heading (they may hold other numbers for the same model, from a smaller budget)."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

REPORT = REPO_ROOT / "reports" / "REPORT.md"


def cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def table_after(text: str, header_start: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(cells(line))
    return rows


def test_each_claim_reads_the_same_in_every_place_it_appears():
    text = REPORT.read_text(encoding="utf-8")
    first = table_after(text, "| claim | paper | ours (95% interval) | verdict | p | q |")
    how = table_after(text, "| claim | paper's words | n seeds |")
    assert len(first) == len(how) > 30
    tracks = text.split("### What each track shows", 1)[1].split("\n### ", 1)[0]
    for row, second in zip(first, how):
        cid = row[0].strip("`")
        assert second[0].startswith(f"`{cid}`"), (cid, second[0])
        verdict = re.match(r"\*\*(.+?)\*\*", row[3]).group(1)
        mentions = re.findall(rf"`{re.escape(cid)}` is ([^:]+): ours (.+?) — ", tracks)
        for said, ours in mentions:  # the paragraph names decided claims with their verdict and number
            assert said == verdict and ours == row[2], (cid, said, verdict, ours, row[2])
        if verdict in ("supported", "contradicted", "inconclusive", "not supported at this budget"):
            assert mentions, f"{cid}: decided ({verdict}) but its track's paragraph does not say so"


def test_sections_from_the_pipeline_profile_name_it_in_their_heading():
    text = REPORT.read_text(encoding="utf-8")
    for title in ("Our numbers beside the papers'", "Where we disagree with a paper", "Cross-family comparison"):
        heading = next(line for line in text.splitlines() if line.startswith(f"## {title}"))
        assert "(profile `" in heading and "the claims ledger decides the claims" in heading, heading
