"""Protocols frozen at their first read: ``<reports>/protocols.jsonl`` (append only) records, for each claim, the hash
of its decisive experiment as written (``Claim.protocol_hash``) the first time the report found a test read that
decides it. A later report compares the claim's protocol with its frozen hash: a change is either an amendment
(``swarmlab/drive/report/amendments.yaml`` names the claim, dated on or after the freeze) or flagged on the report's first
screen as a change made after the claim's results without one.

Reads made before this record existed (2026-11-25) froze their claims' protocols on that date, as then written.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from swarmlab.errors import SwarmlabError
from swarmlab.drive.report.amendments import Amendment
from swarmlab.drive.report.claims import Claim

FILE = "protocols.jsonl"


def load_frozen(reports: Path) -> dict[str, dict]:
    """The first frozen entry of each claim."""
    path = Path(reports) / FILE
    out: dict[str, dict] = {}
    if not path.is_file():
        return out
    for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip():
            continue
        try:
            entry = json.loads(text)
        except ValueError:
            raise SwarmlabError(
                f"{path}:{n} is not a JSON line: restore it from git (the file is append only)"
            ) from None
        out.setdefault(entry["claim"], entry)
    return out


def freeze(reports: Path, decided: list[tuple[Claim, list[str]]], today: str | None = None) -> dict[str, dict]:
    """Append a frozen entry for each claim that has deciding reads (``decided``: the claim and the commits of the
    evaluations its numbers come from) and none yet; returns every claim's first entry."""
    frozen = load_frozen(reports)
    today = today or datetime.date.today().isoformat()
    new = []
    for claim, commits in decided:
        if claim.id not in frozen and commits:
            entry = {"claim": claim.id, "hash": claim.protocol_hash, "date": today, "reads": sorted(set(commits))}
            frozen[claim.id] = entry
            new.append(entry)
    if new:
        path = Path(reports) / FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            for entry in new:
                f.write(json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n")
    return frozen


def status(claim: Claim, frozen: dict[str, dict], amendments: list[Amendment]) -> tuple[str, bool]:
    """(the row's protocol line, whether it is a change without an amendment)."""
    entry = frozen.get(claim.id)
    if entry is None:
        return "not frozen yet (no test read decides it)", False
    if entry["hash"] == claim.protocol_hash:
        return f"as frozen at its first read ({entry['date']}, {entry['hash']})", False
    covering = [a.id for a in amendments if claim.id in a.claims and a.date >= entry["date"]]
    if covering:
        return f"amended ({', '.join(covering)}) since frozen ({entry['date']}, {entry['hash']})", False
    return (
        f"**changed since it was frozen at its first read ({entry['date']}, {entry['hash']} → {claim.protocol_hash}) "
        "without an amendment**",
        True,
    )
