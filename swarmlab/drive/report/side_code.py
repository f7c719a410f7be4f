"""The code fingerprint of a side run (``reports/side/``: benchmarks and runs made outside DVC), so that the report can
tell whether the code that made its numbers changed since.

``scripts/side_run.py`` runs a script in its own process and, when it succeeded, writes its output and beside it
``<output>.code.json``: the command, the commit, and the sha256 of every repository file the run imported (what it
ran, not a folder list). ``changed(record)`` names the files that differ now; a record that is missing makes the
side run's staleness unknown, and the report says so.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

SUFFIX = ".code.json"


def record_path(output: Path) -> Path:
    return Path(output).with_name(Path(output).name + SUFFIX)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def imported_files(root: Path, extra: tuple[Path, ...] = ()) -> dict[str, str]:
    """sha256 of each file under ``root`` that a loaded module came from (and of ``extra``), by relative path."""
    root = Path(root).resolve()
    files = {}
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if not name:
            continue
        path = Path(name).resolve()
        if path.suffix == ".py" and path.is_relative_to(root) and ".venv" not in path.parts and path.is_file():
            files[path.relative_to(root).as_posix()] = _sha256(path)
    for path in extra:
        path = Path(path).resolve()
        files[path.relative_to(root).as_posix()] = _sha256(path)
    return dict(sorted(files.items()))


def changed(record: dict, root: Path) -> list[str]:
    """The recorded files whose content differs now (or that are gone)."""
    out = []
    for rel, sha in (record.get("files") or {}).items():
        path = Path(root) / rel
        if not path.is_file() or _sha256(path) != sha:
            out.append(rel)
    return out


def read(output: Path) -> dict | None:
    try:
        data = json.loads(record_path(output).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else None


def staleness(output: Path, root: Path) -> tuple[bool, str]:
    """(known, line) for a side run's output: ``line`` is "" when the code it imported is unchanged."""
    record = read(output)
    if record is None:
        return False, ""
    diff = changed(record, root)
    if not diff:
        return True, ""
    shown = ", ".join(diff[:6]) + (f" and {len(diff) - 6} more" if len(diff) > 6 else "")
    commit = str(record.get("commit") or "unknown")
    at = "at a commit not recorded" if commit == "unknown" else f"at {commit[:7]}"
    return True, f"code changed since the side run {at} ({shown}): rerun `{record['command']}`"
