"""One scheduler for a stage's runs (model x seed): in this process one after another, or fanned out over Ray.

``train@<task>`` and ``evaluate@<task>`` hand their runs to ``Scheduler.execute``. Where they go is set by the
top-level ``schedule:`` section of params.yaml, ``--parallel`` / ``--address`` and ``$RAY_ADDRESS``:

- ``parallel: 1``, or Ray not installed: every run in this process, in order, as the plain loop did.
- otherwise each run is a Ray task asking for its CPUs (= its torch threads) and GPUs: on a local Ray (127.0.0.1,
  this machine's cores) when no address is set, else on the cluster at the address. At most ``parallel`` runs are
  submitted at once (0 = as many as the cluster's resources hold). A run whose worker dies (killed, out of memory,
  node lost) is retried ``max_retries`` times, continuing from its last checkpoint.

Why ``schedule:`` is not a DVC param: it says where and how many runs go at once, not what they compute, so no
stage declares it in dvc.yaml and changing it never makes a stage stale (docs/ray.md). It lives at the top level of
params.yaml, outside ``defaults`` and ``profiles`` (which every stage declares), with its own per-profile entries.
What it does change is recorded: each run's metrics entry names its ``resources``; a run's torch threads are
part of its fingerprint (swarmlab/drive/records.py), and a task whose models compare at equal net time
(``time_budget_s``) is refused when its runs would get unequal resources.

Progress: one line when a run starts and one when it ends, each with the counts of done, running and waiting runs.
Workers write their output (the engine's evaluation lines) to a log file per run, never interleaved on the
console, with progress bars off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from swarmlab.errors import SwarmlabError
from swarmlab.log import get_logger
from swarmlab.drive.run_config import for_model, split_per_model
from swarmlab.drive.schedule.cluster import (
    Resources,
    absolute_tracking_uri,
    alive_nodes,
    check_reachable,
    connect_ray,
    describe_cluster,
    ray_installed,
    request,
    resolve_address,
)
from swarmlab.drive.sections import source_of
from swarmlab.settings import SettingsError, parse, setting
from swarmlab.tracking import CONTEXT_ENV, MlflowTracker, open_client

logger = get_logger(__name__)

if TYPE_CHECKING:  # the specs' module imports this one (ScheduleConfig); the scheduler only reads their fields
    from swarmlab.drive.spec import RunSpec, StageSpec


@dataclass
class ScheduleConfig:
    """``schedule:`` (top level of params.yaml, not a DVC param: it never changes what a run computes)."""

    parallel: int = setting(1, ge=0)  # runs at once; 1 = one after another in this process (no Ray); 0 = as many as fit
    cpus_per_run: float = setting(
        1.0, gt=0
    )  # Ray CPUs per run, and its torch threads unless train.num_threads pins them
    gpus_per_run: float = setting(
        0.0, ge=0
    )  # 0, a fraction (runs share a GPU) or whole GPUs; only where there are GPUs
    address: str = ""  # "" = a local Ray on 127.0.0.1 with this machine's cores; --address and $RAY_ADDRESS win
    max_retries: int = setting(2, ge=0)  # a run whose worker died is retried this often, from its last checkpoint
    dashboard: bool = False  # a local Ray's dashboard (needs ray[default])
    tasks: dict = setting({})  # per task: {cpus_per_run: 2, <model or glob>: {gpus_per_run: 1}}
    profiles: dict = setting({})  # per profile: any of the above, on top

    def __post_init__(self):
        if isinstance(self.cpus_per_run, int):
            self.cpus_per_run = float(self.cpus_per_run)


def schedule_settings(params: dict, *, parallel: int | None = None, address: str | None = None) -> ScheduleConfig:
    """The checked ``schedule`` section with the active profile's entry on top, then ``--parallel``/``--address``."""
    raw = dict(params.get("schedule") or {})
    where = "schedule"
    try:
        base = parse(ScheduleConfig, raw, where)
        profile = base.profiles.get(params.get("profile")) or {}
        if profile:
            if "profiles" in profile:
                raise SettingsError(f"schedule.profiles.{params.get('profile')}.profiles: profiles do not nest")
            tasks = {
                **base.tasks,
                **{
                    k: {**(base.tasks.get(k) or {}), **v} if isinstance(v, dict) else v
                    for k, v in (profile.get("tasks") or {}).items()
                },
            }
            base = parse(
                ScheduleConfig, {**raw, **profile, "tasks": tasks}, f"schedule (profile {params.get('profile')!r})"
            )
        for key, value in base.tasks.items():
            if not isinstance(value, dict):
                raise SettingsError(f"schedule.tasks.{key} must be a mapping, got {value!r}")
            shared, per_model = split_per_model(value, f"schedule.tasks.{key}")
            for part, entries in [(f"schedule.tasks.{key}", shared)] + [
                (f"schedule.tasks.{key}.{m}", v) for m, v in per_model.items()
            ]:
                parse(_RunResources, entries, part, partial=True)
    except SwarmlabError as exc:
        raise SwarmlabError(f"{exc} ({source_of(params)})") from None
    if parallel is not None:
        if parallel < 0:
            raise SwarmlabError(f"--parallel must be >= 0 (0 = as many runs as Ray's resources hold), got {parallel}")
        base.parallel = parallel
    base.address = resolve_address(address, base.address) or ""
    return base


@dataclass
class _RunResources:
    """What ``schedule.tasks.<task>`` and its per-model mappings may set."""

    cpus_per_run: float = setting(1.0, gt=0)
    gpus_per_run: float = setting(0.0, ge=0)


def run_resources(cfg: ScheduleConfig, task_key: str, model: str) -> tuple[float, float]:
    """(CPUs, GPUs) one run of ``model`` asks for: ``schedule``, then ``schedule.tasks.<task>``, then its model's mapping."""
    shared, per_model = split_per_model(dict(cfg.tasks.get(task_key) or {}), f"schedule.tasks.{task_key}")
    values = {
        "cpus_per_run": cfg.cpus_per_run,
        "gpus_per_run": cfg.gpus_per_run,
        **for_model(shared, per_model, model),
    }
    return float(values["cpus_per_run"]), float(values["gpus_per_run"])


@dataclass
class Slot:
    """What one run gets: Ray resources (unused in-process) and torch threads."""

    resources: Resources
    threads: int

    def record(self, scheduler: str, parallel: int) -> dict:
        """The run's ``resources`` entry in the stage's metrics."""
        out = {"scheduler": scheduler, "parallel": parallel, "threads": self.threads}
        if scheduler == "ray":
            out.update(cpus=self.resources.cpus, gpus=self.resources.gpus)
        return out


@dataclass
class Job:
    """One run handed to the scheduler: the stage's per-run function is called as ``fn(task, run, **kwargs)``, ``run``
    being the run's ``swarmlab.drive.spec.RunSpec``."""

    run: RunSpec
    kwargs: dict
    log: Path | None = None  # where a Ray worker writes the run's output (None: Ray's own log)
    keep_log: Path | None = None  # the log is moved here when the run succeeds (e.g. into the run's folder)
    note: str = ""  # shown on the run's start line (e.g. "continues after evaluation 2")
    history: Path | None = None  # the run's history.csv while it trains: a retried run reports where it went on from


class Scheduler:
    """Where a stage's runs go. Use as a context manager: Ray is joined by the first ``execute`` that has runs for it
    (a rerun whose runs are all finished never starts it) and left on exit.

    Settings and unequal resources in an equal-net-time comparison are refused in ``__init__``, before the stage
    touches an output; a request no node of the cluster can hold, when Ray is joined, before any run starts.
    """

    def __init__(self, spec: StageSpec, task, *, echo=print):
        """``spec``: the stage's resolved spec (swarmlab.drive.spec: its runs and its ``schedule`` settings); ``task``: its
        task, built."""
        runs = list(spec.runs)
        self.stage, self.spec, self.task, self.runs = spec.stage, spec, task, runs
        self.cfg = spec.schedule
        self.echo = echo
        # Ray pays off for 2 runs or more, or for one run that should go to a cluster (its GPUs, say)
        self.ray = self.cfg.parallel != 1 and (len(runs) > 1 or bool(self.cfg.address))
        self.note = ""
        if self.ray and not ray_installed():
            self.ray, self.note = (
                False,
                "Ray is not installed (pip install swarmlab[stack]): one run after another here",
            )
        if self.ray and self.cfg.address:
            check_reachable(
                self.cfg.address
            )  # in seconds, before the stage touches anything (ray.init retries for long)
        default_threads = torch.get_num_threads()
        self.slots: dict[str, Slot] = {}
        budgets = {}
        for run in runs:
            cfg = run.train
            cpus, gpus = run_resources(self.cfg, task.key, run.model)
            threads = cfg.num_threads or (max(1, int(cpus)) if self.ray else default_threads)
            self.slots[run.name] = Slot(Resources(cpus, gpus), threads)
            budgets[run.name] = cfg.time_budget_s
        self._check_equal_budgets(budgets)
        self.scheduler = "ray" if self.ray else "in-process"
        self.parallel = self.cfg.parallel if self.ray else 1
        self._started = False
        self.where = "this process"
        self.capacity = (0.0, 0.0)  # the Ray cluster's CPUs and GPUs, once joined

    def _check_equal_budgets(self, budgets: dict[str, float]) -> None:
        """Runs compared at equal net time must hold equal resources: 2 runs at 1 thread each sharing 2 cores are not
        comparable with 1 run at 2 threads."""
        if not any(budgets.values()):
            return
        seen = {}
        for name, slot in self.slots.items():
            key = (slot.threads,) + ((slot.resources.cpus, slot.resources.gpus) if self.ray else ())
            seen.setdefault(key, name)
        if len(seen) > 1:
            shown = "; ".join(f"{name}: {self._describe(self.slots[name])}" for name in seen.values())
            raise SwarmlabError(
                f"tasks.{self.task.key} compares its runs at equal net training time (time_budget_s) but "
                f"they would get unequal resources ({shown}): give every run of the task the same "
                f"(schedule.tasks.{self.task.key}, train.num_threads)"
            )

    def _describe(self, slot: Slot) -> str:
        threads = f"{slot.threads} thread{'s' if slot.threads != 1 else ''}"
        return f"{slot.resources.describe()}, {threads}" if self.ray else threads

    def record(self, run: RunSpec) -> dict:
        return self.slots[run.name].record(self.scheduler, self.parallel)

    # -------------------------------------------------------------------------------------------- joining

    def __enter__(self) -> "Scheduler":
        return self

    def _join(self) -> None:
        """Join (or start) Ray and check every run's request against its nodes."""
        import ray  # ray: heavy, and only a sweep or a run on Ray needs it

        self._started = connect_ray(self.cfg.address or None, dashboard=self.cfg.dashboard)
        try:
            nodes = ray.nodes()
            alive = alive_nodes(nodes)
            self.capacity = tuple(sum(n.get("Resources", {}).get(k, 0.0) for n in alive) for k in ("CPU", "GPU"))
            for run in self.runs:
                slot = self.slots[run.name]
                try:
                    slot.resources = request(
                        nodes,
                        slot.resources.cpus,
                        slot.resources.gpus,
                        cpus_key="schedule.cpus_per_run",
                        gpus_key="schedule.gpus_per_run",
                    )
                except SwarmlabError as exc:
                    raise SwarmlabError(
                        f"run {run.name} of {self.task.key}: {exc} (per task and model: schedule.tasks.{self.task.key})"
                    ) from None
            self._check_equal_budgets({r.name: r.train.time_budget_s for r in self.runs})
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.where = (
            f"the Ray cluster at {self.cfg.address}" if self.cfg.address else "a local Ray"
        ) + f" ({describe_cluster(nodes)})"

    def __exit__(self, *exc) -> None:
        if self._started:
            import ray  # ray: heavy, and only a sweep or a run on Ray needs it

            ray.shutdown()
            self._started = False

    # ------------------------------------------------------------------------------------------ executing

    def describe(self, n: int) -> str:
        """The first line of the stage: how its runs go."""
        if not self.ray:
            kinds = sorted({self._describe(self.slots[r.name]) for r in self.runs})
            return f"{n} run(s) one after another in this process, {' / '.join(kinds)} each" + (
                f" ({self.note})" if self.note else ""
            )
        at_once = "as many at once as fit" if self.parallel == 0 else f"{self.parallel} at a time"
        kinds = sorted({self._describe(self.slots[r.name]) for r in self.runs})
        return f"{n} run(s), {at_once}, on {self.where}; each run: {' / '.join(kinds)}"

    def execute(
        self, fn: str, jobs: list[Job], *, tracking: bool, on_done=None, label: str = "", fresh_workers: bool = False
    ) -> dict[str, object]:
        """Run ``fn`` (``"module:function"``) for every job; returns {run name: what it returned}, in job order.

        ``fresh_workers``: on Ray, each run in a new worker process (a measured peak memory is then the run's own).
        A job's ``resources`` keyword, when it has one, is set to what the run gets (``record``).

        ``on_done(job, result)`` is called in this process as each run finishes (the stage records it). The first
        failure stops new submissions; runs already going are let finish (their folders keep their work), then the
        failure is raised.
        """
        label = label or f"{self.stage} {self.task.key}"
        if not jobs:
            self.echo(f"{label}: no run to do", flush=True)
            return {}
        if self.ray:
            self._join()
        for job in jobs:  # what the run actually got (a GPU request is dropped on a cluster without GPUs)
            if "resources" in job.kwargs:
                job.kwargs["resources"] = self.record(job.run)
        self.echo(f"{label}: {self.describe(len(jobs))}", flush=True)
        if self.ray:
            results = self._execute_ray(
                fn, jobs, tracking=tracking, on_done=on_done, label=label, fresh_workers=fresh_workers
            )
        else:
            results = self._execute_here(fn, jobs, on_done=on_done, label=label)
        return {job.run.name: results[job.run.name] for job in jobs}

    def _line(self, label: str, verb: str, run: RunSpec, text: str, counts: tuple[int, int, int]) -> None:
        done, running, waiting = counts
        self.echo(
            f"[{label}] {verb:<5} {run.name}{'  ' + text if text else ''}  "
            f"({done} done, {running} running, {waiting} waiting)",
            flush=True,
        )

    def _execute_here(self, fn: str, jobs: list[Job], *, on_done, label: str) -> dict:
        func = _import(fn)
        results = {}
        threads_before = torch.get_num_threads()
        try:
            self._run_here(func, jobs, results, on_done=on_done, label=label)
        finally:
            torch.set_num_threads(threads_before)  # the stage leaves this process's threads as it found them
        return results

    def _run_here(self, func, jobs: list[Job], results: dict, *, on_done, label: str) -> None:
        for i, job in enumerate(jobs):
            slot = self.slots[job.run.name]
            self._line(label, "start", job.run, job.note, (i, 1, len(jobs) - i - 1))
            torch.set_num_threads(slot.threads)  # as a worker does: one run's setting never leaks into the next
            t0 = time.perf_counter()
            results[job.run.name] = func(self.task, job.run, **job.kwargs)
            if on_done:
                on_done(job, results[job.run.name])
            self._line(label, "done", job.run, f"in {time.perf_counter() - t0:.1f} s", (i + 1, 0, len(jobs) - i - 1))

    def _execute_ray(
        self, fn: str, jobs: list[Job], *, tracking: bool, on_done, label: str, fresh_workers: bool
    ) -> dict:
        import ray  # ray: heavy, and only a sweep or a run on Ray needs it

        env = {"SWARMLAB_PROGRESS": "0"}  # no progress bars from workers
        if tracking:
            env["MLFLOW_TRACKING_URI"] = absolute_tracking_uri()  # the same store as this process, whatever the cwd
            _create_experiment(env["MLFLOW_TRACKING_URI"], self.task.key)
            env[CONTEXT_ENV] = json.dumps(dict(self.spec.context))  # DVC's experiment and overrides, as here
        task = dataclasses.replace(
            self.spec.task, options=dataclasses.asdict(self.task.options), root=str(Path(self.task.root).resolve())
        )
        remote = ray.remote(max_calls=1)(_worker) if fresh_workers else ray.remote(_worker)
        queue, pending, results, failure = list(jobs), {}, {}, None
        done = 0
        while queue or pending:
            while (
                queue
                and failure is None
                and (self.parallel == 0 or len(pending) < self.parallel)
                and _room_for(self, pending, queue[0])
            ):
                job = queue.pop(0)
                slot = self.slots[job.run.name]
                spec = {
                    "fn": fn,
                    "task": task,
                    "run": job.run,
                    "kwargs": job.kwargs,
                    "env": env,
                    "threads": slot.threads,
                    "log": str(job.log) if job.log else None,
                    "keep_log": str(job.keep_log) if job.keep_log else None,
                    "history": str(job.history) if job.history else None,
                    "label": f"{label}/{job.run.name}",
                }
                ref = remote.options(
                    **slot.resources.ray_options(),
                    max_retries=self.cfg.max_retries,
                    retry_exceptions=False,
                    name=f"{self.stage}:{self.task.key}/{job.run.name}",
                ).remote(spec)
                pending[ref] = (job, time.perf_counter())
                self._line(label, "start", job.run, job.note, (done, len(pending), len(queue)))
            if not pending:
                break
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                job, t0 = pending.pop(ref)
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:  # the run's own exception, with the worker's traceback
                    failure = failure or RuntimeError(f"run {job.run.name} of {label} failed on Ray:\n{exc}")
                    self._line(
                        label,
                        "FAIL",
                        job.run,
                        str(exc).strip().splitlines()[-1][:200],
                        (done, len(pending), len(queue)),
                    )
                    continue
                except ray.exceptions.RayError as exc:  # its worker died more often than max_retries
                    failure = failure or SwarmlabError(
                        f"run {job.run.name} of {label}: its worker died {self.cfg.max_retries + 1} time(s) "
                        f"({type(exc).__name__}: out of memory, killed, or its node lost?); its checkpoint is kept: rerun "
                        f"the stage to continue it"
                    )
                    self._line(label, "FAIL", job.run, type(exc).__name__, (done, len(pending), len(queue)))
                    continue
                if "error" in out:  # a SwarmlabError in the worker: one line, as in this process
                    failure = failure or SwarmlabError(out["error"])
                    self._line(label, "FAIL", job.run, out["error"][:200], (done, len(pending), len(queue)))
                    continue
                results[job.run.name] = out["result"]
                if on_done:
                    on_done(job, out["result"])
                done += 1
                retried = f"; {out['resumed']}" if out.get("resumed") else ""
                self._line(
                    label,
                    "done",
                    job.run,
                    f"in {time.perf_counter() - t0:.1f} s on {out['host']}{retried}",
                    (done, len(pending), len(queue)),
                )
        if failure is not None:
            raise failure
        return results


def _room_for(scheduler: Scheduler, pending: dict, job: Job) -> bool:
    """Whether the cluster's CPUs and GPUs in all hold ``job`` beside the runs already submitted (``pending``: ref ->
    (job, start)). A run is handed to Ray only then, so that "running" in the progress lines means running, not
    queued inside Ray (two 2-CPU runs on a 2-CPU node: one runs, one waits). The first run is always submitted."""
    if not pending:
        return True
    cpus, gpus = scheduler.capacity
    used = [scheduler.slots[j.run.name].resources for j, _ in pending.values()]
    want = scheduler.slots[job.run.name].resources
    return sum(r.cpus for r in used) + want.cpus <= cpus + 1e-9 and sum(r.gpus for r in used) + want.gpus <= gpus + 1e-9


def _import(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _create_experiment(uri: str, name: str) -> None:
    """Create the task's MLflow experiment here, before any worker does (its artifact location must not depend on
    where a worker runs)."""
    client = open_client(uri)
    if client.get_experiment_by_name(name) is None:
        MlflowTracker.create_experiment(client, uri, name)


@contextlib.contextmanager
def _output_to(log: str | None):
    """The run's prints (and warnings) go to ``log`` when given; appended, so a retry's output follows the first's."""
    if not log:
        yield
        return
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", buffering=1) as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        yield


def _worker(spec: dict) -> dict:
    """One run inside a Ray worker: the stage's per-run function with the run's threads, its output to its log."""
    import ray  # ray: heavy, and only a run on Ray gets here

    os.environ.update(spec["env"])
    torch.set_num_threads(spec["threads"])
    run: RunSpec = spec["run"]
    host = socket.gethostname()
    node = ray.get_runtime_context().get_node_id()[:8]
    with _output_to(spec["log"]):
        logger.info(
            f"{spec['label']}: pid {os.getpid()} on {host} (node {node}), {spec['threads']} torch thread(s), "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}"
        )
        resumed = _checkpoint_note(spec["history"])
        try:
            task = spec["task"].build()
            result = _import(spec["fn"])(task, run, **spec["kwargs"])
        except SwarmlabError as exc:
            logger.error(f"error: {exc}")
            return {"error": str(exc), "host": host}
        except BaseException:
            traceback.print_exc(file=sys.stdout)
            raise
    if spec["log"] and spec["keep_log"] and Path(spec["keep_log"]).parent.is_dir():
        os.replace(spec["log"], spec["keep_log"])
    return {"result": result, "host": f"{host} (node {node})", "resumed": resumed}


def _checkpoint_note(history: str | None) -> str:
    """``continued after evaluation N`` when the run goes on from a checkpoint (an interrupted attempt's)."""
    if not history or not Path(history).is_file():
        return ""
    rows = max(0, len(Path(history).read_text().splitlines()) - 1)
    return f"continued after evaluation {rows}" if rows else ""
