"""Stage output that is never half-written, and parquet shards read with one-line errors.

DVC caches whatever a stage leaves behind, so a failed or killed stage must leave nothing half-written:
every output goes to a temporary sibling first and is renamed into place on success.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

from swarmlab.errors import SwarmlabError


@contextlib.contextmanager
def atomic_dir(final: Path):
    """Yield a temporary sibling folder; on success it replaces ``final``, on any error it is removed."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".{final.name}.tmp-*"):  # what an interrupted (killed) run of this stage left
        _remove(stale)  # (and swap_into_place removes the .old a kill in the swap left)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tmp.chmod(0o755)  # mkdtemp makes it private
    swap_into_place(tmp, final)


def swap_into_place(new: Path, final: Path) -> None:
    """Put the finished ``new`` (a file or folder beside ``final``) in the place of ``final``, by renames.

    The previous ``final`` is renamed aside to ``.<name>.old`` and removed only once ``new`` holds its name: a kill
    at any point leaves whole folders, never a half-removed one, and the next swap removes the ``.old``. The one
    step of a stage's write that changes what a reader sees: tests wrap it to hold a stage there and kill it
    (tests/conftest.py: ``held_before_swap``).
    """
    new, final = Path(new), Path(final)
    old = final.parent / f".{final.name}.old"
    _remove(old)
    if final.exists():
        final.rename(old)
    new.rename(final)
    _remove(old)


def _remove(path: Path) -> None:
    """Remove a file or a folder tree; nothing if it is not there."""
    shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; a plain open() would honour the umask
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_parquet_checked(path: Path, columns: list[str] | None = None):
    """``pq.read_table`` with a one-line error naming the damaged or missing file."""
    import pyarrow.parquet as pq  # pyarrow, numpy: only the parquet helpers need them; every stage imports swarmlab.io

    if not Path(path).is_file():
        raise SwarmlabError(f"{path} is missing: run the stage that writes it first (dvc repro)")
    try:
        return pq.read_table(path, columns=columns)
    except Exception as exc:  # ArrowInvalid, OSError, ... for damaged files
        raise SwarmlabError(
            f"cannot read {path}: {str(exc).splitlines()[0]}; the shard is damaged: "
            f"delete it and rerun its stage (dvc repro --force <stage>)"
        ) from None


def parquet_rows(path: Path) -> int:
    """The rows of a parquet file, from its footer alone, with ``read_parquet_checked``'s one-line errors."""
    import pyarrow.parquet as pq  # pyarrow: only the parquet helpers need it

    if not Path(path).is_file():
        raise SwarmlabError(f"{path} is missing: run the stage that writes it first (dvc repro)")
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception as exc:  # ArrowInvalid, OSError, ... for damaged files
        raise SwarmlabError(
            f"cannot read {path}: {str(exc).splitlines()[0]}; the shard is damaged: "
            f"delete it and rerun its stage (dvc repro --force <stage>)"
        ) from None


def write_shards(table, folder: Path, split: str, shards: int) -> list[str]:
    """Write ``table`` as ``<split>-NNN.parquet`` (zstd) in ``shards`` near-equal parts; returns the names."""
    import numpy as np  # pyarrow, numpy: only the parquet helpers need them; every stage imports swarmlab.io
    import pyarrow.parquet as pq

    names = []
    bounds = np.linspace(0, table.num_rows, max(1, shards) + 1).astype(int)
    for k in range(len(bounds) - 1):
        name = f"{split}-{k:03d}.parquet"
        pq.write_table(table.slice(bounds[k], bounds[k + 1] - bounds[k]), Path(folder) / name, compression="zstd")
        names.append(name)
    return names


@contextlib.contextmanager
def one_writer(lock_dir: Path, name: str, what: str):
    """Hold ``<lock_dir>/<name>.lock`` while a stage writes its outputs; a second holder is refused in one line naming
    the first (host, pid, start). ``flock`` is released by the kernel when the holder exits, however it exits, so a
    killed run never leaves a stuck lock. ``what``: the work, for the message (``train@clustering_direct``)."""
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    handle = open(lock_dir / f"{name}.lock", "a+")  # noqa: SIM115 - held open for the duration
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise SwarmlabError(
                f"{what} is already running on these outputs ({holder}): two writers would clobber each other's "
                f"runs; wait for it to finish or stop it"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}")
        handle.flush()
        yield
    finally:
        handle.close()  # releases the lock
