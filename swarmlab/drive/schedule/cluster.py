"""Joining Ray and naming what one unit of work asks of it: the one way for the sweep's trials and the stages' runs.

- ``resolve_address``: ``--address``, else ``$RAY_ADDRESS``, else the configured address; none means a local Ray.
- ``check_reachable``: a cluster address answers as a Ray GCS within seconds (``auto``: the cluster that `ray start`
  recorded in ``ray_address_file()``, which must exist and answer), or one line saying why not and what to do.
- ``connect_ray``: a new local Ray on 127.0.0.1 with this machine's cores (dashboard off unless asked for; never
  whatever cluster an earlier `ray start` left), or the cluster at the address; workers get this checkout on
  PYTHONPATH.
- ``request``: the CPUs and GPUs one trial or run asks for, checked against the cluster's nodes (a request no
  node can hold would stay PENDING forever, without an error).

Ray is heavy (about 1.7 s to import, about 1.3 GB of processes) and optional (training needs only torch), so it is
imported inside the functions that use it, never at module top.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from swarmlab.paths import REPO_ROOT, tracking_uri
from swarmlab.errors import SwarmlabError
from swarmlab.tracking import SQLITE, connect_timeout_s, sqlite_path


def ray_installed() -> bool:
    """Whether ``import ray`` works here (it is an optional dependency: ``pip install swarmlab[stack]``)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_address(cli_address: str | None, configured: str | None = None) -> str | None:
    """``--address``, else ``$RAY_ADDRESS``, else ``configured`` (a params setting); None means a local Ray."""
    return cli_address or os.environ.get("RAY_ADDRESS") or configured or None


# The opening of an HTTP/2 connection (RFC 9113 §3.4): the client preface and an empty SETTINGS frame. Ray's GCS is a
# gRPC (HTTP/2) server and answers it at once with its own SETTINGS frame; a port that accepts connections and never
# answers (a hung process, a firewall that black-holes, some other service) is caught here in seconds, where ray.init
# would wait about 40 s per try and print Ray's C++ log lines.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
ADDRESS_FILE = "ray_current_cluster"  # written by `ray start` in Ray's temp folder, removed by `ray stop`


def ray_address_file() -> Path:
    """The file in which `ray start` leaves its cluster's address, where ``ray.init(address="auto")`` reads it:
    ``<$RAY_TMPDIR or $TMPDIR or /tmp>/ray/ray_current_cluster`` (Ray's own lookup when Ray has it)."""
    try:
        from ray._common.utils import get_ray_address_file  # ray 2.60; its place has moved between releases

        return Path(get_ray_address_file(None))
    except ImportError:
        base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
        return Path(base) / "ray" / ADDRESS_FILE


def _host_port(address: str) -> tuple[str, int]:
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise SwarmlabError(f"Ray address {address!r} is not host:port (e.g. 127.0.0.1:6379, or auto)")
    return host.strip("[]"), int(port)


def _gcs_answer(host: str, port: int, timeout_s: float) -> str | None:
    """None when a gRPC server answers at host:port within ``timeout_s``, else why not (``connection refused``,
    ``no answer within 5 s``)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(HTTP2_PREFACE)
            reply = sock.recv(9)
    except (TimeoutError, socket.timeout):
        return f"it accepts connections but does not answer within {timeout_s:g} s"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    if not reply:
        return "it accepts connections and closes them: not a Ray GCS"
    tls = os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")
    if not tls and (len(reply) < 4 or reply[3] != 0x04):
        return "it answers, but not as a Ray GCS (gRPC)"  # with TLS the first reply is a TLS record instead
    return None


def check_reachable(address: str, timeout_s: float | None = None) -> str:
    """The address to join (``auto`` resolved to the cluster that `ray start` recorded), or one line, within
    ``timeout_s`` (``connect_timeout_s()``, 5 s by default), saying why no Ray cluster answers there (ray.init would
    retry for long)."""
    timeout_s = connect_timeout_s() if timeout_s is None else timeout_s
    if address == "local":
        return address
    if address == "auto":
        file = ray_address_file()
        recorded = file.read_text().strip() if file.is_file() else ""
        if not recorded:
            raise SwarmlabError(
                f"Ray address auto (--address or RAY_ADDRESS) but no Ray cluster runs on this machine (no {file}): "
                f"start one with `ray start --head`, or drop --address / unset RAY_ADDRESS to run a local Ray"
            )
        host, port = _host_port(recorded)
        why = _gcs_answer(host, port, timeout_s)
        if why:
            raise SwarmlabError(
                f"Ray address auto names the cluster at {recorded} (from {file}), which does not answer ({why}): "
                f"the file is left over from an earlier `ray start`; run `ray stop` or delete {file}, or drop "
                f"--address / unset RAY_ADDRESS to run a local Ray"
            )
        return address  # ray.init(address="auto") reads the same file, and enables token auth as `ray start` did
    host, port = _host_port(address)
    why = _gcs_answer(host, port, timeout_s)
    if why:
        raise SwarmlabError(
            f"cannot reach a Ray cluster at {address} ({why}): start one with `ray start --head` (docs/ray.md, "
            f"docs/sweeps.md: Running on a Ray cluster), or drop --address / RAY_ADDRESS to run locally"
        )
    return address


def connect_ray(
    address: str | None, *, num_cpus: int | None = None, temp_dir: str | None = None, dashboard: bool = False
) -> bool:
    """Start a local Ray instance or join the cluster at ``address``; True when this call did either.

    A local instance (``address`` None) is always a new one (``ray.init(address="local")``): a plain ``ray.init()``
    would join whatever cluster an earlier `ray start` recorded (``ray_address_file()``), a stale one included. It
    listens on 127.0.0.1 only and has ``num_cpus`` CPUs (default: every core of this machine). A cluster is checked
    first (``check_reachable``: one line in seconds). Workers get the repo root on PYTHONPATH, so they import this
    checkout whatever their working directory. An already initialised Ray (a test's, a notebook's) is reused as it is.
    """
    import ray  # ray: heavy, and only a sweep or a run on Ray needs it

    if ray.is_initialized():
        return False
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    kwargs = dict(
        log_to_driver=False, logging_level=logging.WARNING, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}}
    )
    if address and address != "local":
        address = check_reachable(address)
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, TimeoutError, ValueError) as exc:
            raise SwarmlabError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0]}") from None
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(
            address="local",
            num_cpus=num_cpus,
            _temp_dir=temp_dir,
            include_dashboard=dashboard,
            _node_ip_address="127.0.0.1",
            **kwargs,
        )
    return True


def absolute_tracking_uri() -> str:
    """The tracking URI with any local path made absolute: Ray workers run in other working directories."""
    uri = tracking_uri()
    db = sqlite_path(uri)
    if db is not None and not db.is_absolute():
        return f"{SQLITE}{db.resolve()}"
    if "://" not in uri:
        return str(Path(uri).resolve())
    return uri


@dataclass(frozen=True)
class Resources:
    """What one trial or run holds while it runs: Ray CPUs (= its torch threads) and a share of GPUs."""

    cpus: float
    gpus: float = 0.0

    def ray_options(self) -> dict:
        """Keywords of ``ray.remote(...).options``."""
        return {"num_cpus": self.cpus, "num_gpus": self.gpus}

    def tune(self) -> dict:
        """The request of ``tune.with_resources``."""
        return {"cpu": self.cpus, "gpu": self.gpus} if self.gpus else {"cpu": self.cpus}

    def describe(self) -> str:
        return f"{self.cpus:g} CPU" + (f", {self.gpus:g} GPU" if self.gpus else "")


def alive_nodes(nodes: list[dict]) -> list[dict]:
    return [n for n in nodes if n.get("Alive", True)]


def request(nodes: list[dict], cpus: float, gpus: float, *, cpus_key: str, gpus_key: str) -> Resources:
    """The resources one trial or run asks for, checked against the cluster's alive ``nodes`` (``ray.nodes()``).

    It takes ``gpus`` of a GPU when the cluster has GPUs (and ``gpus`` > 0), else CPUs only. A request that no
    single node can hold would stay PENDING forever without an error, so it is refused here, naming the setting
    (``cpus_key``, ``gpus_key``) to change.
    """
    alive = alive_nodes(nodes)
    max_cpus = max((n.get("Resources", {}).get("CPU", 0.0) for n in alive), default=0.0)
    max_gpus = max((n.get("Resources", {}).get("GPU", 0.0) for n in alive), default=0.0)
    if cpus > max_cpus:
        raise SwarmlabError(
            f"{cpus_key}={cpus:g} but the largest Ray node has {max_cpus:g} CPUs: it would wait forever; "
            f"lower {cpus_key} or add a bigger node"
        )
    if max_gpus and gpus:
        if gpus > max_gpus:
            raise SwarmlabError(
                f"{gpus_key}={gpus:g} but the largest Ray node has {max_gpus:g} GPUs: "
                f"lower {gpus_key} (fractions share a GPU)"
            )
        return Resources(cpus, gpus)
    return Resources(cpus, 0.0)


def describe_cluster(nodes: list[dict]) -> str:
    """``2 nodes, 4 CPUs, 0 GPUs``."""
    alive = alive_nodes(nodes)
    cpus = sum(n.get("Resources", {}).get("CPU", 0.0) for n in alive)
    gpus = sum(n.get("Resources", {}).get("GPU", 0.0) for n in alive)
    return f"{len(alive)} node{'s' if len(alive) != 1 else ''}, {cpus:g} CPUs, {gpus:g} GPUs"
