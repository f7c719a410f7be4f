"""The Ray Tune trainable of ``pipelines.sweep``: one trial = one engine ``fit`` with sampled hyperparameters.

Runs inside a Ray worker whose working directory is a Ray session folder, so everything it touches is
an absolute path carried in its ``TrialContext``. After every evaluation it reports the validation metrics
and a checkpoint (the engine's ``last.pt``, ``best.pt``, ``history.csv``); a restarted trial continues
from ``tune.get_checkpoint()``. Its MLflow run is nested under the sweep's parent run and is found
again by the trial id when the trial is retried, so a retry continues the same run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ray.tune import Callback

from swarmlab.engine import TrainConfig, fit
from swarmlab.log import get_logger
from swarmlab.drive.run_config import build_model
from swarmlab.seeds import set_seeds
from swarmlab.drive.sweep.search_space import ResolvedSpace
from swarmlab.tracking import MlflowTracker, NullTracker, open_client
from tasks import get_task

logger = get_logger(__name__)

TRIAL_TAG = "ray_trial_id"
SWEEP_TAG = "sweep_id"


@dataclass
class TrialContext:
    """What every trial of one model's sweep shares. Paths are absolute; nothing depends on the cwd."""

    task: str  # the registered task
    key: str  # its section in params.yaml (tasks.<key>): names the runs and folders
    options: dict  # the task's options (tasks.<task>.options, data paths made absolute)
    root: str  # the work folder relative data paths resolve against
    model: str
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


_DATA_CACHE: dict[tuple, object] = {}  # (task, options, split, seq_len) -> data, shared by the trials of a reused actor


def load_split(task, split: str, model_cfg):
    """The task's ``split`` for ``model_cfg``, kept for the next trial of this worker when it needs the same."""
    key = (
        task.key,
        json.dumps(dataclasses.asdict(task.options), sort_keys=True),
        split,
        getattr(model_cfg, "seq_len", None),
    )
    if key not in _DATA_CACHE:
        if len(_DATA_CACHE) >= 4:  # other settings' data: do not hold both
            _DATA_CACHE.clear()
        _DATA_CACHE[key] = task.train_data(model_cfg) if split == "train" else task.eval_data(split, model_cfg)
    return _DATA_CACHE[key]


def best_metrics(best: dict) -> dict:
    """``best_evaluation``, ``best_step``, ``best_epoch`` and ``best_val_*`` of the engine's best evaluation."""
    if not best:
        return {}
    out = {"best_evaluation": best["evaluation"], "best_step": best["step"], "best_epoch": best["epoch"]}
    out.update({f"best_val_{k}": v for k, v in best["metrics"].items()})
    return out


def find_trial_run(client, experiment_id: str, sweep_id: str, trial_id: str) -> str | None:
    """The MLflow run of trial ``trial_id`` in sweep ``sweep_id``, if one was started."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.{SWEEP_TAG} = '{sweep_id}' and tags.{TRIAL_TAG} = '{trial_id}'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def _tracker(ctx: TrialContext, trial_id: str):
    if not ctx.tracking_uri:
        return NullTracker(), False
    client = open_client(ctx.tracking_uri)
    exp = client.get_experiment_by_name(ctx.experiment)
    existing = find_trial_run(client, exp.experiment_id, ctx.sweep_id, trial_id) if exp else None
    tags = {**ctx.tags, TRIAL_TAG: trial_id, SWEEP_TAG: ctx.sweep_id, "model": ctx.model, "stage": "sweep-trial"}
    tracker = MlflowTracker(
        ctx.experiment,
        f"{ctx.model}-{trial_id}",
        run_id=existing,
        parent_run_id=ctx.parent_run_id,
        tags=tags,
        uri=ctx.tracking_uri,
    )
    return tracker, existing is not None


def run_trial(config: dict, ctx: TrialContext) -> None:
    """Train one sampled configuration, reporting after every evaluation (the Tune function trainable)."""
    import ray  # ray: heavy, and only a sweep or a run on Ray needs it
    from ray import tune
    from ray.tune import Checkpoint

    trial_id = tune.get_context().get_trial_id()
    task = get_task(ctx.task, ctx.options, root=ctx.root, key=ctx.key)
    values = ctx.space.decode(config)
    train_kw, model_kw = ctx.space.split(values)
    cfg = TrainConfig(**{**ctx.train, **train_kw})
    set_seeds(cfg.seed)  # the initial weights must not depend on what this (reused) worker process did before
    model = build_model(ctx.model, task, {**ctx.space.model_base, **model_kw})
    train_ds = load_split(task, "train", model.cfg)
    val_ds = load_split(task, "val", model.cfg)  # the objective is validation; the test split is never read
    if not cfg.num_threads:  # one torch thread per CPU the trial holds, not one per core of the node
        cfg.num_threads = max(1, int(ctx.cpus_per_trial))

    work = Path(tempfile.mkdtemp(prefix=f"swarmlab-trial-{trial_id}-"))
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:  # a retry after a crash, or a resumed sweep: continue from the last evaluation
        checkpoint.to_directory(str(work))
    tracker, continued = _tracker(ctx, trial_id)
    if not continued:
        tracker.log_params(
            {
                **values,
                "model": {"name": ctx.model, **dataclasses.asdict(model.cfg)},
                "data": task.describe_data(train_ds, val_ds),
            }
        )
    tracker.set_tags({"node_id": ray.get_runtime_context().get_node_id()})
    reported = []
    extra = {"mlflow_run_id": tracker.run_id or "", "num_params": model.get_num_params()}

    def report(state) -> None:
        metrics = {k: v for k, v in state.row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        tune.report(
            {**metrics, **best_metrics(state.best), **extra}, checkpoint=Checkpoint.from_directory(str(state.out_dir))
        )
        reported.append(state.evaluation)

    try:
        result = fit(
            model,
            task,
            train_ds,
            val_ds,
            cfg,
            work,
            resume=checkpoint is not None,
            tracker=tracker,
            callbacks=(report,),
            desc=f"[{trial_id}] ",
        )
        if not reported and result.history:  # resumed from a checkpoint taken after its last evaluation
            last = result.history[-1]
            metrics = {k: v for k, v in last.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            tune.report(
                {**metrics, **best_metrics(result.best), **extra}, checkpoint=Checkpoint.from_directory(str(work))
            )
        # how far a trial got (the scheduler cuts some) and its best validation results are metrics, sortable in the
        # runs table; the step of its best and its backtracks are tags, as a training run's
        tracker.log_metrics(
            {
                "evaluations": len(result.history),
                "steps": result.steps,
                "train_time_s": result.train_time_s,
                **{f"best_val_{k}": v for k, v in result.best_val.items()},
            }
        )
        tracker.set_tags({"stopped": result.stopped, "best_step": result.best_step, "backtracks": result.backtracks})
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

    A trial that ASHA stops is killed between evaluations and cannot close its own run; one that fails for
    good is marked FAILED here. Holds only plain values, so Tune can pickle it into the experiment state.
    """

    def __init__(
        self,
        *,
        label: str,
        space: ResolvedSpace,
        monitor: str,
        max_evaluations: int,
        lines: bool,
        tracking_uri: str | None,
        experiment: str,
        sweep_id: str,
        max_failures: int,
        trial_timeout_s: float = 0.0,
    ):
        self.label, self.space, self.monitor, self.max_evaluations, self.lines = (
            label,
            space,
            monitor,
            max_evaluations,
            lines,
        )
        self.trial_timeout_s = trial_timeout_s
        self.tracking_uri, self.experiment, self.sweep_id, self.max_failures = (
            tracking_uri,
            experiment,
            sweep_id,
            max_failures,
        )

    def _print(self, trial, text: str) -> None:
        if self.lines:
            logger.info(f"[{self.label}] {trial.trial_id} {text}")

    def on_trial_start(self, iteration, trials, trial, **info):
        params = "  ".join(f"{k}={_fmt(v)}" for k, v in self.space.decode(trial.config).items())
        self._print(trial, f"start  {params}")

    def on_trial_result(self, iteration, trials, trial, result, **info):
        obj = objective(self.monitor)
        self._print(
            trial,
            f"eval {result.get('evaluation')}/{self.max_evaluations}  step {result.get('step')}  val_{self.monitor} "
            f"{result.get(f'val_{self.monitor}', math.nan):.4f}  best {result.get(obj, math.nan):.4f}  "
            f"val_loss {result.get('val_loss', math.nan):.4f}  {result.get('time_this_iter_s', 0):.1f} s",
        )

    def on_trial_recover(self, iteration, trials, trial, **info):
        self._print(
            trial,
            f"failed ({_error_line(trial)}); retry {trial.num_failures}/{self.max_failures} from its last checkpoint",
        )

    def on_trial_complete(self, iteration, trials, trial, **info):
        last = trial.last_result or {}
        self._print(
            trial,
            f"done   best val_{self.monitor} {last.get(objective(self.monitor), math.nan):.4f} "
            f"at evaluation {last.get('best_evaluation', '?')} of {last.get('evaluation', '?')}",
        )
        self._close_run(trial, "FINISHED")

    def on_trial_error(self, iteration, trials, trial, **info):
        self._print(trial, f"error  {_error_line(trial)}  (details: {trial.error_file})")
        self._close_run(trial, "FAILED")

    def _close_run(self, trial, status: str) -> None:
        """Close the trial's run if the trial did not (stopped by the scheduler, or crashed for good)."""
        if not self.tracking_uri:
            return
        client = open_client(self.tracking_uri)
        exp = client.get_experiment_by_name(self.experiment)
        run_id = (trial.last_result or {}).get("mlflow_run_id") or (
            find_trial_run(client, exp.experiment_id, self.sweep_id, trial.trial_id) if exp else None
        )
        if not run_id or client.get_run(run_id).info.status != "RUNNING":
            return
        last = trial.last_result or {}
        finals = {k: v for k, v in last.items() if k.startswith("best_val_") or k == "best_step"}
        if "evaluation" in last:
            finals["evaluations"] = last["evaluation"]
        if "step" in last:
            finals["steps"] = last["step"]
        from mlflow.entities import Metric  # mlflow: heavy, and only a tracked run needs it

        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, 0) for k, v in finals.items() if isinstance(v, (int, float))]
        if metrics:
            client.log_batch(run_id, metrics=metrics)
        # ASHA also stops every trial that reaches max_t = its planned evaluations, before the trial can close its run
        if status != "FINISHED":
            reason = "error"
        elif last.get("evaluation", 0) >= self.max_evaluations:
            reason = "max_evaluations"
        elif self.trial_timeout_s and last.get("time_total_s", 0) >= self.trial_timeout_s:
            reason = "trial_timeout"
        else:
            reason = "scheduler"
        client.set_tag(run_id, "stopped", reason)
        client.set_terminated(run_id, status=status)
