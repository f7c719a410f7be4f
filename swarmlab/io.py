"""Stage output that is never half-written, and parquet shards read with one-line errors.

DVC caches whatever a stage leaves behind, so a failed or killed stage must leave nothing half-written:
every output goes to a temporary sibling first and is renamed into place on success.
"""

from __future__ import annotations

import contextlib
import os
import shutil
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
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    hold_before_swap()
    if final.exists():
        shutil.rmtree(final) if final.is_dir() else final.unlink()
    tmp.chmod(0o755)  # mkdtemp makes it private
    tmp.rename(final)


def hold_before_swap() -> None:
    """Tests only: ``SWARMLAB_HOLD_BEFORE_SWAP_S`` keeps a finished output in its temporary folder that long, so
    that a kill -9 lands between writing and swapping (the rerun must clean up what it leaves)."""
    hold = os.environ.get("SWARMLAB_HOLD_BEFORE_SWAP_S")
    if hold:
        time.sleep(float(hold))


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
    import pyarrow.parquet as pq

    if not Path(path).is_file():
        raise SwarmlabError(f"{path} is missing: run the stage that writes it first (dvc repro)")
    try:
        return pq.read_table(path, columns=columns)
    except Exception as exc:  # ArrowInvalid, OSError, ... for damaged files
        raise SwarmlabError(
            f"cannot read {path}: {str(exc).splitlines()[0]}; the shard is damaged: "
            f"delete it and rerun its stage (dvc repro --force <stage>)"
        ) from None


def write_shards(table, folder: Path, split: str, shards: int) -> list[str]:
    """Write ``table`` as ``<split>-NNN.parquet`` (zstd) in ``shards`` near-equal parts; returns the names."""
    import numpy as np
    import pyarrow.parquet as pq

    names = []
    bounds = np.linspace(0, table.num_rows, max(1, shards) + 1).astype(int)
    for k in range(len(bounds) - 1):
        name = f"{split}-{k:03d}.parquet"
        pq.write_table(table.slice(bounds[k], bounds[k + 1] - bounds[k]), Path(folder) / name, compression="zstd")
        names.append(name)
    return names
