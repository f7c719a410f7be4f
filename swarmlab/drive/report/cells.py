"""Numbers, commits and paths as the report's table cells print them: one formatting for every section."""

from __future__ import annotations

import math
import re
from pathlib import Path

from swarmlab.drive.report.provenance import Provenance, provenance


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def fmt(v, metric: str = "") -> str:
    if v is None or not is_number(v):
        return "—" if v is None else str(v)
    if metric == "num_params" or isinstance(v, int):
        return f"{int(round(v)):,}"
    if re.search(r"accuracy|precision|recall|f1|ari", metric) and 0 <= v <= 1:
        return f"{v:.4f}"
    if metric.endswith("memory_mb") and abs(v) >= 100:
        return f"{v:,.0f}"  # whole megabytes: 988 beside 1,085, not 988.0
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a == 0:
        return "0"
    return f"{v:.4g}"


def short(sha: str | None) -> str:
    """A recorded commit string in a cell, read as every provenance is (``swarmlab.drive.report.provenance``)."""
    return prov_text(provenance({"git_commit": sha}))


def prov_text(p: Provenance) -> str:
    """A provenance in a table cell: the short commit, and whether the code differed from it."""
    if not p.commit:
        return "commit unknown"
    return f"`{p.commit[:7]}`" + (" (code differed from it)" if p.code_changed else "")


def rel(path: Path, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return str(path)


def rounding(value: float) -> float:
    """Half a unit of the last printed digit of ``value`` (its noise when the paper states none)."""
    text = repr(float(value))
    if "e" in text:
        return 0.0
    digits = text.split(".")[1].rstrip("0") if "." in text else ""
    return 0.5 * 10 ** -len(digits)


def profile_heading(title: str, profile) -> str:
    """A section computed from the pipeline's own reports/ says so in its heading: its numbers are the profile's, and
    the claims ledger (which may read a larger budget, reports/claims) decides the claims."""
    return f"{title} (profile `{profile}`; the claims ledger decides the claims)"
