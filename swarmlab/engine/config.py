"""``TrainConfig``: the engine's settings (``train:`` in params.yaml), each with its allowed values, its roles (what a
resumed run may change, what the report states as the budget: ``swarmlab.settings.fields_with``) and why."""

from __future__ import annotations

from dataclasses import dataclass

from swarmlab.settings import MAX_SEED, SettingsError, check, setting

AMP_CHOICES = ("fp32", "bf16", "auto")
# "eager" = no torch.compile. Not "off": YAML 1.1 reads a bare `off` as false, and `dvc exp run -S` writes values bare.
COMPILE_CHOICES = ("eager", "default", "reduce-overhead", "graph")
PLATEAU_CHOICES = ("stop", "backtrack")
OPTIMIZER_CHOICES = ("adamw", "adam")


MIN_TIME_BUDGET_S = 1.0  # a net-time budget under this ends before one step and one evaluation mean anything


@dataclass
class TrainConfig:
    batch_size: int = setting(48, ge=1, roles=("budget",))  # paper 000 best config
    lr: float = setting(4.74e-4, gt=0, roles=("budget",))  # paper 000 best config
    weight_decay: float = setting(0.0381, ge=0)  # paper 000 best config (AdamW: decoupled; Adam: L2)
    optimizer: str = setting("adamw", choices=OPTIMIZER_CHOICES)  # paper 003 trains with Adam
    # passes over finite data; 0 = no limit (max_steps or time_budget_s end it)
    max_epochs: int = setting(20, ge=0, roles=("resumable", "budget"))
    max_steps: int = setting(0, ge=0, roles=("resumable", "budget"))  # optimizer steps; 0 = no limit
    eval_every: int = setting(0, ge=0)  # steps between validations; 0 = at the end of every epoch (finite data only)
    # stop after this many evaluations without a better validation metric; 0 = never
    patience: int = setting(5, ge=0, roles=("resumable", "budget"))
    # What a plateau triggers: "stop" (early stopping after `patience`) or "backtrack": paper 003 §4.1.3, restore the
    # best weights and optimizer state and multiply the learning rate by backtrack_alpha when the latest evaluations
    # that are all better than the current one outnumber backtrack_beta of all evaluations (never in the first
    # backtrack_warmup); a non-finite loss then backtracks instead of stopping the run.
    plateau: str = setting("stop", choices=PLATEAU_CHOICES, roles=("budget",))
    backtrack_alpha: float = setting(0.9, gt=0, le=1)  # paper 003: learning-rate discount per backtrack
    backtrack_beta: float = setting(0.2, ge=0, lt=1)  # paper 003: horizon, a share of the evaluations so far
    backtrack_warmup: int = setting(5, ge=0)  # paper 003: the first 5 epochs are never backtracked
    # share of the planned steps after which lr x lr_decay_factor; 0 = off
    lr_decay_at: float = setting(0.0, ge=0, lt=1)
    lr_decay_factor: float = setting(0.1, gt=0, le=1)  # paper 003's MoG experiment: lr x 0.1 at 70% of the steps
    warmup_steps: int = setting(0, ge=0)  # lr rises linearly over the first steps (lr/n, 2 lr/n, ..., lr); 0 = off
    grad_clip: float = setting(1.0, ge=0)  # max global grad norm, as the SwarmFormer authors; 0 = off
    seed: int = setting(0, ge=0, le=MAX_SEED)
    # auto = cuda when available, else cpu; "cuda" needs a CUDA device (resolve_device checks)
    device: str = setting("auto", roles=("resumable", "budget"))
    # bf16 autocast (the authors trained with mixed precision on GPU): "fp32" (off), "bf16" (on), or "auto":
    # on where the device computes bf16 natively (CUDA with bf16, a CPU with AVX512-BF16 or AMX), since on
    # other CPUs autocast emulates it and a SwarmFormer-Small train step ran ~10x slower than in fp32.
    # True / False mean "bf16" / "fp32".
    amp: bool | str = setting("fp32", roles=("budget",))
    # torch.compile: eager (none) | default | reduce-overhead | graph (the whole step in one CUDA graph, CUDA only:
    # swarmlab.engine.graphstep)
    compile: str = setting("eager", choices=COMPILE_CHOICES, roles=("resumable",))
    max_batches_per_epoch: int = setting(0, ge=0)  # cap on training batches per epoch; 0 = the whole split
    # net training seconds (no validation, checkpoints, logging); 0 = off
    time_budget_s: float = setting(0.0, ge=0, roles=("resumable", "budget"))
    # steps between NaN/inf checks of the loss (a host sync); 0 = at evaluations
    check_finite_every: int = setting(0, ge=0, roles=("resumable",))
    eval_batch_size: int = setting(256, ge=1, roles=("resumable",))
    num_threads: int = setting(0, ge=0, roles=("resumable",))  # torch intra-op threads; 0 = torch's default

    def __post_init__(self):
        if self.compile in ("off", False):  # accepted spellings of "no compilation"
            self.compile = "eager"
        try:
            check(self, "")
        except SettingsError as exc:
            raise ValueError(str(exc)) from None
        check_amp(self.amp)
        if not (self.max_epochs or self.max_steps or self.time_budget_s):
            raise ValueError("max_epochs, max_steps and time_budget_s are all 0: training would never end")
        if 0 < self.time_budget_s < MIN_TIME_BUDGET_S:
            raise ValueError(
                f"time_budget_s {self.time_budget_s!r} is under {MIN_TIME_BUDGET_S:g} s, too short for one step and "
                "one evaluation: use 0 (no time limit) or at least 1"
            )


def check_amp(amp: bool | str) -> None:
    """Refuse an ``amp`` setting other than a bool or one of ``AMP_CHOICES``."""
    if not isinstance(amp, bool) and amp not in AMP_CHOICES:
        raise ValueError(f"amp must be one of {', '.join(AMP_CHOICES)} (or a bool), got {amp!r}")
