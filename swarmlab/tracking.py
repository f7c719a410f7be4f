"""Experiment tracking. MLflow is imported lazily so training runs with torch + pyarrow + tokenizers alone.

``MlflowTracker`` talks to MLflow through ``MlflowClient`` with explicit run ids (no global active run),
so a sweep's trial processes can each hold their own run, nested under a parent by tag.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

import yaml

from swarmlab.paths import tracking_uri
from swarmlab.errors import SwarmlabError
from swarmlab.settings import flatten

DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")  # SQLAlchemy stores MLflow accepts
SQLITE = "sqlite:///"


def sqlite_path(uri: str | None) -> Path | None:
    """The database file of a ``sqlite:///<path>`` URI, as written (relative paths stay relative); None for others."""
    return Path(uri[len(SQLITE) :]) if uri and uri.startswith(SQLITE) else None


def check_tracking_uri(uri: str | None = None, *, timeout_s: float = 3.0) -> str:
    """The tracking URI (``$MLFLOW_TRACKING_URI`` or the default sqlite store), or one line saying why it cannot work.

    Checked before any output is touched: a server must answer within ``timeout_s`` (MLflow itself retries for
    minutes), a sqlite store's folder must be writable, and a URI without a scheme (MLflow would take it for the
    deprecated file store) or with an unknown one is refused.
    """
    uri = uri or tracking_uri()
    parsed = urlparse(uri)
    scheme = parsed.scheme.split("+")[0]
    if scheme == "sqlite":
        db = sqlite_path(uri)
        if db is None:
            raise SwarmlabError(
                f"MLFLOW_TRACKING_URI={uri!r}: a sqlite store is sqlite:///<absolute or relative path>.db"
            )
        folder = db.expanduser().resolve().parent
        if folder.exists() and not os.access(folder, os.W_OK):
            raise SwarmlabError(
                f"tracking store folder {folder} is not writable (MLFLOW_TRACKING_URI={uri}): pick another "
                f"folder, or run with --no-tracking"
            )
        return uri
    if scheme in ("http", "https"):
        host, port = parsed.hostname, parsed.port or (443 if scheme == "https" else 80)
        if not host:
            raise SwarmlabError(f"MLFLOW_TRACKING_URI={uri!r} names no host: use http://host:port")
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
        except OSError as exc:
            raise SwarmlabError(
                f"no MLflow server answers at {uri} within {timeout_s:g} s ({exc.strerror or exc}): start "
                f"one (docs/tracking.md), fix MLFLOW_TRACKING_URI, or run with --no-tracking"
            ) from None
        return uri
    if scheme in DB_SCHEMES or scheme == "databricks":
        return uri
    if scheme in ("", "file"):
        raise SwarmlabError(
            f"MLFLOW_TRACKING_URI={uri!r} is a file store, which MLflow 3 deprecates: use "
            f"sqlite:///<path>/mlruns.db or http://host:port"
        )
    raise SwarmlabError(
        f"MLFLOW_TRACKING_URI={uri!r}: unknown scheme {parsed.scheme!r}; use sqlite:///<path>.db, "
        f"http(s)://host:port or a database URI"
    )


# The MLflow 3 UI opens an experiment in its GenAI (traces) view unless the experiment says it holds model
# training runs; with this tag it opens the runs table (#/experiments/<id>/runs).
TRAINING_VIEW_TAGS = {"mlflow.experimentKind": "custom_model_development"}


# ------------------------------------------------------------------------------------------------ run names
# A run's name says where it came from: ``<model>-seed<k> | <profile> | exp <DVC experiment> | <overrides>``, e.g.
# ``swarmformer_small-seed0 | smoke | exp forte-noil | train.lr=0.0003``. DVC sets DVC_EXP_NAME (the experiment's name,
# random unless `dvc exp run -n` gives one) and DVC_EXP_BASELINE_REV (the commit it started from) for the stage
# commands of `dvc exp run`, and DVC_STAGE (``train@imdb``) for those of `dvc exp run` and `dvc repro`. The overrides
# are the params.yaml settings that differ from that commit's (from HEAD's outside an experiment): what `-S` set, or
# an uncommitted edit. ``paths`` (where the data lies) and ``schedule`` (how runs are spread) change no result and
# are left out; ``profile`` has its own part. A name already taken in the experiment gets `` #2``, `` #3``...
DVC_ENV = ("DVC_EXP_NAME", "DVC_EXP_BASELINE_REV", "DVC_STAGE")
CONTEXT_ENV = "SWARMLAB_RUN_CONTEXT"  # the driver's context, for Ray workers (swarmlab/drive/schedule/scheduler.py)
NOT_SETTINGS = ("paths", "schedule", "profile")
MAX_NAME = 250


def _value(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def params_overrides(params_file: Path, rev: str) -> str | None:
    """``key=value`` for every leaf of ``params_file`` that differs from its version at git ``rev`` (``~key`` for one
    removed), space-separated, outside ``NOT_SETTINGS``; None when git cannot tell (no repository, file not tracked)."""
    params_file = Path(params_file).resolve()
    try:
        old_text = subprocess.run(
            ["git", "-C", str(params_file.parent), "show", f"{rev}:./{params_file.name}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
        new, old = (flatten(yaml.safe_load(s) or {}) for s in (params_file.read_text(), old_text))
    except (OSError, subprocess.SubprocessError, yaml.YAMLError):
        return None
    keep = lambda k: k.split(".")[0] not in NOT_SETTINGS
    changed = [f"{k}={_value(v)}" for k, v in new.items() if keep(k) and (k not in old or old[k] != v)]
    removed = [f"~{k}" for k in old if keep(k) and k not in new]
    return " ".join(changed + removed)


def run_context(params: dict) -> dict:
    """Tags saying where a run comes from: ``dvc_exp_name``, ``dvc_exp_baseline_rev``, ``dvc_stage`` (DVC's variables,
    each only when DVC set it) and ``params_overrides`` (see above; absent when git cannot tell). A Ray worker reads its driver's
    (``$SWARMLAB_RUN_CONTEXT``)."""
    if os.environ.get(CONTEXT_ENV):
        return json.loads(os.environ[CONTEXT_ENV])
    tags = {k.lower(): os.environ[k] for k in DVC_ENV if os.environ.get(k)}
    if params.get("params_file"):
        overrides = params_overrides(Path(params["params_file"]), os.environ.get("DVC_EXP_BASELINE_REV") or "HEAD")
        if overrides is not None:
            tags["params_overrides"] = overrides[:5000]  # MLflow caps a tag's value
    return tags


def run_title(run: str, profile: str, context: dict) -> str:
    """``<run> | <profile> | exp <name> | <overrides>``: the parts that exist, cut to MLflow's name length."""
    parts = [run, str(profile)]
    if context.get("dvc_exp_name"):
        parts.append(f"exp {context['dvc_exp_name']}")
    if context.get("params_overrides"):
        parts.append(context["params_overrides"])
    name = " | ".join(parts)
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def unique_name(client, experiment_id: str, name: str) -> str:
    """``name``, or ``name #k`` with the smallest k >= 2 that no run of the experiment has."""
    prefix = name.split(" ")[0]  # <model>-seed<k>: letters, digits, - and _ only, safe in a filter string
    taken = {
        r.info.run_name
        for r in client.search_runs(
            [experiment_id], filter_string=f"attributes.run_name LIKE '{prefix}%'", max_results=50000
        )
    }
    k, candidate = 1, name
    while candidate in taken:
        k += 1
        candidate = f"{name} #{k}"
    return candidate


class NullTracker:
    """Accepts everything, records nothing (``--no-tracking``)."""

    run_id: str | None = None

    def log_params(self, params: dict) -> None: ...
    def log_metrics(self, metrics: dict, step: int | None = None) -> None: ...
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None: ...
    def set_tags(self, tags: dict) -> None: ...
    def finish(self, status: str = "FINISHED") -> None: ...


@contextlib.contextmanager
def store_lock(uri: str):
    """Hold an exclusive lock beside a sqlite store while MLflow opens it.

    A process that opens a sqlite store first creates its tables and runs MLflow's schema migrations; two processes
    that open a new store at the same moment (two claims pieces, two grids started together) both migrate it and one
    fails (``duplicate column name``). The lock (``<db>.lock``, advisory) makes the second wait for the first. Other
    stores (a server, a database) migrate on their side: no lock.
    """
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    import fcntl  # POSIX only, like the rest of the pipeline's process handling

    db = db.expanduser().resolve()
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def open_client(uri: str | None = None):
    """An ``MlflowClient`` on ``uri`` (the tracking URI by default), opened under ``store_lock``: every process of
    the pipeline opens its store here, so two never migrate a new sqlite store at once."""
    from mlflow.tracking import MlflowClient  # mlflow: heavy, and only a tracked run needs it

    uri = uri or tracking_uri()
    with store_lock(uri):
        return MlflowClient(tracking_uri=uri)


class MlflowTracker:
    """One MLflow run. Resume an existing run with ``run_id``; nest under ``parent_run_id``."""

    def __init__(
        self,
        experiment: str,
        run_name: str | None = None,
        *,
        run_id: str | None = None,
        parent_run_id: str | None = None,
        tags: dict | None = None,
        uri: str | None = None,
    ):
        import mlflow  # mlflow: heavy, and only a tracked run needs it

        self.uri = uri or tracking_uri()
        mlflow.set_tracking_uri(self.uri)  # so artifact logging resolves the same store
        self.client = open_client(self.uri)
        exp = self.client.get_experiment_by_name(experiment)
        self.experiment_id = exp.experiment_id if exp else self.create_experiment(self.client, self.uri, experiment)
        if run_id:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
        else:
            all_tags = dict(tags or {})
            if parent_run_id:
                all_tags["mlflow.parentRunId"] = parent_run_id
            if run_name:
                run_name = unique_name(self.client, self.experiment_id, run_name)
            run = self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags)
            self.run_id = run.info.run_id

    @staticmethod
    def create_experiment(client, uri: str, name: str) -> str:
        """Create ``name`` (tagged for the training view); with a sqlite store its artifacts go beside the
        database, never under the cwd."""
        db = sqlite_path(uri)
        location = (db.parent / "mlartifacts" / name).resolve().as_uri() if db is not None else None
        try:
            return client.create_experiment(name, artifact_location=location, tags=TRAINING_VIEW_TAGS)
        except Exception:  # created meanwhile by another process (parallel sweep trials)
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param  # mlflow: heavy, and only a tracked run needs it

        flat = flatten(params)
        existing = self.client.get_run(self.run_id).data.params
        new = [Param(k, str(v)[:6000]) for k, v in flat.items() if k not in existing]  # params are write-once
        for i in range(0, len(new), 100):
            self.client.log_batch(self.run_id, params=new[i : i + 100])

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        from mlflow.entities import Metric  # mlflow: heavy, and only a tracked run needs it

        now = int(time.time() * 1000)
        batch = [
            Metric(k, float(v), now, step or 0)
            for k, v in flatten(metrics).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
        ]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def set_tags(self, tags: dict) -> None:
        for k, v in tags.items():
            self.client.set_tag(self.run_id, k, str(v))

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)


def make_tracker(enabled: bool, experiment: str, run_name: str, **kwargs):
    """An MlflowTracker when ``enabled``, else a NullTracker."""
    return MlflowTracker(experiment, run_name, **kwargs) if enabled else NullTracker()
