"""The Ray Tune trainable of ``pipelines.sweep``: one trial = one engine ``fit`` with sampled hyperparameters.

Runs inside a Ray worker whose working directory is a Ray session folder, so everything it touches is
an absolute path carried in its ``TrialContext``. After every epoch it reports the validation metrics
and a checkpoint (the engine's ``last.pt``, ``best.pt``, ``history.csv``); a restarted trial continues
from ``tune.get_checkpoint()``. Its MLflow run is nested under the sweep's parent run and is found
again by the trial id when the trial is retried, so a retry continues the same run.
"""
from __future__ import annotations

import csv
import json
import math
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ray.tune import Callback

from pipelines.common.search_space import ResolvedSpace

TRIAL_TAG = "ray_trial_id"
SWEEP_TAG = "sweep_id"


@dataclass
class TrialContext:
    """What every trial of one model's sweep shares. Paths are absolute; nothing depends on the cwd."""

    task: str
    model: str
    data_dir: str
    space: ResolvedSpace
    train: dict  # TrainConfig keyword arguments before the sampled values
    monitor: str  # the task's validation metric, e.g. accuracy
    mode: str  # max or min
    cpus_per_trial: float
    sweep_id: str
    tracking_uri: str | None = None  # None: no tracking
    experiment: str = ""
    parent_run_id: str | None = None
    tags: dict = field(default_factory=dict)


def objective(monitor: str) -> str:
    """The reported metric Tune, ASHA and Optuna rank trials by: the best validation score so far."""
    return f"best_val_{monitor}"


_DATA_CACHE: dict[tuple[str, str], object] = {}  # (data_dir, split) -> dataset, shared by trials of a reused actor


def _load(task, data_dir: str, split: str, seq_len: int | None):
    key = (data_dir, split)
    if key not in _DATA_CACHE:
        if len(_DATA_CACHE) >= 4:  # another sweep's data: do not hold both
            _DATA_CACHE.clear()
        _DATA_CACHE[key] = task.load_split(Path(data_dir), split)
    ds = _DATA_CACHE[key]
    return ds.truncated(seq_len) if seq_len else ds


def _read_history(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]


def best_so_far(history: list[dict], monitor: str, mode: str) -> dict:
    """``best_epoch`` and ``best_val_*`` (every validation metric of the best epoch so far)."""
    scored = [r for r in history if math.isfinite(r.get(f"val_{monitor}", math.nan))]
    if not scored:
        return {}
    pick = max if mode == "max" else min
    best = pick(scored, key=lambda r: r[f"val_{monitor}"])
    out = {"best_epoch": int(best["epoch"])}
    out.update({f"best_{k}": v for k, v in best.items() if k.startswith("val_")})
    return out


def find_trial_run(client, experiment_id: str, sweep_id: str, trial_id: str) -> str | None:
    """The MLflow run of trial ``trial_id`` in sweep ``sweep_id``, if one was started."""
    runs = client.search_runs([experiment_id], filter_string=f"tags.{SWEEP_TAG} = '{sweep_id}' and tags.{TRIAL_TAG} = '{trial_id}'",
                              max_results=1)
    return runs[0].info.run_id if runs else None


def _tracker(ctx: TrialContext, trial_id: str):
    from pipelines.common.tracking import MlflowTracker, NullTracker

    if not ctx.tracking_uri:
        return NullTracker(), False
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=ctx.tracking_uri)
    exp = client.get_experiment_by_name(ctx.experiment)
    existing = find_trial_run(client, exp.experiment_id, ctx.sweep_id, trial_id) if exp else None
    tags = {**ctx.tags, TRIAL_TAG: trial_id, SWEEP_TAG: ctx.sweep_id, "model": ctx.model, "stage": "sweep-trial"}
    tracker = MlflowTracker(ctx.experiment, f"{ctx.model}-{trial_id}", run_id=existing, parent_run_id=ctx.parent_run_id,
                            tags=tags, uri=ctx.tracking_uri)
    return tracker, existing is not None


def run_trial(config: dict, ctx: TrialContext) -> None:
    """Train one sampled configuration, reporting after every epoch (the Tune function trainable)."""
    import ray
    from ray import tune
    from ray.tune import Checkpoint

    from pipelines.common.engine import TrainConfig, fit
    from pipelines.common.seeds import set_seeds
    from pipelines.train import build_model
    from tasks import get_task

    trial_id = tune.get_context().get_trial_id()
    task = get_task(ctx.task)
    values = ctx.space.decode(config)
    train_kw, model_kw = ctx.space.split(values)
    meta = json.loads((Path(ctx.data_dir) / "meta.json").read_text())
    cfg = TrainConfig(**{**ctx.train, **train_kw})
    set_seeds(cfg.seed)  # the initial weights must not depend on what this (reused) worker process did before
    model = build_model(ctx.model, task, meta, {**ctx.space.model_base, **model_kw})
    seq_len = getattr(model.cfg, "seq_len", None)
    train_ds = _load(task, ctx.data_dir, "train", seq_len)
    val_ds = _load(task, ctx.data_dir, "val", seq_len)  # the objective is validation; the test split is never read
    if not cfg.num_threads:  # one torch thread per CPU the trial holds, not one per core of the node
        cfg.num_threads = max(1, int(ctx.cpus_per_trial))

    work = Path(tempfile.mkdtemp(prefix=f"swarmlab-trial-{trial_id}-"))
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:  # a retry after a crash, or a resumed sweep: continue from the last epoch
        checkpoint.to_directory(str(work))
    tracker, continued = _tracker(ctx, trial_id)
    if not continued:
        tracker.log_params({**values, "model": {"name": ctx.model, **asdict(model.cfg)},
                            "data": {"seq_len": meta["seq_len"], "train_rows": len(train_ds), "val_rows": len(val_ds)}})
    tracker.set_tags({"node_id": ray.get_runtime_context().get_node_id()})
    reported = []
    extra = {"mlflow_run_id": tracker.run_id or "", "num_params": model.get_num_params()}

    def report(epoch: int, row: dict, out_dir: Path) -> None:
        best = best_so_far(_read_history(out_dir / "history.csv"), ctx.monitor, ctx.mode)
        metrics = {k: v for k, v in row.items() if isinstance(v, (int, float))}
        tune.report({**metrics, **best, **extra, "epoch": epoch}, checkpoint=Checkpoint.from_directory(str(out_dir)))
        reported.append(epoch)

    try:
        result = fit(model, task, train_ds, val_ds, cfg, work, resume=checkpoint is not None, tracker=tracker,
                     callbacks=(report,), desc=f"[{trial_id}] ")
        if not reported and result.history:  # resumed from a checkpoint taken after its last epoch
            report(result.history[-1]["epoch"], result.history[-1], work)
        tracker.log_metrics({"best_epoch": result.best_epoch, "epochs": len(result.history),
                             "train_time_s": result.train_time_s,
                             **{f"best_val_{k}": v for k, v in result.best_val.items()}})
        tracker.set_tags({"stopped": result.stopped})
        tracker.finish()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _error_line(trial) -> str:
    """The last line of a failed trial's error file (the exception), or a pointer to it."""
    try:
        lines = [ln for ln in Path(trial.error_file).read_text().splitlines() if ln.strip()]
        return lines[-1].strip()[:200] if lines else "unknown error"
    except (OSError, TypeError):
        return "unknown error"


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


class TrialLog(Callback):
    """Driver side: one line per trial event, and closing the MLflow run of a trial that Tune ended.

    A trial that ASHA stops is killed between epochs and cannot close its own run; one that fails for
    good is marked FAILED here. Holds only plain values, so Tune can pickle it into the experiment state.
    """

    def __init__(self, *, label: str, space: ResolvedSpace, monitor: str, max_epochs: int, lines: bool,
                 tracking_uri: str | None, experiment: str, sweep_id: str, max_failures: int, trial_timeout_s: float = 0.0):
        self.label, self.space, self.monitor, self.max_epochs, self.lines = label, space, monitor, max_epochs, lines
        self.trial_timeout_s = trial_timeout_s
        self.tracking_uri, self.experiment, self.sweep_id, self.max_failures = tracking_uri, experiment, sweep_id, max_failures

    def _print(self, trial, text: str) -> None:
        if self.lines:
            print(f"[{self.label}] {trial.trial_id} {text}", flush=True)

    def on_trial_start(self, iteration, trials, trial, **info):
        params = "  ".join(f"{k}={_fmt(v)}" for k, v in self.space.decode(trial.config).items())
        self._print(trial, f"start  {params}")

    def on_trial_result(self, iteration, trials, trial, result, **info):
        obj = objective(self.monitor)
        self._print(trial, f"epoch {result.get('epoch')}/{self.max_epochs}  val_{self.monitor} "
                           f"{result.get(f'val_{self.monitor}', math.nan):.4f}  best {result.get(obj, math.nan):.4f}  "
                           f"val_loss {result.get('val_loss', math.nan):.4f}  {result.get('time_this_iter_s', 0):.1f} s")

    def on_trial_recover(self, iteration, trials, trial, **info):
        self._print(trial, f"failed ({_error_line(trial)}); retry {trial.num_failures}/{self.max_failures} "
                           f"from its last checkpoint")

    def on_trial_complete(self, iteration, trials, trial, **info):
        last = trial.last_result or {}
        self._print(trial, f"done   best val_{self.monitor} {last.get(objective(self.monitor), math.nan):.4f} "
                           f"at epoch {last.get('best_epoch', '?')} of {last.get('epoch', '?')}")
        self._close_run(trial, "FINISHED")

    def on_trial_error(self, iteration, trials, trial, **info):
        self._print(trial, f"error  {_error_line(trial)}  (details: {trial.error_file})")
        self._close_run(trial, "FAILED")

    def _close_run(self, trial, status: str) -> None:
        """Close the trial's run if the trial did not (stopped by the scheduler, or crashed for good)."""
        if not self.tracking_uri:
            return
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.tracking_uri)
        exp = client.get_experiment_by_name(self.experiment)
        run_id = (trial.last_result or {}).get("mlflow_run_id") or (
            find_trial_run(client, exp.experiment_id, self.sweep_id, trial.trial_id) if exp else None)
        if not run_id or client.get_run(run_id).info.status != "RUNNING":
            return
        last = trial.last_result or {}
        finals = {k: v for k, v in last.items() if k.startswith("best_val_") or k == "best_epoch"}
        if "epoch" in last:
            finals["epochs"] = last["epoch"]
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, 0) for k, v in finals.items() if isinstance(v, (int, float))]
        if metrics:
            client.log_batch(run_id, metrics=metrics)
        # ASHA also stops every trial that reaches max_t = max_epochs, before the trial can close its own run
        if status != "FINISHED":
            reason = "error"
        elif last.get("epoch", 0) >= self.max_epochs:
            reason = "max_epochs"
        elif self.trial_timeout_s and last.get("time_total_s", 0) >= self.trial_timeout_s:
            reason = "trial_timeout"
        else:
            reason = "scheduler"
        client.set_tag(run_id, "stopped", reason)
        client.set_terminated(run_id, status=status)
