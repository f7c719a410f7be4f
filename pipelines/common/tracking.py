"""Experiment tracking. MLflow is imported lazily so training runs with torch + pyarrow + tokenizers alone.

``MlflowTracker`` talks to MLflow through ``MlflowClient`` with explicit run ids (no global active run),
so a sweep's trial processes can each hold their own run, nested under a parent by tag.
"""

from __future__ import annotations

import math
from pathlib import Path

from pipelines.common.paths import tracking_uri
from swarmlab.errors import SwarmlabError
from swarmlab.settings import flatten

DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")  # SQLAlchemy stores MLflow accepts


def check_tracking_uri(uri: str | None = None, *, timeout_s: float = 3.0) -> str:
    """The tracking URI (``$MLFLOW_TRACKING_URI`` or the default sqlite store), or one line saying why it cannot work.

    Checked before any output is touched: a server must answer within ``timeout_s`` (MLflow itself retries for
    minutes), a sqlite store's folder must be writable, and a URI without a scheme (MLflow would take it for the
    deprecated file store) or with an unknown one is refused.
    """
    import os
    import socket
    from urllib.parse import urlparse

    uri = uri or tracking_uri()
    parsed = urlparse(uri)
    scheme = parsed.scheme.split("+")[0]
    if scheme == "sqlite":
        if not uri.startswith("sqlite:///"):
            raise SwarmlabError(
                f"MLFLOW_TRACKING_URI={uri!r}: a sqlite store is sqlite:///<absolute or relative path>.db"
            )
        folder = Path(uri[len("sqlite:///") :]).expanduser().resolve().parent
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


class NullTracker:
    """Accepts everything, records nothing (``--no-tracking``)."""

    run_id: str | None = None

    def log_params(self, params: dict) -> None: ...
    def log_metrics(self, metrics: dict, step: int | None = None) -> None: ...
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None: ...
    def set_tags(self, tags: dict) -> None: ...
    def finish(self, status: str = "FINISHED") -> None: ...


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
        import mlflow
        from mlflow.tracking import MlflowClient

        self.uri = uri or tracking_uri()
        mlflow.set_tracking_uri(self.uri)  # so artifact logging resolves the same store
        self.client = MlflowClient(tracking_uri=self.uri)
        exp = self.client.get_experiment_by_name(experiment)
        self.experiment_id = exp.experiment_id if exp else self.create_experiment(self.client, self.uri, experiment)
        if run_id:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
        else:
            all_tags = dict(tags or {})
            if parent_run_id:
                all_tags["mlflow.parentRunId"] = parent_run_id
            run = self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags)
            self.run_id = run.info.run_id

    @staticmethod
    def create_experiment(client, uri: str, name: str) -> str:
        """Create ``name`` (tagged for the training view); with a sqlite store its artifacts go beside the
        database, never under the cwd."""
        location = None
        if uri.startswith("sqlite:///"):
            db = Path(uri[len("sqlite:///") :])
            location = (db.parent / "mlartifacts" / name).resolve().as_uri()
        try:
            return client.create_experiment(name, artifact_location=location, tags=TRAINING_VIEW_TAGS)
        except Exception:  # created meanwhile by another process (parallel sweep trials)
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param

        flat = flatten(params)
        existing = self.client.get_run(self.run_id).data.params
        new = [Param(k, str(v)[:6000]) for k, v in flat.items() if k not in existing]  # params are write-once
        for i in range(0, len(new), 100):
            self.client.log_batch(self.run_id, params=new[i : i + 100])

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        import time

        from mlflow.entities import Metric

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
