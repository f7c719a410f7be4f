"""What ends or redirects training besides its step and epoch limits, as small callback objects that ``fit`` calls at
fixed hook points (PyTorch Lightning's pattern): ``TimeBudget``, ``EarlyStopping`` and ``Backtracking``, built from
the settings by ``default_callbacks``; a plain function ``cb(state) -> bool`` passed to ``fit(callbacks=...)`` (a
sweep scheduler's stop, an annealing schedule) runs as a ``FunctionCallback``.

A callback holds settings only. What it remembers between evaluations (evaluations since the best one, the values
backtracking records, the learning-rate discount, the run of non-finite backtracks) lives in the loop's ``Progress``,
which every checkpoint saves, so a resumed run goes on exactly as an uninterrupted one.

Hook points, in the order ``fit`` calls them; every callback is called at each, in list order (the built-in ones
first); the base class does nothing:

====================================  ================================================================================
``on_step_end(loop) -> str``          after each optimizer step that neither ``max_steps`` nor ``max_epochs`` ends:
                                      a non-empty stop reason ends the run there (the stretch so far is evaluated)
``on_nonfinite(loop, what) -> str``   at an evaluation whose training loss (``what = "training loss"``) or validation
                                      metric (``"validation"``) is NaN/inf: the first callback that returns an event
                                      has handled it (backtracked); unhandled, ``fit`` raises ``NonFiniteLossError``
``on_improvement(loop)``              after ``best.pt`` holds the weights of a new best evaluation
``on_no_improvement(loop, score,      after a finite evaluation that is not better than the best (``stop``: the reason
stop) -> str``                        this evaluation ends the run, if any): the first event returned is recorded
``on_evaluation_end(loop) -> str``    after the evaluation is judged: the first stop reason ends the run after it
``on_checkpoint(state) -> bool``      after the evaluation's checkpoint, history row and printed line (``state``: a
                                      ``TrainState``): True ends the run (``stopped = "callback"``)
``still_stopped(progress) -> bool``   on resume of a run that this callback stopped (``progress.stopped ==
                                      reason``): False when the limit was raised or switched off, so the run goes on
====================================  ================================================================================
"""

from __future__ import annotations

import time
from typing import Callable

from swarmlab.engine.checkpoint import BEST, BEST_OPTIMIZER, load_checkpoint, load_weights, save
from swarmlab.engine.config import TrainConfig
from swarmlab.engine.state import Loop, Progress, TrainState
from swarmlab.errors import SwarmlabError

# A run whose loss is non-finite at this many evaluations in a row, each answered by a backtrack, has run out of
# backtracking: the learning rate has been cut by backtrack_alpha ** 5 and the loss still blows up.
MAX_NONFINITE_BACKTRACKS = 5


class NonFiniteLossError(SwarmlabError):
    """The training or validation loss became NaN or inf (and there was no best checkpoint to go back to, or
    backtracking ran out: ``MAX_NONFINITE_BACKTRACKS`` in a row)."""


class Callback:
    """The hook points of ``fit`` (see the module docstring); each does nothing here."""

    reason = ""  # the ``stopped`` value this callback's stops carry ("" = none of its own)

    def on_step_end(self, loop: Loop) -> str:
        return ""

    def on_nonfinite(self, loop: Loop, what: str) -> str:
        return ""

    def on_improvement(self, loop: Loop) -> None:
        pass

    def on_no_improvement(self, loop: Loop, score: float, stop: str) -> str:
        return ""

    def on_evaluation_end(self, loop: Loop) -> str:
        return ""

    def on_checkpoint(self, state: TrainState) -> bool | None:
        return None

    def still_stopped(self, progress: Progress) -> bool:
        return True


class FunctionCallback(Callback):
    """``fn(state: TrainState) -> bool | None`` after each evaluation's checkpoint; True ends the run."""

    def __init__(self, fn: Callable[[TrainState], bool | None]):
        self.fn = fn

    def on_checkpoint(self, state: TrainState) -> bool | None:
        return self.fn(state)


class TimeBudget(Callback):
    """Ends the run once its net training time (validation, checkpoints and logging excluded) reaches ``budget_s``;
    0 = no budget. Checked after every step: the clock is read only then, never without a budget."""

    reason = "time_budget"

    def __init__(self, budget_s: float):
        self.budget_s = budget_s

    def on_step_end(self, loop: Loop) -> str:
        if self.budget_s and loop.progress.train_time_s + time.perf_counter() - loop.t0 >= self.budget_s:
            return self.reason
        return ""

    def still_stopped(self, progress: Progress) -> bool:
        return bool(self.budget_s) and progress.train_time_s >= self.budget_s


class EarlyStopping(Callback):
    """Ends the run after ``patience`` evaluations in a row without a better validation metric; 0 = never."""

    reason = "early_stopping"

    def __init__(self, patience: int):
        self.patience = patience

    def _spent(self, progress: Progress) -> bool:
        return bool(self.patience) and progress.bad_evals >= self.patience

    def on_evaluation_end(self, loop: Loop) -> str:
        return self.reason if self._spent(loop.progress) else ""

    def still_stopped(self, progress: Progress) -> bool:
        return self._spent(progress)


def should_backtrack(
    earlier: list[float], current: float, *, better: Callable[[float, float], bool], beta: float, warmup: int
) -> bool:
    """Paper 003 §4.1.3: backtrack after evaluation e = len(earlier) + 1 when the most recent evaluations
    that are all better than ``current`` are more than ``beta * e``; never in the first ``warmup``.

    ``earlier`` holds the validation results of the evaluations before this one as the heuristic records
    them (after a backtrack: the best result, not the discarded one); ``better(a, b)`` says a beats b.
    """
    e = len(earlier) + 1
    if e <= warmup:
        return False
    run = 0
    for value in reversed(earlier):
        if not better(value, current):
            break
        run += 1
    return run > beta * e


class Backtracking(Callback):
    """Paper 003 §4.1.3 (``plateau: backtrack``): on a plateau (``should_backtrack``) or a non-finite loss, restore the
    best weights and optimizer state and multiply the learning rate in force by ``alpha``. Keeps the best evaluation's
    optimizer state in ``best_optimizer.pt``; ends the run after ``MAX_NONFINITE_BACKTRACKS`` non-finite losses in a
    row."""

    def __init__(self, *, alpha: float, beta: float, warmup: int):
        self.alpha, self.beta, self.warmup = alpha, beta, warmup

    def backtrack(self, loop: Loop) -> None:
        """Restore the best weights and optimizer state; the learning rate in force times alpha."""
        best, best_optimizer = loop.out_dir / BEST, loop.out_dir / BEST_OPTIMIZER
        load_weights(loop.model, load_checkpoint(best, map_location=loop.device), best)
        loop.optimizer.load_state_dict(load_checkpoint(best_optimizer, map_location=loop.device))
        loop.progress.lr_scale *= self.alpha
        loop.progress.backtracks += 1

    def on_nonfinite(self, loop: Loop, what: str) -> str:
        p = loop.progress
        if not p.best:  # nothing to go back to: fit raises
            return ""
        p.nonfinite_streak += 1
        if p.nonfinite_streak >= MAX_NONFINITE_BACKTRACKS:
            raise NonFiniteLossError(
                f"{loop.desc}backtracking ran out: the loss was non-finite at {p.nonfinite_streak} evaluations "
                f"in a row, each backtracked (lr now {loop.lr:.3g}): lower train.lr, use train.amp fp32 or "
                f"check the data"
            )
        self.backtrack(loop)
        return f"backtrack: non-finite {what}"

    def on_improvement(self, loop: Loop) -> None:
        loop.progress.nonfinite_streak = 0
        save(loop.optimizer.state_dict(), loop.out_dir / BEST_OPTIMIZER)

    def on_no_improvement(self, loop: Loop, score: float, stop: str) -> str:
        p = loop.progress
        p.nonfinite_streak = 0
        # an evaluation that ends the run is not backtracked: nothing would train on from the restored weights
        if stop or not should_backtrack(
            p.recorded, score, better=loop.task.is_better, beta=self.beta, warmup=self.warmup
        ):
            return ""
        self.backtrack(loop)
        return "backtrack"


def default_callbacks(cfg: TrainConfig) -> list[Callback]:
    """The callbacks the settings ask for (a budget or patience of 0 is off); ``fit`` calls them before its own."""
    callbacks: list[Callback] = [TimeBudget(cfg.time_budget_s), EarlyStopping(cfg.patience)]
    if cfg.plateau == "backtrack":
        callbacks.append(Backtracking(alpha=cfg.backtrack_alpha, beta=cfg.backtrack_beta, warmup=cfg.backtrack_warmup))
    return callbacks
