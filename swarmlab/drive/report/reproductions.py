"""Reads of one subject under the same settings, as the report counts and shows them.

A line of the test-read log (``testsplit``) is a *reproduction* when an earlier line read the same subject (one model
at one seed on one task's test split) with the same identity (model config), the same training settings *and* the
same training data (``data_fingerprint``); any other later read of the subject is a *re-read*, made knowing the
earlier. The log's writer (``testsplit.read_kind``, at the code that wrote each line) compares identity and training
settings only: a grid point that changes the training data alone (the ``augment`` grid's ``augment.enabled=false``)
was written as a reproduction of the point before it. The log is append-only, so the report does not edit it:
``relabel`` recomputes every line's kind by the rule above, and the report counts and words those kinds, saying how
many lines it relabelled. A line that lacks a data fingerprint (written before the log had one) is compared on
identity and training settings alone, as it was written.

A reproduction is worth showing, not only counting: the same settings read again at a later commit or on another
machine tell how far a result moves without any setting changing. At an equal step budget on one CPU class the
results repeat to the digit; at an equal *net time* budget a machine that makes more steps in the same seconds moves
them. ``others`` gives, for one run's deciding read, the other reads of its subject under the same settings, and
``differences`` how far their results are from it, which the ledger words beside the row (``spread_text``, from
``ledger.annotate_reads``); ``log_reproductions`` words them per task and model for the report's test-read section.
"""

from __future__ import annotations

from swarmlab.drive.report.testsplit import headline

TOLERANCE = 1e-9  # two results closer than this are the same number


def same_settings(a: dict, b: dict) -> bool:
    """Whether two log lines read their subject under the same settings: the same identity and training digests (both
    present), and the same training data where both lines record a data fingerprint."""
    if a.get("subject") != b.get("subject") or not a.get("identity") or not a.get("train"):
        return False
    if a.get("identity") != b.get("identity") or a.get("train") != b.get("train"):
        return False
    fa, fb = a.get("data_fingerprint"), b.get("data_fingerprint")
    return fa is None or fb is None or fa == fb


def kind_of(line: dict, earlier: list[dict]) -> str:
    """``first``, ``reproduction`` or ``re-read`` of ``line`` after the lines ``earlier`` (the module's rule)."""
    same = [e for e in earlier if e.get("subject") == line.get("subject")]
    if not same:
        return "first"
    return "reproduction" if any(same_settings(e, line) for e in same) else "re-read"


def relabel(log: list[dict]) -> list[dict]:
    """The log with every line's ``kind`` recomputed (``kind_of``; new dicts, the input untouched); a line whose kind
    changed also carries ``written_as``, the kind the log holds."""
    out, by_subject = [], {}
    for line in log:
        earlier = by_subject.setdefault(line.get("subject"), [])
        kind = kind_of(line, earlier)
        out.append(
            {**line, "kind": kind}
            if line.get("kind") == kind
            else {**line, "kind": kind, "written_as": line.get("kind")}
        )
        earlier.append(line)
    return out


def relabelled(log: list[dict]) -> list[dict]:
    """The lines of a ``relabel``-ed log whose kind is not the one they were written with."""
    return [line for line in log if "written_as" in line]


def others(log: list[dict], line: dict) -> list[dict]:
    """The other lines of ``log`` that read ``line``'s subject under its settings, in log order."""
    return [e for e in log if e is not line and same_settings(e, line)]


def differences(line: dict, lines: list[dict]) -> list[float]:
    """Each of ``lines``' headline result minus ``line``'s (the ones with a number on both sides)."""
    mine = headline(line.get("result"))
    if not isinstance(mine, (int, float)):
        return []
    return [got - mine for got in (headline(e.get("result")) for e in lines) if isinstance(got, (int, float))]


def _span(diffs: list[float]) -> str:
    """``by <d>`` for one value, ``by <lo> to <hi> (mean <m>)`` for several."""
    lo, hi = min(diffs), max(diffs)
    if hi - lo <= TOLERANCE:
        return f"by {lo:+.4f}"
    return f"by {lo:+.4f} to {hi:+.4f} (mean {sum(diffs) / len(diffs):+.4f})"


def spread_text(diffs: list[float], again: int, runs: int) -> str:
    """``differences`` of the deciding reads of ``again`` of a side's ``runs`` runs (at least one: the ledger words only
    a side with some), in words: identical, or how far."""
    head = (
        f"the same settings read again for {again} of {runs} run{'s' * (runs > 1)} "
        f"({len(diffs)} read{'s' * (len(diffs) > 1)})"
    )
    if max(abs(d) for d in diffs) <= TOLERANCE:
        return f"{head}: identical results"
    return f"{head}: results differ from the deciding read's {_span(diffs)}"


def _commits(commits: list[str]) -> str:
    """The commits a subject was read at: all of them when few, else how many and the first and last."""
    if len(commits) <= 4:
        return ", ".join(commits)
    return f"{len(commits)} commits, {commits[0]} to {commits[-1]}"


def log_reproductions(log: list[dict]) -> list[str]:
    """One line per (task, model, profile, grid point) whose subjects were read more than once under the same
    settings (``log`` relabelled): how many seeds and reads, the commits, and how far each later read's result is
    from its subject's first read under those settings (identical, or the range and mean), in log order."""
    groups: dict[tuple, list[dict]] = {}  # (subject, identity, train, data) -> lines under those settings
    for line in log:
        for lines in groups.values():
            if same_settings(lines[0], line):
                lines.append(line)
                break
        else:
            if line.get("identity") and line.get("train"):
                groups[(len(groups),)] = [line]
    summary: dict[tuple, dict] = {}
    for lines in groups.values():
        if len(lines) < 2:
            continue
        first = lines[0]
        key = (first.get("task"), first.get("model"), first.get("profile"), first.get("grid"), first.get("point"))
        entry = summary.setdefault(key, {"seeds": set(), "diffs": [], "commits": []})
        entry["seeds"].add(first.get("seed"))
        entry["diffs"] += differences(first, lines[1:])
        for line in lines:
            commit = str(line.get("commit") or "?")[:7]
            if commit not in entry["commits"]:
                entry["commits"].append(commit)
    out = []
    for (task, model, profile, grid, point), entry in summary.items():
        diffs, seeds = entry["diffs"], len(entry["seeds"])
        what = f"`{task}` `{model}`" + (f" ({grid} grid, {point})" if grid else "") + f", profile `{profile}`"
        reads = f"{seeds} seed{'s' * (seeds > 1)} read again {len(diffs)} time{'s' * (len(diffs) > 1)}"
        at = f"at {_commits(entry['commits'])}"
        if not diffs:
            moved = "no result to compare"
        elif max(abs(d) for d in diffs) <= TOLERANCE:
            moved = "identical results"
        else:
            same = sum(abs(d) <= TOLERANCE for d in diffs)
            moved = f"later results differ from the first {_span(diffs)}" + (f"; identical in {same}" if same else "")
        out.append(f"{what}: {reads} under the same settings {at}: {moved}")
    return out
