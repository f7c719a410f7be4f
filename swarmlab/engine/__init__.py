"""The one training engine: every task and every model, driven by a DVC stage, a sweep or a test.

``fit`` runs one loop over optimizer steps for both kinds of training data a task may give: a finite
split (epochs of shuffled batches; each epoch's order depends only on (seed, epoch)) or an endless
source (a fresh batch per step). It validates every ``eval_every`` steps (default: at the end of each
epoch), keeps the best weights by the task's validation metric (the test split is never seen here),
answers a plateau by stopping early or by backtracking (paper 003 §4.1.3), stops at ``max_epochs``,
``max_steps`` or a net-time budget, and checkpoints at every evaluation with every RNG state, so that
``fit(..., resume=True)`` after a crash ends exactly where the uninterrupted run ends.

The training step never waits on the host: metrics accumulate on the device, the loss is checked for
NaN/inf only at evaluations (or every ``check_finite_every`` steps), optimizers are fused on CUDA,
batches are copied from pinned memory without blocking, a split that can live on the GPU does, and
``compile`` runs the model through ``torch.compile`` (``reduce-overhead``: CUDA graphs).

Needs only torch; tracking goes through a tracker object (``NullTracker`` when off). One job per module:

    config      TrainConfig: the settings and their allowed values
    device      the device, bf16 autocast, host-to-device copies, torch.compile
    plan        the batches of an epoch, the planned steps, settings the data cannot train with (PlanError)
    optim       the optimizer (decay groups) and the learning-rate schedule (step decay, warmup)
    evaluation  evaluate: a model's metrics on a split
    checkpoint  state dicts saved atomically and loaded with weights_only=True, RNG states, the history CSV,
                resume checks (RESUMABLE_CHANGES)
    state       Progress (saved in every checkpoint), Loop (what callbacks see), TrainState
    callbacks   TimeBudget, EarlyStopping, Backtracking and the hook points fit calls them at
    loop        fit and FitResult
"""

from swarmlab.engine.callbacks import (
    MAX_NONFINITE_BACKTRACKS,
    Backtracking,
    Callback,
    EarlyStopping,
    FunctionCallback,
    NonFiniteLossError,
    TimeBudget,
    default_callbacks,
    should_backtrack,
)
from swarmlab.engine.checkpoint import (
    BEST,
    BEST_OPTIMIZER,
    CHECKPOINT,
    HISTORY,
    RESUMABLE_CHANGES,
    check_resume,
    load_checkpoint,
    load_weights,
)
from swarmlab.engine.config import AMP_CHOICES, COMPILE_CHOICES, OPTIMIZER_CHOICES, PLATEAU_CHOICES, TrainConfig
from swarmlab.engine.device import (
    autocast,
    compiled,
    native_bf16,
    on_device,
    resolve_amp,
    resolve_device,
    sync,
    to_device,
)
from swarmlab.engine.evaluation import evaluate
from swarmlab.engine.loop import FitResult, fit
from swarmlab.engine.optim import make_optimizer, step_decay, with_warmup
from swarmlab.engine.plan import PlanError, batch_indices, check_plan, epoch_plan, planned_steps
from swarmlab.engine.state import TrainState

__all__ = [
    "AMP_CHOICES",
    "BEST",
    "BEST_OPTIMIZER",
    "CHECKPOINT",
    "COMPILE_CHOICES",
    "HISTORY",
    "MAX_NONFINITE_BACKTRACKS",
    "OPTIMIZER_CHOICES",
    "PLATEAU_CHOICES",
    "RESUMABLE_CHANGES",
    "Backtracking",
    "Callback",
    "EarlyStopping",
    "FitResult",
    "FunctionCallback",
    "NonFiniteLossError",
    "PlanError",
    "TimeBudget",
    "TrainConfig",
    "TrainState",
    "autocast",
    "batch_indices",
    "check_plan",
    "check_resume",
    "compiled",
    "default_callbacks",
    "epoch_plan",
    "evaluate",
    "fit",
    "load_checkpoint",
    "load_weights",
    "make_optimizer",
    "native_bf16",
    "on_device",
    "planned_steps",
    "resolve_amp",
    "resolve_device",
    "should_backtrack",
    "step_decay",
    "sync",
    "to_device",
    "with_warmup",
]
