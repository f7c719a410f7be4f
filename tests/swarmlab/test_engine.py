"""The training engine: steps over finite and endless data, evaluations, budgets, backtracking, resume."""

import copy
import csv
import itertools
import math
import random
import re

import numpy as np
import pytest
import torch

import swarmlab.engine as engine
import swarmlab.engine.device as engine_device
import swarmlab.engine.loop as engine_loop
from models.swarmformer import SwarmFormer, SwarmFormerConfig
from swarmlab.engine import TrainConfig, evaluate, fit, load_checkpoint, should_backtrack
from tasks import get_task
from tasks.text_data import TokenizedTextDataset


def synthetic(n: int, seed: int, seq_len: int = 16) -> TokenizedTextDataset:
    """Label 1 draws most tokens from ids 10..29, label 0 from 30..49: learnable in a few epochs."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=g)
    ids = torch.randint(10, 50, (n, seq_len), generator=g, dtype=torch.int32)
    topical = (
        torch.randint(0, 20, (n, seq_len), generator=g, dtype=torch.int32) + torch.where(labels == 1, 10, 30)[:, None]
    )
    keep = torch.rand(n, seq_len, generator=g) < 0.6
    ids = torch.where(keep, topical.int(), ids)
    return TokenizedTextDataset(ids, torch.full((n,), seq_len), labels)


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return SwarmFormer(
        SwarmFormerConfig(vocab_size=50, d_model=16, num_layers=1, t_local=2, cluster_size=4, seq_len=16, dropout=0.2)
    )


class Recorder:
    def __init__(self):
        self.metrics, self.params = [], {}

    run_id = "r"

    def log_params(self, p):
        self.params.update(p)

    def log_metrics(self, m, step=None):
        self.metrics.append((step, m))

    def log_artifact(self, *a, **k): ...
    def set_tags(self, t): ...
    def finish(self, status="FINISHED"): ...


CFG = dict(batch_size=16, lr=3e-3, weight_decay=0.01, max_epochs=4, patience=0, device="cpu", eval_batch_size=64)
IMDB = get_task("imdb")


def test_fit_learns_checkpoints_and_logs(tmp_path):
    tracker = Recorder()
    result = fit(tiny_model(), IMDB, synthetic(256, 0), synthetic(64, 1), TrainConfig(**CFG), tmp_path, tracker=tracker)
    assert result.stopped == "max_epochs" and len(result.history) == 4 and result.steps == 4 * 16
    assert result.best_val["accuracy"] > 0.8, result.history
    evaluations = [(step, m) for step, m in tracker.metrics if "train_loss_step" not in m]  # the curve: next test
    assert [step for step, _ in evaluations] == [16, 32, 48, 64]  # MLflow's step is the optimizer step
    assert "val_accuracy" in evaluations[0][1] and tracker.params["train"]["lr"] == 3e-3
    state = load_checkpoint(tmp_path / "last.pt")  # weights_only=True: every RNG state is tensors and plain values
    assert state["progress"]["step"] == 64 and "optimizer" in state
    assert set(state["rng"]) >= {"torch", "numpy", "random"}
    best = tiny_model(1)
    best.load_state_dict(torch.load(tmp_path / "best.pt", weights_only=True))
    metrics, _ = evaluate(best, IMDB, synthetic(64, 1), batch_size=64)
    assert metrics["accuracy"] == pytest.approx(result.best_val["accuracy"])
    rows = list(csv.DictReader(open(tmp_path / "history.csv")))
    assert [(int(r["evaluation"]), int(r["step"]), int(r["epoch"])) for r in rows] == [
        (1, 16, 1),
        (2, 32, 2),
        (3, 48, 3),
        (4, 64, 4),
    ]


def test_a_tracked_run_logs_its_training_loss_per_step_at_a_stride(tmp_path, monkeypatch):
    """#38: the training loss as a curve per step, not once per evaluation: a point at each multiple of LOSS_STRIDE
    (once LOSS_EVERY_S have passed; 0 here), the mean of the steps since the last point; the points of one stretch
    average to the evaluation's train_loss."""
    monkeypatch.setattr(engine_loop, "LOSS_EVERY_S", 0.0)
    tracker = Recorder()
    cfg = TrainConfig(**{**CFG, "max_epochs": 2})  # 16 steps an epoch, LOSS_STRIDE 10
    result = fit(tiny_model(), IMDB, synthetic(256, 0), synthetic(64, 1), cfg, tmp_path / "a", tracker=tracker)
    points = [(step, m["train_loss_step"]) for step, m in tracker.metrics if "train_loss_step" in m]
    assert [step for step, _ in points] == [10, 20, 30]
    assert all(math.isfinite(v) and v > 0 for _, v in points)
    engine_loop.LOSS_STRIDE, stride = 16, engine_loop.LOSS_STRIDE  # one point per stretch: its mean is train_loss
    try:
        tracker = Recorder()
        result = fit(tiny_model(), IMDB, synthetic(256, 0), synthetic(64, 1), cfg, tmp_path / "b", tracker=tracker)
    finally:
        engine_loop.LOSS_STRIDE = stride
    points = [m["train_loss_step"] for _, m in tracker.metrics if "train_loss_step" in m]
    assert points == pytest.approx([row["train_loss"] for row in result.history], rel=1e-5)


class Crash(Exception):
    pass


def test_resume_after_a_crash_ends_exactly_like_an_uninterrupted_run(tmp_path):
    train, val = synthetic(200, 0), synthetic(50, 1)
    cfg = TrainConfig(**{**CFG, "eval_every": 5})  # evaluations (and checkpoints) in mid-epoch
    full = fit(tiny_model(), IMDB, train, val, cfg, tmp_path / "full")

    def crash_at_third(state):
        if state.evaluation == 3:
            raise Crash

    with pytest.raises(Crash):
        fit(tiny_model(), IMDB, train, val, cfg, tmp_path / "crashy", callbacks=(crash_at_third,))
    torch.manual_seed(999)  # the process that resumes starts from some other RNG state
    np.random.seed(5)
    resumed = fit(tiny_model(5), IMDB, train, val, cfg, tmp_path / "crashy", resume=True)
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("train_time_s", "train_samples_per_s")} for r in h]
    assert strip(resumed.history) == strip(full.history)
    assert resumed.best == full.best
    a = torch.load(tmp_path / "full" / "last.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "crashy" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    again = fit(tiny_model(), IMDB, train, val, cfg, tmp_path / "crashy", resume=True)  # finished: a no-op
    assert again.history == resumed.history


def test_early_stopping_on_the_validation_metric(tmp_path):
    cfg = TrainConfig(**{**CFG, "lr": 1e-9, "max_epochs": 10, "patience": 2})  # nothing improves after epoch 1
    result = fit(tiny_model(), IMDB, synthetic(64, 0), synthetic(32, 1), cfg, tmp_path)
    assert result.stopped == "early_stopping" and len(result.history) == 3 and result.best_epoch == 1


def test_time_budget_stops_in_mid_epoch_and_callbacks_stop(tmp_path, monkeypatch):
    clock = itertools.count(0.0, 1.0)  # every perf_counter call advances a second
    monkeypatch.setattr(engine_loop.time, "perf_counter", lambda: next(clock))
    cfg = TrainConfig(**{**CFG, "time_budget_s": 5.0})
    result = fit(tiny_model(), IMDB, synthetic(256, 0), synthetic(32, 1), cfg, tmp_path / "a")
    assert result.stopped == "time_budget" and 0 < result.steps < 16  # inside the first epoch of 16 steps
    assert len(result.history) == 1 and 0 < result.history[0]["epoch"] < 1  # the stop is evaluated
    assert result.train_time_s == pytest.approx(result.steps + 1, abs=1.0)  # net time: no validation in it
    monkeypatch.undo()
    stop = fit(
        tiny_model(),
        IMDB,
        synthetic(64, 0),
        synthetic(32, 1),
        TrainConfig(**CFG),
        tmp_path / "b",
        callbacks=(lambda state: state.evaluation == 2,),
    )
    assert stop.stopped == "callback" and len(stop.history) == 2


def test_same_seed_same_run_other_seed_other_run(tmp_path):
    runs = [
        fit(
            tiny_model(),
            IMDB,
            synthetic(96, 0),
            synthetic(32, 1),
            TrainConfig(**{**CFG, "max_epochs": 2, "seed": s}),
            tmp_path / f"{i}",
        ).history
        for i, s in enumerate((3, 3, 4))
    ]
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("train_time_s", "train_samples_per_s")} for r in h]
    assert strip(runs[0]) == strip(runs[1])
    assert strip(runs[0]) != strip(runs[2])


def test_train_stage_seeds_the_initial_weights(tiny_params, tiny_tokenized, tmp_path):
    """Two models trained in one process start exactly as each would alone: init follows `seed`."""
    from pipelines.train import train

    kwargs = dict(report_root=tmp_path / "reports", tracking=False)
    tiny_params["train"]["max_epochs"] = 1
    train(tiny_params, "imdb", ["swarmformer_small"], out_root=tmp_path / "a", **kwargs)
    torch.rand(1000)  # disturb the global RNG between runs
    train(tiny_params, "imdb", ["swarmformer_small"], out_root=tmp_path / "b", **kwargs)
    a = torch.load(tmp_path / "a" / "imdb" / "swarmformer_small-seed0" / "last.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "imdb" / "swarmformer_small-seed0" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_amp_auto_follows_native_bf16_and_bad_values_are_refused(monkeypatch, tmp_path):
    cpu = torch.device("cpu")
    assert engine.resolve_amp(True, cpu) and engine.resolve_amp("bf16", cpu)
    assert not engine.resolve_amp(False, cpu) and not engine.resolve_amp("fp32", cpu)
    for native in (True, False):
        monkeypatch.setattr(engine_device, "native_bf16", lambda device, native=native: native)
        assert engine.resolve_amp("auto", cpu) is native
    with pytest.raises(ValueError, match="amp must be one of fp32, bf16, auto"):
        TrainConfig(amp="half")
    with pytest.raises(ValueError, match="got 'yes'"):
        engine.resolve_amp("yes", cpu)

    # The resolved choice is what fit ran with and reports: here "auto" on a CPU said to lack bf16.
    result = fit(
        tiny_model(),
        IMDB,
        synthetic(32, 0),
        synthetic(16, 1),
        TrainConfig(batch_size=16, max_epochs=1, device="cpu", amp="auto"),
        tmp_path,
    )
    assert result.extra["bf16_autocast"] is False


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lr": float("nan")}, "lr must be a finite number > 0, got nan"),
        ({"lr": float("inf")}, "lr must be a finite number > 0, got inf"),
        ({"lr": 0.0}, "lr must be > 0, got 0.0"),
        ({"grad_clip": -1.0}, "grad_clip must be >= 0, got -1.0"),
        ({"patience": -1}, "patience must be >= 0, got -1"),
        ({"batch_size": 1.5}, "batch_size must be an int >= 1, got float 1.5"),
        ({"plateau": "wait"}, "plateau must be one of stop, backtrack, got 'wait'"),
        ({"compile": "max"}, "compile must be one of eager, default, reduce-overhead, graph, got 'max'"),
        ({"max_epochs": 0}, "training would never end"),
        ({"backtrack_alpha": 1.5}, "backtrack_alpha must be > 0 and <= 1, got 1.5"),
        ({"max_steps": -1}, "max_steps must be >= 0, got -1"),
    ],
)
def test_refused_engine_settings(changes, message):
    with pytest.raises(ValueError) as info:
        TrainConfig(**{**CFG, **changes})
    assert message in str(info.value), str(info.value)


# ------------------------------------------------------------------------------------------- endless data


def toy(**options):
    return get_task("toy_counting", {"seq_len": 16, "vocab_size": 8, **options})


def toy_model():
    import models

    torch.manual_seed(0)
    return models.create_model(
        "transformer", vocab_size=8, num_classes=2, seq_len=16, d_model=32, num_layers=1, num_heads=2, dropout=0.0
    )


def test_endless_source_trains_by_steps_and_validates_every_k(tmp_path):
    task = toy(rng="step")
    model = toy_model()
    cfg = TrainConfig(batch_size=32, lr=3e-3, max_epochs=0, max_steps=120, eval_every=40, patience=0, device="cpu")
    result = fit(model, task, task.train_data(model.cfg), task.eval_data("val", model.cfg), cfg, tmp_path)
    assert result.stopped == "max_steps" and [r["step"] for r in result.history] == [40, 80, 120]
    assert all(r["epoch"] == 0 for r in result.history)
    assert result.best_val["accuracy"] > 0.75, result.history  # it learns to count
    with pytest.raises(ValueError, match="set eval_every"):
        fit(
            toy_model(),
            task,
            task.train_data(model.cfg),
            task.eval_data("val", model.cfg),
            TrainConfig(max_epochs=0, max_steps=10, device="cpu"),
            tmp_path / "x",
        )


def test_numpy_drawing_generator_resumes_bit_for_bit(tmp_path):
    task = toy(rng="numpy")  # batches from numpy's global generator: its state must travel in the checkpoint
    cfg = TrainConfig(batch_size=16, lr=3e-3, max_epochs=0, max_steps=60, eval_every=20, patience=0, device="cpu")

    def run(out, **kw):
        model = toy_model()
        return fit(model, task, task.train_data(model.cfg), task.eval_data("val", model.cfg), cfg, out, **kw)

    full = run(tmp_path / "full")

    def crash(state):
        if state.evaluation == 1:
            raise Crash

    with pytest.raises(Crash):
        run(tmp_path / "crashy", callbacks=(crash,))
    np.random.seed(123)
    random.seed(4)
    resumed = run(tmp_path / "crashy", resume=True)
    assert [r["val_loss"] for r in resumed.history] == [r["val_loss"] for r in full.history]
    assert [r["train_loss"] for r in resumed.history] == [r["train_loss"] for r in full.history]


# ------------------------------------------------------------------------------------------- backtracking


def paper_rule(losses: list[float], e: int, beta: float = 0.2, warmup: int = 5) -> bool:
    """Paper 003 §4.1.3 read literally: after epoch e (never in the first 5), count the most recent epochs that
    all have a better validation loss than the current one; backtrack if the count exceeds beta of all epochs."""
    if e <= warmup:
        return False
    current, count = losses[e - 1], 0
    for j in range(e - 2, -1, -1):
        if losses[j] < current:
            count += 1
        else:
            break
    return count > beta * e


def test_backtracking_rule_is_the_papers():
    lower = lambda a, b: a < b
    # 6 evaluations, the last one worse than the 2 before it: 2 > 0.2 * 6 = 1.2 -> backtrack
    assert should_backtrack([5, 4, 3, 1.0, 1.2], 1.5, better=lower, beta=0.2, warmup=5)
    # ... but only 1 better evaluation right before it: 1 <= 1.2 -> keep going
    assert not should_backtrack([5, 4, 3, 2, 1], 1.5, better=lower, beta=0.2, warmup=5)
    assert not should_backtrack([5, 4, 3, 2], 9.0, better=lower, beta=0.2, warmup=5)  # the first 5: never
    rng = random.Random(0)
    for _ in range(2000):
        losses = [rng.choice([0.1, 0.2, 0.3, 0.4, 0.5]) for _ in range(rng.randint(1, 30))]
        e = len(losses)
        assert should_backtrack(losses[:-1], losses[-1], better=lower, beta=0.2, warmup=5) == paper_rule(losses, e)


class ScriptedValidation:
    """Replaces the engine's validation: loss i of the script at evaluation i (the model's own loss is ignored)."""

    def __init__(self, losses):
        self.losses, self.calls = list(losses), 0

    def __call__(self, model, task, data, **kw):
        loss = self.losses[self.calls]
        self.calls += 1
        return {"loss": loss, "accuracy": 0.5}, None


class LossTask(type(IMDB)):
    """imdb selected on validation loss, as the set tasks are."""

    monitor, mode = "loss", "min"


def test_backtrack_restores_best_weights_and_optimizer_and_discounts_lr(tmp_path, monkeypatch):
    # Evaluations 1-5 are never backtracked. At 6 (loss 0.8) the 5 evaluations before it are all better:
    # 5 > 0.2 * 6, so it backtracks to evaluation 3 (0.4). At 7 (0.41) only the recorded 0.4 is better: 1 <= 1.4.
    script = [0.5, 0.45, 0.4, 0.6, 0.7, 0.8, 0.41, 0.39]
    monkeypatch.setattr(engine_loop, "evaluate", ScriptedValidation(script))
    seen = {}

    def capture(state):
        if state.row.get("event"):
            seen["model"] = {k: v.clone() for k, v in state.model.state_dict().items()}
            seen["optimizer"] = copy.deepcopy(state.optimizer.state_dict())  # training goes on mutating it
            seen["best"] = torch.load(state.out_dir / "best.pt", weights_only=True)  # later improvements replace these
            seen["best_optimizer"] = torch.load(state.out_dir / "best_optimizer.pt", weights_only=True)
            seen["evaluation"] = state.evaluation

    cfg = TrainConfig(**{**CFG, "max_epochs": 0, "max_steps": 16, "eval_every": 2, "plateau": "backtrack"})
    result = fit(tiny_model(), LossTask(), synthetic(64, 0), synthetic(16, 1), cfg, tmp_path, callbacks=(capture,))
    assert seen["evaluation"] == 6 and result.backtracks == 1
    best = seen["best"]
    assert all(torch.equal(seen["model"][k], best[k]) for k in best)  # the weights of evaluation 3 ...
    for pid, st in seen["best_optimizer"]["state"].items():  # ... and the optimizer state saved with them
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(seen["optimizer"]["state"][pid][key], st[key])
    rows = result.history
    assert rows[5]["event"] == "backtrack" and rows[6]["lr"] == pytest.approx(0.9 * rows[5]["lr"])
    assert result.best["evaluation"] == 8  # later improvements are still taken
    assert not all(
        torch.equal(seen["model"][k], v) for k, v in torch.load(tmp_path / "best.pt", weights_only=True).items()
    )
    assert "backtrack" in open(tmp_path / "history.csv").read()


def test_non_finite_loss_backtracks_or_stops_with_one_line(tmp_path):
    from swarmlab.errors import SwarmlabError

    class NanAfter(LossTask):
        calls = 0

        def loss(self, outputs, batch):
            loss = super().loss(outputs, batch)
            if not torch.is_grad_enabled():  # validation
                return loss
            NanAfter.calls += 1
            return loss * float("nan") if NanAfter.calls in (9, 10) else loss

    cfg = TrainConfig(**{**CFG, "max_epochs": 0, "max_steps": 16, "eval_every": 4, "plateau": "backtrack"})
    result = fit(tiny_model(), NanAfter(), synthetic(64, 0), synthetic(16, 1), cfg, tmp_path / "bt")
    events = [r.get("event", "") for r in result.history]
    assert events[2] == "backtrack: non-finite training loss" and result.backtracks == 1
    assert math.isfinite(result.history[-1]["train_loss"])  # training went on from the best weights
    NanAfter.calls = 0
    with pytest.raises(SwarmlabError, match=r"non-finite training loss in steps 9\.\.12 .*plateau: backtrack") as info:
        fit(
            tiny_model(),
            NanAfter(),
            synthetic(64, 0),
            synthetic(16, 1),
            TrainConfig(**{**cfg.__dict__, "plateau": "stop"}),
            tmp_path / "stop",
        )
    assert "\n" not in str(info.value)


def test_lr_decays_at_a_share_of_the_steps(tmp_path):
    cfg = TrainConfig(**{**CFG, "max_epochs": 0, "max_steps": 20, "eval_every": 2, "lr_decay_at": 0.7})
    result = fit(tiny_model(), IMDB, synthetic(64, 0), synthetic(16, 1), cfg, tmp_path)
    lrs = {r["step"]: r["lr"] for r in result.history}
    assert lrs[14] == pytest.approx(3e-3) and lrs[16] == pytest.approx(3e-4)  # steps 15.. (0-based 14..) decayed


def test_warmup_raises_the_lr_linearly_then_the_decay_applies(tmp_path):
    cfg = TrainConfig(
        **{**CFG, "max_epochs": 0, "max_steps": 10, "eval_every": 1, "warmup_steps": 4, "lr_decay_at": 0.8}
    )
    result = fit(tiny_model(), IMDB, synthetic(64, 0), synthetic(16, 1), cfg, tmp_path)
    lrs = [r["lr"] for r in result.history]  # the lr of each evaluation's last step
    assert lrs == pytest.approx([3e-3 / 4, 3e-3 / 2, 3e-3 * 3 / 4] + [3e-3] * 5 + [3e-4] * 2)


def test_the_optimizer_leaves_what_a_module_names_in_no_weight_decay_undecayed():
    from models import create_model

    model = create_model("hsw_small", vocab_size=259, num_classes=2, seq_len=256)
    optimizer = engine.make_optimizer(model, TrainConfig(**CFG), torch.device("cpu"))
    decayed = {id(p) for p in optimizer.param_groups[0]["params"]}
    names = {id(p): n for n, p in model.named_parameters()}
    tables = [n for n, p in model.named_parameters() if n.endswith("attn.rel_bias")]
    assert len(tables) == 5 and not any(id(p) in decayed for n, p in model.named_parameters() if n in tables)
    assert {names[i] for i in decayed} >= {"patch_embed.weight", "head.weight", "stages.0.blocks.0.attn.qkv.weight"}
    assert (
        optimizer.param_groups[0]["weight_decay"] == CFG["weight_decay"]
        and optimizer.param_groups[1]["weight_decay"] == 0.0
    )


def test_training_without_a_bar_prints_a_heartbeat(tmp_path, monkeypatch, capsys):
    """Under DVC or CI (no TTY, no bar) training says where it is at least every HEARTBEAT_S seconds (#38: a smoke
    run was silent for 6 minutes); with the interval at 0 every step prints, and the run is the same run."""
    monkeypatch.setenv("SWARMLAB_PROGRESS", "0")
    monkeypatch.setattr(engine_loop, "HEARTBEAT_S", 0.0)
    cfg = TrainConfig(**{**CFG, "max_epochs": 1})
    beating = fit(tiny_model(), IMDB, synthetic(64, 0), synthetic(32, 1), cfg, tmp_path / "a")
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("train: ")]
    steps = [re.fullmatch(r"train: (\d+) of 4 steps, \d+ s", ln) for ln in lines]
    assert all(steps) and [int(m.group(1)) for m in steps] == [1, 2, 3, 4], lines
    monkeypatch.setattr(engine_loop, "HEARTBEAT_S", 3600.0)
    quiet = fit(tiny_model(), IMDB, synthetic(64, 0), synthetic(32, 1), cfg, tmp_path / "b")
    assert not [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("train: ")]
    assert beating.history == [
        {
            **r,
            "train_time_s": beating.history[i]["train_time_s"],
            "train_samples_per_s": beating.history[i]["train_samples_per_s"],
        }
        for i, r in enumerate(quiet.history)
    ]
