"""User-facing errors: one line naming the culprit and what to do, no traceback; atomic stage outputs."""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path


class SwarmlabError(Exception):
    """An error caused by input or configuration; the message says what is wrong and what to do."""


def cli(main):
    """Wrap a stage's ``main`` so that a SwarmlabError prints ``error: <msg>`` and exits 2 without a traceback.

    Set ``SWARMLAB_TRACEBACK=1`` to see the traceback anyway.
    """

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except SwarmlabError as exc:
            if os.environ.get("SWARMLAB_TRACEBACK") == "1":
                raise
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)

    return wrapper


@contextlib.contextmanager
def atomic_dir(final: Path):
    """Yield a temporary sibling folder; on success it replaces ``final``, on any error it is removed.

    DVC caches whatever a stage leaves behind, so a failed stage must leave nothing half-written.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(final) if final.is_dir() else final.unlink()
    tmp.chmod(0o755)  # mkdtemp makes it private
    tmp.rename(final)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
