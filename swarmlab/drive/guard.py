"""What stands between bad input and a good run: the train stage's dry run before the first run, the verdict on a
finished run before it may replace the previous one.

* ``dry_run``: every requested model is built and runs one forward and backward batch of two rows of the training
  data, and one validation batch through the task's metrics, on the chosen device, before the first real run
  starts; the engine's plan (``check_plan``) is checked per model too. A shape, dtype or config error in model 7
  then costs nothing to models 1-6, and no output folder has been made yet. Returns each model's loss at
  initialisation, the yardstick of ``check_outcome``.
* ``check_outcome``: a run ending with no finite validation result, or with a best validation loss far above the
  untrained model's (``DIVERGED_FACTOR``), diverged: it is refused (one line, exit 2) and never replaces the
  previous run. Under ``plateau: backtrack`` the engine backtracks first; this says so when backtracking ran out.

The seal that lets evaluate / sample refuse a checkpoint that is not its run's (``seal_run`` / ``check_run``) lives
with the rest of a run's records, in ``swarmlab.drive.records``.
"""

from __future__ import annotations

import math

import torch

from swarmlab.drive.run_config import build_model
from swarmlab.seeds import set_seeds
from swarmlab.engine import (
    PlanError,
    autocast,
    check_plan,
    epoch_plan,
    resolve_amp,
    resolve_device,
    to_device,
)
from swarmlab.errors import SwarmlabError
from swarmlab.batches import check_batch_fits, is_endless

DRY_ROWS = 2  # rows of the dry run's batches: enough for any batch-size logic, cheap at any length
# A run whose best validation loss exceeds the untrained model's by this many times max(|initial loss|, 1) diverged:
# MNIST starts at ~5.5 nats (threshold ~60); the runs that replaced good ones ended near 1e5 (lr 1e4) and 5e7.
DIVERGED_FACTOR = 10.0
ERRORS = (
    RuntimeError,
    ValueError,
    TypeError,
    IndexError,
    KeyError,
    AssertionError,
    AttributeError,
    NotImplementedError,
)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


def _tiny_batch(data, cfg, train: bool) -> dict:
    if is_endless(data):
        return data.batch(0, DRY_ROWS, cfg.seed)
    first = epoch_plan(data, cfg, 1)[0] if train else torch.arange(len(data))
    return data.get_batch(first[:DRY_ROWS])


def dry_run(task, runs) -> tuple[dict, dict[str, float]]:
    """Build every model of ``runs`` (resolved specs, swarmlab.drive.spec; a model's first run stands for all its seeds)
    and run one tiny forward + backward (training data) and one tiny validation batch through the task's loss and
    metrics, on the chosen device; returns ({model: its config, what the data fixed included}, {model: loss at
    initialisation}). This is the one build of each model in the stage's own process.

    Every refusal is one line naming the model and the section to change; nothing is written."""
    model_cfgs, baselines = {}, {}
    where = f"tasks.{task.key}"
    for run in runs:
        name = run.model
        if name in model_cfgs:
            continue
        cfg = run.train
        device = resolve_device(cfg.device)
        set_seeds(cfg.seed)
        model = build_model(name, task, dict(run.overrides))
        train_ds = task.train_data(model.cfg)
        val_ds = task.eval_data("val", model.cfg)
        check_batch_fits(cfg.batch_size, train_ds, task.item_name, task.key)
        if len(val_ds) == 0:
            raise SwarmlabError(f"the validation split of {task.key} is empty: rebuild the data: {task.rebuild_hint}")
        try:
            check_plan(cfg, train_ds)
        except PlanError as exc:
            raise SwarmlabError(f"{exc} (model {name}: train / {where}.train)") from None
        amp = resolve_amp(cfg.amp, device)
        try:
            model.to(device).train()
            batch = to_device(_tiny_batch(train_ds, cfg, True), device)
            with autocast(device, amp):
                loss = task.loss(task.forward(model, batch), batch)
            loss.backward()
            model.eval()
            with torch.no_grad():
                batch = to_device(_tiny_batch(val_ds, cfg, False), device)
                with autocast(device, amp):
                    out = task.forward(model, batch)
                    meter = task.new_metrics()
                    meter.update(out, batch, task.loss(out, batch))
                meter.compute()
        except SwarmlabError as exc:
            raise SwarmlabError(f"dry run of model {name!r} (nothing trained yet): {exc}") from None
        except ERRORS as exc:
            raise SwarmlabError(
                f"dry run of model {name!r} failed on one batch before any run started ({_first_line(exc)}): "
                f"fix {where}.model_overrides or {where}.train for it"
            ) from None
        baselines[name] = float(loss.detach())
        model_cfgs[name] = model.cfg
        del model
    return model_cfgs, baselines


def check_outcome(result, task, cfg, run_name: str, baseline: float | None = None) -> None:
    """Refuse a finished run that diverged (see the module docstring); the caller then keeps the previous run."""
    best = result.best_val
    score = best.get(task.monitor)
    keep = f"the previous {run_name} run stays in place"
    ran_out = f" after {result.backtracks} backtrack(s): backtracking ran out" if result.backtracks else ""
    if score is None or not math.isfinite(score):
        raise SwarmlabError(
            f"{task.key}/{run_name} ended with no finite validation {task.monitor}{ran_out}; {keep}: "
            f"lower train.lr (now {cfg.lr:g}) or use train.amp fp32"
        )
    loss = best.get("loss")
    if baseline is not None and loss is not None and math.isfinite(baseline):
        limit = baseline + DIVERGED_FACTOR * max(abs(baseline), 1.0)
        if not loss <= limit:
            raise SwarmlabError(
                f"{task.key}/{run_name} diverged{ran_out}: its best validation loss {loss:.4g} is far above "
                f"the untrained model's {baseline:.4g}; {keep}: lower train.lr (now {cfg.lr:g}) or set "
                f"train.grad_clip"
            )
