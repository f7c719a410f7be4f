"""The ledger as report blocks: the table, one paragraph per track written from the rows, a bar chart per
comparison with its interval (drawn by ``swarmlab.plots``), the figures that claims point at, and the count of test-split re-reads.

Nothing here is a conclusion typed by hand: every sentence is assembled from a ledger row (its verdict, numbers and
reasons). ``TRACKS`` only names the tracks.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Callable

from swarmlab.document import Bullets, Heading, Image, Para, Table
from swarmlab.drive.report.ledger import (
    BELOW_BUDGET,
    CONTRADICTED,
    INCONCLUSIVE,
    SEED_CAP,
    SHOWN,
    SUPPORTED,
    UNTESTABLE,
    VERDICTS,
    Row,
    fmt,
)
from swarmlab.plots import comparison_chart
from swarmlab.drive.report.amendments import Amendment
from swarmlab.drive.report.reproductions import log_reproductions, relabelled
from swarmlab.drive.report.testsplit import log_rereads

TRACKS = {
    "000": "Paper 000, SwarmFormer (IMDB, memory)",
    "001": "Paper 001, enhanced SwarmFormer",
    "002": "Paper 002, HSW vs Longformer (long documents)",
    "003": "Paper 003, SWARM mappings (sets, images)",
}
HEADER = ["claim", "paper", "ours (95% interval)", "verdict", "p", "q"]  # the first screen
HOW_HEADER = [
    "claim",
    "paper's words",
    "n seeds",
    "budget",
    "profile",
    "provenance (each side)",
    "settings chosen (each side)",
    "test reads",
    "protocol",
    "why · test",
    "the other budget",
    "stale?",
]


def paper_cell(row: Row) -> str:
    d = row.claim.decided_by
    if d.get("kind") in ("threshold", "ratio") and "value" in d:
        return f"{d.get('op', '')} {fmt(d['value'])}"
    if d.get("kind") == "delta":
        return f"+{d['low']}…{d['high']}"
    if d.get("kind") == "pairwise":
        return {
            "a_higher": "A > B",
            "a_lower": "A < B",
            "equal": f"A ≈ B (±{d.get('margin')})",
            "a_not_worse": f"A ≥ B − {d.get('margin')}",
        }[d["direction"]]
    return ", ".join(f"{k} {v}" for k, v in row.claim.paper.items()) or "—"


def _p(x: float | None) -> str:
    return "—" if x is None else f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def ledger_table(rows: list[Row], amendments: list[Amendment] = ()) -> Table:
    """The first screen: each claim, the paper's number, ours, the verdict, and the test's p and q."""
    body = []
    for r in rows:
        verdict = f"**{r.verdict}**" + (f" (p alone: {r.before_fdr})" if r.before_fdr else "")
        marks = [a.id for a in amendments if r.claim.id in a.claims]
        verdict += f" · amended: {', '.join(marks)}" if marks else ""
        verdict += " · stale" if r.stale and r.ours != "—" else ""
        body.append([f"`{r.claim.id}`", paper_cell(r), r.ours, verdict, _p(r.p), _p(r.q)])
    return Table(HEADER, body, "lllllr")


def seeds_cell(r: Row) -> str:
    """The seeds a row used, against its protocol's count (``decided_by.seeds``, fixed in advance); else the plan
    from the runs' own spread (80% power) where it asks for more."""
    if not r.seeds:
        return "—"
    fixed = r.claim.decided_by.get("seeds")
    if fixed:
        return f"{r.seeds} of the protocol's {fixed}" + ("; provisional" if r.seeds < fixed else "")
    if r.planned_seeds and r.planned_seeds > SEED_CAP:
        return f"{r.seeds} (plan: over {SEED_CAP} at this spread; undecidable at this budget)"
    if r.planned_seeds and r.planned_seeds > r.seeds:
        return f"{r.seeds} (plan: {r.planned_seeds}; below it, the verdict is provisional)"
    return str(r.seeds)


def how_table(rows: list[Row]) -> Table:
    """How each claim was decided: its budget, seeds, test, provenance of each side, the other budget's result."""
    body = []
    for r in rows:
        c = r.claim
        words = c.words if len(c.words) <= 90 else c.words[:87] + "…"
        why = r.why + (f" · {r.test}" if r.test else "")
        body.append(
            [
                f"`{c.id}` ({c.paper_id} {c.section})",
                f"“{words}”",
                seeds_cell(r),
                r.budget or "—",
                f"`{r.profile}`" + (f" from {r.source}" if r.source else ""),
                r.provenance or "—",
                r.tuning or "—",
                r.reads or "—",
                r.protocol or "—",
                why,
                r.other or "—",
                ("**stale**: " + r.stale) if r.stale else ("current" if r.stale_known else STALE_UNKNOWN),
            ]
        )
    return Table(HOW_HEADER, body, "llrlllllllll")


# a result DVC does not track whose code could not be compared (no dvc.lock or no git here, or a side run's table,
# which records no commit)
STALE_UNKNOWN = "unknown: a side run that recorded no code fingerprint (rerun it with scripts/side_run.py)"


def amendment_blocks(amendments: list[Amendment]) -> list:
    """Every protocol amendment, the ones made after results that moved the verdict toward the claim first."""
    if not amendments:
        return [Para("No claim's protocol was changed after its experiment started.")]
    ordered = sorted(amendments, key=lambda a: not a.alarming)
    lines = []
    for a in ordered:
        when = "after its results" if a.after_results else "before its results"
        way = {True: "toward the claim", False: "away from the claim", None: "the verdict unmoved"}[a.toward_claim]
        head = f"**{a.id} ({when}, {way})**" if a.alarming else f"{a.id} ({when}, {way})"
        lines.append(
            f"{head} `{'`, `'.join(a.claims)}` ({a.date}): {a.change} (reason: {a.reason}). Before: {a.before}. "
            f"After: {a.after}. Status: {a.status}."
        )
    alarming = sum(a.alarming for a in amendments)
    return [
        Para(
            f"**Protocol amendments: {len(amendments)}** (`swarmlab/drive/report/amendments.yaml`), {alarming} of them made "
            "after the results were seen and moving the verdict toward the claim:"
        ),
        Bullets(lines),
    ]


def history_blocks(rows: list[Row], before: dict, amendments: list[Amendment] = ()) -> list:
    """Each verdict before the claims had protocols (``before``: the ledger of an earlier commit, claim -> verdict and
    number) beside now, for the claims whose verdict moved, with the reasons the rows give; the count of new claims."""
    old = before.get("claims") or {}
    if not old:
        return []
    body = []
    for r in rows:
        was = old.get(r.claim.id)
        if was is None or was["verdict"] == r.verdict:
            continue
        why = []
        if r.before_fdr:
            why.append(f"the FDR control (q = {_p(r.q)})")
        if "refused:" in r.why or "refused:" in r.other:
            why.append("its result was made at a commit outside the history: refused")
        if r.why.startswith("not decided:"):
            why.append("a model that did not learn")
        withdrawn = [a.id for a in amendments if r.claim.id in a.claims and not a.standing]
        standing = [a.id for a in amendments if r.claim.id in a.claims and a.standing]
        if withdrawn:
            why.append(f"amendments withdrawn ({', '.join(withdrawn)})")
        if standing:
            why.append(f"see amendment {', '.join(standing)}")
        if not why and was.get("ours") != r.ours:
            why.append("other numbers")
        body.append(
            [
                f"`{r.claim.id}`",
                f"{was['verdict']}: {was.get('ours', '—')}",
                f"{r.verdict}: {r.ours}",
                "; ".join(why) or "—",
            ]
        )
    new = [r.claim.id for r in rows if r.claim.id not in old]
    gone = sorted(set(old) - {r.claim.id for r in rows})
    blocks = [
        Heading(3, f"Verdict history: before the protocols ({before.get('commit')}) and now"),
        Para(
            f"{len(body)} of the {len(old)} claims of {before.get('commit')} have another verdict now; {len(new)} claims "
            f"are new" + (f"; {len(gone)} were replaced ({', '.join(f'`{g}`' for g in gone)})" if gone else "") + "."
        ),
    ]
    if body:
        blocks.append(Table(["claim", "before", "now", "why it moved"], body, "llll"))
    return blocks


def headline(rows: list[Row]) -> Para:
    """The verdict counts, the FDR control and the refusals, in one paragraph."""
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    tested = [r for r in rows if r.q is not None]
    withheld = [r for r in rows if r.before_fdr]
    refused = [r for r in rows if "refused:" in r.why or "refused:" in r.other]
    family = max((r.family for r in tested), default=0)
    text = (
        f"**{len(rows)} claims: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + ".** "
        f"{len(tested)} are decided by a test with a p-value ({family} distinct tests: two quotes of one comparison "
        "share one); a call (supported, contradicted, not supported at this budget) stands only when its "
        f"Benjamini–Hochberg q across those {family} tests is below 0.05"
    )
    text += (
        f", which withholds {len(withheld)} call{'s' if len(withheld) != 1 else ''} that p alone would make ("
        + ", ".join(f"`{r.claim.id}`" for r in withheld)
        + ")."
        if withheld
        else "; it withholds none."
    )
    ours = [r for r in rows if r.ours != "—"]
    stale = [r for r in ours if r.stale]
    if stale:
        text += (
            f" **{len(stale)} of the {len(ours)} rows with numbers of ours rest on stale results**: code, data or "
            "settings they depend on changed since they were made (marked `stale` below; the second table names "
            "each piece to rerun). Their numbers stand as the code that made them."
        )
    unamended = [r for r in rows if r.unamended]
    if unamended:
        text += (
            f" **{len(unamended)} claims' protocols changed after their first read without an amendment**: "
            + ", ".join(f"`{r.claim.id}`" for r in unamended)
            + "."
        )
    if refused:
        text += (
            f" {len(refused)} claims lost a result to refusal (made at a commit that is not in this repository's "
            "history): " + ", ".join(f"`{r.claim.id}`" for r in refused) + "; their rows say what decides them now."
        )
    return Para(text)


def track_paragraph(paper: str, rows: list[Row]) -> Para:
    """What a reader should take from one track, assembled from its rows."""
    mine = [r for r in rows if r.claim.paper_id == paper]
    counts = {v: [r for r in mine if r.verdict == v] for v in VERDICTS}
    parts = [
        f"**{TRACKS.get(paper, paper)}.** {len(mine)} claims: "
        + ", ".join(f"{len(v)} {k}" for k, v in counts.items() if v)
        + "."
    ]
    for verdict in (SUPPORTED, CONTRADICTED, BELOW_BUDGET, INCONCLUSIVE):
        for r in counts[verdict]:
            parts.append(f"`{r.claim.id}` is {verdict}: ours {r.ours} — {r.why}.")
    stale = [r for r in mine if r.stale and r.verdict not in (UNTESTABLE,)]
    if stale:
        parts.append(
            f"{len(stale)} of these numbers are stale (what made them changed since: dvc.lock, claims/dvc.lock or "
            "the side run's code record says what): read them as the old code's."
        )
    if counts[UNTESTABLE]:
        parts.append("Not testable here: " + "; ".join(f"`{r.claim.id}` ({r.why})" for r in counts[UNTESTABLE]) + ".")
    if counts[SHOWN]:
        parts.append("Shown for judgement by eye: " + ", ".join(f"`{r.claim.id}`" for r in counts[SHOWN]) + ".")
    return Para(" ".join(parts))


def read_blocks(log: list[dict]) -> list:
    """The test-split reads (``log`` as ``reproductions.relabel`` counts them): the counts of each kind, with the lines
    it relabelled, one line per (task, model, seed) read more than once under other settings, and one per (task, model)
    whose reads were repeated under the same settings, with how far their results moved."""
    changed = relabelled(log)
    kinds = {k: sum(line.get("kind") == k for line in log) for k in ("first", "re-read", "reproduction")}
    lines = log_rereads(log)
    again = log_reproductions(log)
    note = ""
    if changed:
        groups = Counter(
            (
                f"`{line['task']}` `{line['model']}`"
                + (f" ({line['grid']} grid, {line.get('point')})" if line.get("grid") else "")
                + f" at {str(line.get('commit') or '?')[:7]}",
                f"written as {line['written_as']}, counted as {line['kind']}",
            )
            for line in changed
        )
        shown = ", ".join(f"{where}: {n} line{'s' * (n > 1)} {how}" for (where, how), n in groups.items())
        note = (
            f" {len(changed)} line{'s' * (len(changed) > 1)} of the log {'are' if len(changed) > 1 else 'is'}"
            f" counted as another kind than {'they were' if len(changed) > 1 else 'it was'} written with, because "
            f"the log's writer did not compare the training data (`swarmlab/drive/report/reproductions.py`): "
            f"{shown}."
        )
    return [
        Heading(3, "Test-split reads"),
        Para(
            f"Every read of a test split is a line of `reports/test_reads.jsonl` (append only; `docs/reports.md`): "
            f"{len(log)} reads, {kinds['first']} first reads, {kinds['re-read']} re-reads of a (task, model, seed) "
            f"already read under other settings, {kinds['reproduction']} reproductions under the same settings "
            "(model config, training settings and training data)." + note + " Each ledger row says how many reads "
            "its numbers' test split had, which one decides it, and how far the same settings read again moved."
        ),
        Bullets(lines) if lines else Para("No test split was read more than once."),
        Para(
            "Reads repeated under the same settings (a rerun at later code, or on another machine): at an equal step "
            "budget on one CPU class the results repeat to the digit; at an equal net-time budget a machine that "
            "makes more steps in the same seconds moves them, and these lines show by how much."
        ),
        Bullets(again) if again else Para("No read was repeated under the same settings."),
    ]


STALE_HEADING = "Stale numbers"


def stale_blocks(stale: dict) -> list:
    """Every stage whose dependencies changed since dvc.lock was written (one line each: what changed, what to rerun);
    tests/swarmlab/drive/report/test_staleness.py checks that the committed report lists exactly these."""
    if not stale:
        return [Heading(3, STALE_HEADING), Para("None: every stage's dependencies match dvc.lock.")]
    return [
        Heading(3, STALE_HEADING),
        Para(
            f"{len(stale)} stages changed since dvc.lock was written; their numbers are the old code's until rerun "
            "(`dvc repro`):"
        ),
        Bullets(
            [
                f"`{name}`: {s.changed and ', '.join(s.changed) or 'upstream: ' + ', '.join(s.upstream)}"
                for name, s in sorted(stale.items())
            ]
        ),
    ]


def stale_listed(markdown: str) -> set[str]:
    """The stage names a report lists under its stale heading."""
    part = markdown.split(f"### {STALE_HEADING}", 1)
    if len(part) < 2:
        return set()
    section = part[1].split("\n#", 1)[0]
    return set(re.findall(r"^- `([^`]+)`:", section, flags=re.M))


def ledger_blocks(
    rows: list[Row],
    reports: Path,
    figure: Callable[[str, Callable[[Path], Path]], Image | None],
    embed: Callable[[Path, str], Image],
    amendments: list[Amendment] = (),
    log: list[dict] = (),
    before: dict | None = None,
) -> list:
    """The report's opening: heading, ledger table, one paragraph per track, charts, figures, test-split reads."""
    blocks: list = [
        Heading(2, "Claims ledger"),
        headline(rows),
        *amendment_blocks(list(amendments)),
        ledger_table(rows, list(amendments)),
        Para(
            "Every claim of the four papers (`swarmlab/drive/report/claims.yaml`), decided from our metrics files by "
            "`swarmlab.drive.report.ledger` (rules: docs/reports.md). *ours*: the mean and its 95% interval — a "
            "percentile bootstrap over the test items for one run, a t-interval across seeds for several; a "
            "pair: the difference A − B with a paired test. A pair whose interval contains 0 is never called "
            "different. *p*: the two-sided p of the test the verdict rests on, against the claim's boundary; *q*: "
            "its Benjamini–Hochberg q. Budgets, tests, provenance and the other budget's result: below."
        ),
        *history_blocks(rows, before or {}, list(amendments)),
        Heading(3, "How each claim was decided"),
        how_table(rows),
        Heading(3, "What each track shows"),
    ]
    blocks += [track_paragraph(paper, rows) for paper in TRACKS if any(r.claim.paper_id == paper for r in rows)]
    charts = [r for r in rows if r.compared and r.lo is not None and r.hi is not None and r.lo != r.hi]
    blocks.append(Heading(3, "Ledger comparisons with their intervals"))
    drawn = False
    for r in charts:
        img = figure(
            f"ledger_{r.claim.id}",
            lambda p, r=r: comparison_chart(
                r.compared,
                r.claim.decided_by.get("metric", r.claim.metric),
                f"{r.claim.id}: {r.verdict}",
                p,
            ),
        )
        if img:
            img.caption = f"`{r.claim.id}`: {r.ours} ({r.test})"
            blocks.append(img)
            drawn = True
    if not drawn:
        blocks.append(Para("No comparison of the ledger has an interval yet."))
    shown = [r for r in rows if r.figures]
    if shown:
        blocks.append(Heading(3, "Figures the claims point at"))
        for r in shown:
            for f in r.figures:
                blocks.append(embed(Path(reports) / f, f"`{r.claim.id}`: “{r.claim.words}” — `{f}`"))
    return blocks + read_blocks(list(log))
