"""Experiment tracking. MLflow is imported lazily so training runs with torch + pyarrow + tokenizers alone.

``MlflowTracker`` talks to MLflow through ``MlflowClient`` with explicit run ids (no global active run),
so a sweep's trial processes can each hold their own run, nested under a parent by tag.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import json
import logging
import math
import os
import socket
import sqlite3
import stat
import subprocess
import time
from importlib.metadata import version
from pathlib import Path
from urllib.parse import unquote, urlparse

import yaml

from swarmlab.paths import tracking_uri
from swarmlab.errors import SwarmlabError
from swarmlab.log import get_logger
from swarmlab.settings import flatten

logger = get_logger(__name__)

SQLITE = "sqlite:///"


def sqlite_path(uri: str | None) -> Path | None:
    """The database file of a ``sqlite:///<path>`` URI, as written (relative paths stay relative); None for others."""
    return Path(uri[len(SQLITE) :]) if uri and uri.startswith(SQLITE) else None


CONNECT_TIMEOUT_ENV = "SWARMLAB_CONNECT_TIMEOUT_S"
CONNECT_TIMEOUT_S = 5.0  # a live server on a LAN answers in milliseconds; 5 s leaves room for a slow VPN or a busy host
DB_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
# MLflow retries a failed HTTP request 7 times with backoff (about 4 minutes) and waits 120 s for each answer: a
# tracking server that dies mid-run would stall a run that long at every call. A run only logs, and goes on without
# tracking when its store fails (MlflowTracker), so a dead server should cost seconds: 2 retries, 1 s backoff factor
# (about 3 s between the tries), 10 s per answer. Set by default only: a user's values win.
MLFLOW_HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}


def connect_timeout_s() -> float:
    """How long a tracking store or a Ray cluster may take to answer the checks before a run starts:
    ``$SWARMLAB_CONNECT_TIMEOUT_S``, default 5 s."""
    raw = os.environ.get(CONNECT_TIMEOUT_ENV)
    if not raw:
        return CONNECT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 and math.isfinite(value)):
        raise SwarmlabError(f"{CONNECT_TIMEOUT_ENV}={raw!r} is not a positive number of seconds (default 5)")
    return value


def bound_mlflow_retries() -> None:
    """Set MLflow's HTTP retry settings to ``MLFLOW_HTTP_DEFAULTS`` where the user set none."""
    for key, value in MLFLOW_HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)


def shown(uri: str) -> str:
    """``uri`` without its password (database and server URIs may carry one)."""
    parsed = urlparse(uri)
    if not parsed.password:
        return uri
    return parsed._replace(netloc=parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)).geturl()


def _reason(exc: BaseException) -> str:
    """An OS error's words (``connection refused``), else the exception's first line."""
    reason = getattr(exc, "reason", None)  # urllib's URLError wraps the socket's error
    if isinstance(reason, BaseException):
        exc = reason
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    if getattr(exc, "strerror", None):
        return exc.strerror.lower()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _check_sqlite(uri: str) -> None:
    db = sqlite_path(uri)
    if db is None:
        raise SwarmlabError(f"MLFLOW_TRACKING_URI={uri!r}: a sqlite store is sqlite:///<absolute or relative path>.db")
    db = db.expanduser().resolve()
    folder = db.parent
    if folder.exists() and not os.access(folder, os.W_OK):
        raise SwarmlabError(
            f"tracking store folder {folder} is not writable (MLFLOW_TRACKING_URI={uri}): pick another "
            f"folder, or run with --no-tracking"
        )
    if not db.exists():
        return  # MLflow creates it (store_lock creates its folder)
    if not db.is_file():
        raise SwarmlabError(f"tracking store {db} is not a file (MLFLOW_TRACKING_URI={uri}): name a .db file in it")
    try:
        with open(db, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise SwarmlabError(f"cannot read tracking store {db} ({_reason(exc)}): fix its permissions") from None
    if head and head != SQLITE_HEADER:
        raise SwarmlabError(
            f"tracking store {db} is not a SQLite database (it begins {head[:8]!r}): move it away (MLflow creates a "
            f"new one), point MLFLOW_TRACKING_URI at another file, or run with --no-tracking"
        )
    # Read-only: root ignores the mode bits (os.access says yes), so a store marked read-only (chmod a-w: an archived
    # store, say) is refused by its bits, and one on a read-only mount by SQLite itself, which then opens it read-only
    # and refuses the write lock. BEGIN IMMEDIATE takes that lock and ROLLBACK drops it: the store is left as it was.
    readonly = not db.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    if not readonly and head:
        conn = None
        try:
            conn = sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=0.1, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            readonly = "readonly" in str(exc) or "read-only" in str(exc)  # "database is locked": in use, writable
        finally:
            if conn is not None:
                conn.close()
    if readonly:
        raise SwarmlabError(
            f"tracking store {db} is read-only: make it writable (chmod u+w), point MLFLOW_TRACKING_URI at another "
            f"file, or run with --no-tracking"
        )


def _check_server(uri: str, timeout_s: float) -> None:
    """GET ``<uri>/health``: an MLflow server answers 200 ``OK``."""
    import ssl
    import urllib.error
    import urllib.request

    parsed = urlparse(uri)
    if not parsed.hostname:
        raise SwarmlabError(f"MLFLOW_TRACKING_URI={shown(uri)!r} names no host: use http://host:port")
    context = None
    if parsed.scheme == "https":
        if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() == "true":
            context = ssl._create_unverified_context()  # what MLflow itself does with this setting
        else:
            context = ssl.create_default_context(cafile=os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH") or None)
    url = f"{uri.rstrip('/')}/health"
    fix = "fix MLFLOW_TRACKING_URI, or run with --no-tracking"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=context) as response:
            response.read(64)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):  # /health needs no login on an MLflow server with auth; a proxy in front may
            hint = "it wants credentials: set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or _TOKEN)"
        else:
            hint = "it is not an MLflow tracking server: point MLFLOW_TRACKING_URI at one, or run with --no-tracking"
        raise SwarmlabError(f"the server at {shown(uri)} answered {exc.code} to /health: {hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = _reason(exc)
        if reason == "timed out":
            raise SwarmlabError(
                f"the server at {shown(uri)} did not answer GET /health within {timeout_s:g} s (it is hung, or not "
                f"an HTTP server): restart it, {fix} ({CONNECT_TIMEOUT_ENV} sets the wait)"
            ) from None
        if isinstance(getattr(exc, "reason", None), ssl.SSLError):
            raise SwarmlabError(
                f"TLS with {shown(uri)} failed ({reason}): set MLFLOW_TRACKING_SERVER_CERT_PATH to its certificate, "
                f"or {fix}"
            ) from None
        raise SwarmlabError(
            f"no MLflow server answers at {shown(uri)} ({reason}): start one (docs/tracking.md), {fix}"
        ) from None


def _check_database(uri: str, scheme: str, timeout_s: float) -> None:
    """A TCP connection to the database server; a URI with no host (a unix socket) is left to the driver."""
    parsed = urlparse(uri)
    try:
        host, port = parsed.hostname, parsed.port or DB_PORTS[scheme]
    except ValueError:  # a port that is not a number
        raise SwarmlabError(f"MLFLOW_TRACKING_URI={shown(uri)!r}: its port is not a number") from None
    if not host:
        return
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise SwarmlabError(
            f"no {scheme} server answers at {host}:{port} within {timeout_s:g} s ({_reason(exc)}; "
            f"MLFLOW_TRACKING_URI={shown(uri)}): start it, fix MLFLOW_TRACKING_URI, or run with --no-tracking"
        ) from None


def check_tracking_uri(uri: str | None = None, *, timeout_s: float | None = None) -> str:
    """The tracking URI (``$MLFLOW_TRACKING_URI`` or the default sqlite store), or one line saying why it cannot work.

    Checked before any output is touched, each answer awaited at most ``timeout_s`` (``connect_timeout_s()``: 5 s by
    default; MLflow itself retries for minutes):

    - sqlite: the folder is writable; an existing file is a SQLite database (its 16-byte header) and not read-only;
    - http(s): ``GET <uri>/health`` answers 200 (an MLflow server's ``OK``): refused, silent, or another server;
    - postgresql, mysql, mssql: a TCP connection to host:port (5432, 3306, 1433 by default; no host: a unix socket,
      not checked);
    - no scheme (MLflow would take it for the deprecated file store) or an unknown one: refused.
    """
    uri = uri or tracking_uri()
    system_metrics_switch()  # a bad MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING is this check's error too
    timeout_s = connect_timeout_s() if timeout_s is None else timeout_s
    parsed = urlparse(uri)
    scheme = parsed.scheme.split("+")[0]
    if scheme == "sqlite":
        _check_sqlite(uri)
    elif scheme in ("http", "https"):
        _check_server(uri, timeout_s)
    elif scheme in DB_PORTS:
        _check_database(uri, scheme, timeout_s)
    elif scheme == "databricks":
        pass  # its own client and credentials; nothing to probe without them
    elif scheme in ("", "file"):
        raise SwarmlabError(
            f"MLFLOW_TRACKING_URI={uri!r} is a file store, which MLflow 3 deprecates: use "
            f"sqlite:///<path>/mlruns.db or http://host:port"
        )
    else:
        raise SwarmlabError(
            f"MLFLOW_TRACKING_URI={shown(uri)!r}: unknown scheme {parsed.scheme!r}; use sqlite:///<path>.db, "
            f"http(s)://host:port or a database URI"
        )
    return uri


SYSTEM_METRICS_EVERY_S = 5  # MLflow's system metrics of a training run: CPU, memory (and GPU), one sample per 5 s
SYSTEM_METRICS_ENV = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"  # MLflow's own switch, honoured when set
# what a logged model (MLflow's pyfunc over a checkpoint) needs where it is loaded, beside this project itself
MODEL_REQUIREMENTS = ("mlflow", "torch", "numpy", "pyyaml")


def system_metrics_switch() -> bool | None:
    """``$MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING`` as MLflow reads it (true/false, 1/0; None when unset): set, it
    decides whether a training run samples system metrics (they are on by default); anything else is one line."""
    raw = os.environ.get(SYSTEM_METRICS_ENV)
    if raw is None or raw.strip() == "":
        return None
    value = raw.strip().lower()
    if value not in ("true", "false", "1", "0"):
        raise SwarmlabError(f"{SYSTEM_METRICS_ENV}={raw!r}: use true or false (1 or 0)")
    return value in ("true", "1")


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
    def log_dataset(self, name: str, digest: str, source: str, context: str) -> None: ...
    def log_model(self, name: str, code: Path, artifacts: dict, example, output, step: int, metadata: dict) -> None: ...
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


# an experiment's artifacts: <store folder>/mlartifacts/<name> (MlflowTracker.create_experiment, reroot_artifacts)
ARTIFACTS = "mlartifacts"
# the columns that hold a location under an experiment's artifact location (runs, logged models, registered versions)
UNDER_EXPERIMENT = (
    ("runs", "artifact_uri"),
    ("logged_models", "artifact_location"),
    ("model_versions", "source"),
    ("model_versions", "storage_location"),
)


def _local(location: str) -> Path | None:
    """The folder of a local artifact location (``file://`` URI or plain absolute path); None for remote ones."""
    if location.startswith("file://"):
        return Path(unquote(urlparse(location).path))
    return Path(location) if location.startswith("/") else None


def reroot_artifacts(db: Path, *, new_store_ok: bool = False) -> list[str]:
    """Point every experiment of store ``db`` whose artifacts this project placed (``<folder>/mlartifacts/<name>``)
    at ``<db's folder>/mlartifacts/<name>``, with its runs' and models' locations, in one transaction. An experiment
    is left as it is when its location is already there, is not of that form, or is still there while the new place
    is missing (a store copied without its artifacts). Returns one line per experiment moved.

    MLflow 3.17 stores each experiment's artifact location as an absolute ``file://`` URI, so a store moved or
    recloned with its repository would show no artifacts, and new runs would write into the old folder: the tracker
    (``open_client``) and ``swarmlab ui`` re-root first. ``new_store_ok``: a store with no tables yet (MLflow
    creates them) moves nothing instead of raising."""
    home = (db.parent / ARTIFACTS).resolve()
    moved = []
    conn = sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=30)
    try:
        with conn:  # one transaction: all re-rooted, or none
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "experiments" not in tables:
                if new_store_ok:
                    return moved
                raise SwarmlabError(f"{db} is not an MLflow store (no experiments table)")
            rows = conn.execute("SELECT experiment_id, name, artifact_location FROM experiments").fetchall()
            for experiment_id, name, location in rows:
                old = _local(location or "")
                if old is None or old.parent.name != ARTIFACTS or old.parent == home:
                    continue
                new = home / old.name
                if not new.exists() and old.exists():
                    continue
                new_uri = new.as_uri()
                conn.execute(
                    "UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (new_uri, experiment_id)
                )
                for table, column in UNDER_EXPERIMENT:
                    if table not in tables:
                        continue
                    # a plain prefix test: LIKE would read the "_" of names such as clustering_direct as a wildcard
                    conn.execute(
                        f"UPDATE {table} SET {column} = ? || substr({column}, ?) WHERE substr({column}, 1, ?) = ?",
                        (new_uri + "/", len(location) + 2, len(location) + 1, location + "/"),
                    )
                moved.append(f"{name}: {location} -> {new_uri}")
    finally:
        conn.close()
    return moved


def open_client(uri: str | None = None):
    """An ``MlflowClient`` on ``uri`` (the tracking URI by default), opened under ``store_lock``: every process of
    the pipeline opens its store here, so two never migrate a new sqlite store at once. A sqlite store that was moved
    (a recloned or copied repository) has its artifact locations re-rooted beside it first (``reroot_artifacts``)."""
    from mlflow.tracking import MlflowClient  # mlflow: heavy, and only a tracked run needs it

    uri = uri or tracking_uri()
    bound_mlflow_retries()
    with store_lock(uri):
        db = sqlite_path(uri)
        if db is not None and db.is_file():  # a store moved with its repository: its artifacts where they now are
            try:
                moved = reroot_artifacts(db, new_store_ok=True)
            except sqlite3.Error as exc:  # read-only or busy: MLflow's own open says more if the store is unusable
                logger.warning(f"warning: tracking store {db}: artifact locations not checked ({exc})")
                moved = []
            for line in moved:
                logger.info(f"tracking store {db}: re-rooted {line}")
        return MlflowClient(tracking_uri=uri)


def with_source(tags: dict) -> dict:
    """``tags`` with MLflow's own source tags beside ours, so that its Source and Version columns are filled:
    ``mlflow.source.git.commit`` from ``git_commit``, ``mlflow.source.name`` (the stage's module) from ``stage``."""
    out = dict(tags)
    if tags.get("git_commit") not in (None, "", "unknown"):
        out["mlflow.source.git.commit"] = tags["git_commit"]
    if tags.get("stage"):
        out.setdefault("mlflow.source.name", f"pipelines/{str(tags['stage']).split('-')[0]}.py")  # sweep-trial: sweep
        out.setdefault("mlflow.source.type", "LOCAL")
    return out


def user() -> str:
    """Who runs this, as MLflow's own runs record it (``mlflow.user``); "unknown" where the system has no name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container user with no passwd entry and no $USER
        return "unknown"


# a run's tags that its logged models carry too (MLflow would give a model the Ray worker's file as its source)
MODEL_SOURCE_TAGS = ("mlflow.source.name", "mlflow.source.type", "mlflow.source.git.commit", "mlflow.user")


def _tolerant(method):
    """A tracker method that, once the store has failed, does nothing, and whose own store failure turns the tracker
    off (``MlflowTracker.lose``) instead of failing the run."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.lost:
            return None
        try:
            return method(self, *args, **kwargs)
        except ImportError:  # mlflow not installed: not a store failure; --no-tracking is the fix, said by the caller
            raise
        except Exception as exc:  # noqa: BLE001 - any store failure (HTTP, SQL, disk): the run's results do not need it
            self.lose(exc)
            return None

    return wrapper


class MlflowTracker:
    """One MLflow run. Resume an existing run with ``run_id`` (with ``keep_end_time`` it ends when it had ended, so
    a later stage's results leave its Duration alone); nest under ``parent_run_id``. ``system_metrics``: MLflow's
    monitor samples CPU and memory until ``finish``, unless ``$MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING`` is false.

    A store that fails once the run is under way (a server that died, a full or read-only disk, a corrupted database)
    does not stop the run: the tracker logs one warning naming the store and the cause and records nothing more
    (a ``NullTracker`` from then on). The run's results live in its output folder; its MLflow run stays as far as it
    got, unfinished (RUNNING). ``run_id`` keeps the run's id, so run.json still names it. The store is checked before
    a stage starts (``check_tracking_uri``), so a store that is wrong from the start is that check's one-line error.
    """

    def __init__(
        self,
        experiment: str,
        run_name: str | None = None,
        *,
        run_id: str | None = None,
        parent_run_id: str | None = None,
        tags: dict | None = None,
        uri: str | None = None,
        system_metrics: bool = False,
        keep_end_time: bool = False,
    ):
        self.uri = uri or tracking_uri()
        self.run_id = run_id
        self.run_name = run_name
        self.lost: str | None = None  # why the store failed, once it has
        self.monitor = None
        self.end_time: int | None = None  # set when a resumed run keeps its own end (its Duration): keep_end_time
        self._open(experiment, run_name, run_id, parent_run_id, tags, keep_end_time)
        switch = system_metrics_switch()
        if system_metrics and switch is not False and not self.lost:
            self._watch_system(resumed=bool(run_id))

    @_tolerant
    def _open(self, experiment, run_name, run_id, parent_run_id, tags, keep_end_time) -> None:
        import mlflow  # mlflow: heavy, and only a tracked run needs it

        mlflow.set_tracking_uri(self.uri)  # so artifact logging resolves the same store
        self.client = open_client(self.uri)
        exp = self.client.get_experiment_by_name(experiment)
        self.experiment_id = exp.experiment_id if exp else self.create_experiment(self.client, self.uri, experiment)
        if run_id:
            if keep_end_time:
                self.end_time = self.client.get_run(run_id).info.end_time
            self.client.update_run(run_id, status="RUNNING")
        else:
            all_tags = {k: str(v) for k, v in with_source(tags or {}).items()}  # a REST store wants strings
            all_tags.setdefault("mlflow.user", user())  # the run's "Created by", as MLflow's fluent API sets it
            if parent_run_id:
                all_tags["mlflow.parentRunId"] = parent_run_id
            if run_name:
                run_name = unique_name(self.client, self.experiment_id, run_name)
            run = self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags)
            self.run_id = run.info.run_id

    @_tolerant
    def _watch_system(self, resumed: bool) -> None:
        """MLflow's own system metrics (CPU and memory use, and the GPU's where pynvml is installed: its System
        metrics tab), sampled every ``SYSTEM_METRICS_EVERY_S`` by MLflow's monitor thread until ``finish``."""
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # not two INFO lines per run
        self.monitor = SystemMetricsMonitor(
            self.run_id, sampling_interval=SYSTEM_METRICS_EVERY_S, resume_logging=resumed, tracking_uri=self.uri
        )
        self.monitor.start()

    def lose(self, exc: BaseException) -> None:
        """Turn tracking off for this run after the store failed with ``exc``: one warning line."""
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        self.lost = f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__
        run = self.run_id or self.run_name or "this run"
        if self.monitor is not None:  # it writes to the same store
            self.monitor.finish()
            self.monitor = None
        logger.warning(
            f"warning: tracking store {shown(self.uri)} failed ({self.lost}): MLflow run {run} goes on without "
            f"tracking; its results are in its output folder and the MLflow run stays unfinished"
        )

    @staticmethod
    def create_experiment(client, uri: str, name: str) -> str:
        """Create ``name`` (tagged for the training view); with a sqlite store its artifacts go beside the
        database, never under the cwd."""
        db = sqlite_path(uri)
        location = (db.parent / ARTIFACTS / name).resolve().as_uri() if db is not None else None
        try:
            return client.create_experiment(name, artifact_location=location, tags=TRAINING_VIEW_TAGS)
        except Exception:  # created meanwhile by another process (parallel sweep trials)
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    @_tolerant
    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param  # mlflow: heavy, and only a tracked run needs it

        flat = flatten(params)
        existing = self.client.get_run(self.run_id).data.params
        new = [Param(k, str(v)[:6000]) for k, v in flat.items() if k not in existing]  # params are write-once
        for i in range(0, len(new), 100):
            self.client.log_batch(self.run_id, params=new[i : i + 100])

    @_tolerant
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

    @_tolerant
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    @_tolerant
    def set_tags(self, tags: dict) -> None:
        for k, v in with_source(tags).items():
            self.client.set_tag(self.run_id, k, str(v))

    @_tolerant
    def log_dataset(self, name: str, digest: str, source: str, context: str) -> None:
        """The data the run read, as an MLflow dataset input (its Datasets column): ``name``, the data's ``digest``
        (its fingerprint), ``source`` (its folder) and ``context`` (``training``, ``evaluation``)."""
        from mlflow.entities import Dataset, DatasetInput, InputTag  # mlflow: heavy, and only a tracked run needs it

        dataset = Dataset(name=name, digest=digest[:36], source_type="local", source=json.dumps({"uri": source}))
        self.client.log_inputs(self.run_id, [DatasetInput(dataset, [InputTag("mlflow.data.context", context)])])

    @_tolerant
    def log_model(self, name: str, code: Path, artifacts: dict, example, output, step: int, metadata: dict) -> None:
        """An MLflow model ``name`` of this run, logged from ``code`` (MLflow's models-from-code: the file that builds it from
        ``artifacts``, a name -> local file mapping), with the signature of ``example`` -> ``output`` and ``example``
        as its input example, linked to the run at ``step`` (MLflow gives the model the run's metrics at that step):
        the run's Models column and the experiment's Models page. The model carries the run's source, commit and user
        tags (``MODEL_SOURCE_TAGS``). Requirements are pinned to what is installed
        (nothing inferred: MLflow would load the model once more to guess them)."""
        import mlflow  # mlflow: heavy, and only a tracked run needs it
        from mlflow.models import Model, infer_signature

        mlflow.set_experiment(experiment_id=self.experiment_id)  # the logged model's experiment is the run's
        run_tags = self.client.get_run(self.run_id).data.tags
        Model.log(
            artifact_path=None,  # deprecated in MLflow 3 for `name`, still positional in Model.log
            name=name,
            flavor=mlflow.pyfunc,
            run_id=self.run_id,
            step=step,
            python_model=str(code),
            artifacts=artifacts,
            signature=infer_signature(example, output),
            input_example=example,
            pip_requirements=[f"{d}=={version(d)}" for d in MODEL_REQUIREMENTS],
            metadata=metadata,
            tags={k: run_tags[k] for k in MODEL_SOURCE_TAGS if k in run_tags},  # "Logged from": the run's source
        )

    def finish(self, status: str = "FINISHED") -> None:
        if self.monitor is not None:  # its last samples first: it writes to this run
            self.monitor.finish()
            self.monitor = None
        self._terminate(status)

    @_tolerant
    def _terminate(self, status: str) -> None:
        # a run resumed to log a later stage's results (evaluate, sample) ends when it ended: MLflow's Duration is
        # its training's, not training to evaluation (evaluation's latency and throughput are its metrics)
        self.client.set_terminated(self.run_id, status=status, end_time=self.end_time)


def make_tracker(enabled: bool, experiment: str, run_name: str, **kwargs):
    """An MlflowTracker when ``enabled``, else a NullTracker."""
    return MlflowTracker(experiment, run_name, **kwargs) if enabled else NullTracker()
