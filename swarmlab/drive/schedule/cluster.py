"""Joining Ray and naming what one unit of work asks of it: the one way for the sweep's trials and the stages' runs.

- ``resolve_address``: ``--address``, else ``$RAY_ADDRESS``, else the configured address; none means a local Ray.
- ``connect_ray``: a local Ray on 127.0.0.1 with this machine's cores (dashboard off unless asked for), or the
  cluster at the address; workers get this checkout on PYTHONPATH.
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
from swarmlab.tracking import SQLITE, sqlite_path


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


def check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail in seconds, with one line, when nothing listens at ``address`` (``ray.init`` retries for long)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise SwarmlabError(f"Ray address {address!r} is not host:port (e.g. 127.0.0.1:6379, or auto)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise SwarmlabError(
            f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}): start one with "
            f"`ray start --head` (docs/ray.md, docs/sweeps.md: Running on a Ray cluster), or drop "
            f"--address / RAY_ADDRESS to run locally"
        ) from None


def connect_ray(
    address: str | None, *, num_cpus: int | None = None, temp_dir: str | None = None, dashboard: bool = False
) -> bool:
    """Start a local Ray instance or join the cluster at ``address``; True when this call did either.

    A local instance listens on 127.0.0.1 only and has ``num_cpus`` CPUs (default: every core of this machine).
    Workers get the repo root on PYTHONPATH, so they import this checkout whatever their working directory. An
    already initialised Ray (a test's, a notebook's) is reused as it is.
    """
    import ray  # ray: heavy, and only a sweep or a run on Ray needs it

    if ray.is_initialized():
        return False
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    kwargs = dict(
        log_to_driver=False, logging_level=logging.WARNING, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}}
    )
    if address:
        check_reachable(address)
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, TimeoutError, ValueError) as exc:
            raise SwarmlabError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0]}") from None
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(
            num_cpus=num_cpus, _temp_dir=temp_dir, include_dashboard=dashboard, _node_ip_address="127.0.0.1", **kwargs
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
