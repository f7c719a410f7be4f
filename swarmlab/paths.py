"""Where things live. Everything is absolute: Ray Tune changes the working directory of its trials."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from swarmlab.errors import SwarmlabError

# tracked paths that are results or DVC's own record (every dvc.lock: sweeps/dvc.lock is rewritten by `dvc repro`)
NOT_CODE = ("reports", "data", "outputs", "**/dvc.lock")
REPO_ROOT = Path(__file__).resolve().parents[1]
PARAMS_FILE = REPO_ROOT / "params.yaml"
# Where DVC (3.x) makes the copies it runs experiments in: <repo>/.dvc/tmp/exps/<tmp>/ for the queue's workers
# (`dvc exp run --queue`, `dvc queue start`), <repo>/.dvc/tmp/exps/standalone/<tmp>/ for `dvc exp run --temp`
COPIES = ((".dvc", "tmp", "exps"), (".dvc", "tmp", "exps", "standalone"))


def home_root(root: Path = REPO_ROOT) -> Path:
    """The repository a DVC experiment copy ``root`` was made from, else ``root`` itself: relative paths to what lies
    outside the repository (the shared datasets, the default MLflow store) resolve against it, so that a queued or
    temporary experiment reads and logs where its repository does (swarmlab/dvc_copies.py)."""
    for parts in sorted(COPIES, key=len, reverse=True):
        if root.parent.parts[-len(parts) :] == parts:
            return root.parents[len(parts)]
    return root


HOME_ROOT = home_root()
# Where stages read and write data/, outputs/, reports/: the repo root, or $SWARMLAB_WORKDIR
# (a scratch workspace for tests and side experiments that must not touch the DVC-tracked folders).
WORK_ROOT = Path(os.environ["SWARMLAB_WORKDIR"]).resolve() if os.environ.get("SWARMLAB_WORKDIR") else REPO_ROOT
DATA_DIR = WORK_ROOT / "data"
OUTPUTS_DIR = WORK_ROOT / "outputs"
REPORTS_DIR = WORK_ROOT / "reports"


def resolve(path: str | os.PathLike, base: Path = REPO_ROOT) -> Path:
    """``path`` made absolute against ``base`` (the repo root by default); ``~`` expanded."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def datasets_dir(params: dict | None = None) -> Path:
    """The shared datasets folder: ``$SWARMLAB_DATASETS``, else ``paths.datasets`` in params.yaml.

    Raises a SwarmlabError naming the folder when it does not exist.
    """
    configured = os.environ.get("SWARMLAB_DATASETS") or (params or {}).get("paths", {}).get(
        "datasets", "../shared/datasets"
    )
    path = resolve(configured, HOME_ROOT)
    if not path.is_dir():
        raise SwarmlabError(
            f"datasets folder {path} does not exist: set paths.datasets in params.yaml or SWARMLAB_DATASETS "
            f"to the folder holding imdb/, bert_vocab/, nltk_data/"
        )
    return path


def tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI`` if set, else an absolute sqlite store at the repo root (the repository's own, from a
    copy DVC made for an experiment: ``home_root``)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{HOME_ROOT / 'mlruns.db'}"


def git_commit() -> str:
    """The commit every run records: ``<sha>``, ``-dirty`` when tracked *code* differs from it (files under reports/,
    data/, outputs/ and any dvc.lock do not count); ``$SWARMLAB_GIT_COMMIT`` wins; ``unknown`` outside git. One function
    for every writer (``code_commit`` below); readers use ``swarmlab.drive.report.provenance``."""
    return code_commit(REPO_ROOT)


def code_commit(root: Path) -> str:
    """``<sha>`` of HEAD, with ``-dirty`` when tracked code differs from it; ``unknown`` outside git."""
    if os.environ.get("SWARMLAB_GIT_COMMIT"):
        return os.environ["SWARMLAB_GIT_COMMIT"]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        excludes = [f":(exclude,glob){p}" for p in NOT_CODE]  # glob: `**/` matches no folder too
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *excludes],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
