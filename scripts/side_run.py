"""Run a side script (a benchmark, a run outside DVC) so that its output carries the fingerprint of the code it ran.

    python scripts/side_run.py --out reports/side/<name>/<table>.txt benchmarks/<script>.py [its arguments...]

The script runs in this process (``runpy``), its standard output shown and kept; when it succeeds, ``--out`` is
written (swapped in whole) and beside it ``<out>.code.json``: the command, the commit, and the sha256 of every
repository file the run imported. The report marks the side run's numbers stale when any of those files changes
(swarmlab/drive/report/side_code.py), and names this command to rerun it. A failed script writes nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import runpy
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from swarmlab.io import atomic_write_text  # noqa: E402
from swarmlab.paths import code_commit  # noqa: E402
from swarmlab.drive.report import side_code  # noqa: E402


class Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text: str) -> int:
        for s in self.streams:
            s.write(text)
        return len(text)

    def flush(self) -> None:
        for s in self.streams:
            s.flush()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where the script's standard output is kept")
    parser.add_argument("script", help="the script to run (a path)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = parser.parse_args(argv)
    script, out = Path(args.script).resolve(), Path(args.out).resolve()
    if not script.is_file():
        print(f"error: no script {args.script}", file=sys.stderr)
        return 2
    if not out.is_relative_to(REPO):
        print(
            f"error: --out {args.out} is outside the repository: the report reads side runs under reports/side",
            file=sys.stderr,
        )
        return 2
    command = shlex.join(
        ["python", "scripts/side_run.py", "--out", out.relative_to(REPO).as_posix(), args.script, *args.args]
    )
    kept = io.StringIO()
    stdout, sys.stdout = sys.stdout, Tee(sys.stdout, kept)
    sys.argv = [str(script), *args.args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            print(f"error: {args.script} exited {exc.code}: nothing written", file=sys.stderr)
            return exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout = stdout
    record = {
        "command": command,
        "commit": code_commit(REPO),
        "made": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "files": side_code.imported_files(REPO, extra=(script,)),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, kept.getvalue())
    atomic_write_text(side_code.record_path(out), json.dumps(record, indent=2) + "\n")
    print(f"side run: {out.relative_to(REPO)} and its code record ({len(record['files'])} files)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
