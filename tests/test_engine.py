import csv

import pytest
import torch

from models.swarmformer import SwarmFormer, SwarmFormerConfig
from pipelines.common.engine import TrainConfig, evaluate, fit, load_checkpoint
from tasks import get_task
from tasks.text_data import TokenizedTextDataset


def synthetic(n: int, seed: int, seq_len: int = 16) -> TokenizedTextDataset:
    """Label 1 draws most tokens from ids 10..29, label 0 from 30..49: learnable in a few epochs."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=g)
    ids = torch.randint(10, 50, (n, seq_len), generator=g, dtype=torch.int32)
    topical = torch.randint(0, 20, (n, seq_len), generator=g, dtype=torch.int32) + torch.where(labels == 1, 10, 30)[:, None]
    keep = torch.rand(n, seq_len, generator=g) < 0.6
    ids = torch.where(keep, topical.int(), ids)
    return TokenizedTextDataset(ids, torch.full((n,), seq_len), labels)


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return SwarmFormer(SwarmFormerConfig(vocab_size=50, d_model=16, num_layers=1, t_local=2, cluster_size=4,
                                         seq_len=16, dropout=0.2))


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


def test_fit_learns_checkpoints_and_logs(tmp_path):
    task, tracker = get_task("imdb"), Recorder()
    result = fit(tiny_model(), task, synthetic(256, 0), synthetic(64, 1), TrainConfig(**CFG), tmp_path, tracker=tracker)
    assert result.stopped == "max_epochs" and len(result.history) == 4
    assert result.best_val["accuracy"] > 0.8, result.history
    assert [step for step, _ in tracker.metrics] == [1, 2, 3, 4]
    assert "val_accuracy" in tracker.metrics[0][1] and tracker.params["train"]["lr"] == 3e-3
    state = load_checkpoint(tmp_path / "last.pt")  # weights_only=True
    assert state["epoch"] == 4 and "optimizer" in state
    best = tiny_model(1)
    best.load_state_dict(torch.load(tmp_path / "best.pt", weights_only=True))
    metrics, _ = evaluate(best, task, synthetic(64, 1), batch_size=64)
    assert metrics["accuracy"] == pytest.approx(result.best_val["accuracy"])
    rows = list(csv.DictReader(open(tmp_path / "history.csv")))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3, 4]


class Crash(Exception):
    pass


def test_resume_after_a_crash_ends_exactly_like_an_uninterrupted_run(tmp_path):
    task = get_task("imdb")
    train, val = synthetic(200, 0), synthetic(50, 1)
    full = fit(tiny_model(), task, train, val, TrainConfig(**CFG), tmp_path / "full")

    def crash_after_two(epoch, row, out_dir):
        if epoch == 2:
            raise Crash

    with pytest.raises(Crash):
        fit(tiny_model(), task, train, val, TrainConfig(**CFG), tmp_path / "crashy", callbacks=(crash_after_two,))
    torch.manual_seed(999)  # the process that resumes starts from some other RNG state
    resumed = fit(tiny_model(5), task, train, val, TrainConfig(**CFG), tmp_path / "crashy", resume=True)
    assert [r["val_loss"] for r in resumed.history] == [r["val_loss"] for r in full.history]
    assert resumed.best_epoch == full.best_epoch and resumed.best_val == full.best_val
    a = torch.load(tmp_path / "full" / "last.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "crashy" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    # resuming a finished run is a no-op with the same result
    again = fit(tiny_model(), task, train, val, TrainConfig(**CFG), tmp_path / "crashy", resume=True)
    assert again.history == resumed.history


def test_early_stopping_on_the_validation_metric(tmp_path):
    task = get_task("imdb")
    cfg = TrainConfig(**{**CFG, "lr": 1e-9, "max_epochs": 10, "patience": 2})  # nothing improves after epoch 1
    result = fit(tiny_model(), task, synthetic(64, 0), synthetic(32, 1), cfg, tmp_path)
    assert result.stopped == "early_stopping" and len(result.history) == 3 and result.best_epoch == 1


def test_time_budget_and_callback_stop(tmp_path):
    task = get_task("imdb")
    cfg = TrainConfig(**{**CFG, "time_budget_s": 1e-9})
    assert fit(tiny_model(), task, synthetic(64, 0), synthetic(32, 1), cfg, tmp_path / "a").stopped == "time_budget"
    stop = fit(tiny_model(), task, synthetic(64, 0), synthetic(32, 1), TrainConfig(**CFG), tmp_path / "b",
               callbacks=(lambda e, r, d: e == 2,))
    assert stop.stopped == "callback" and len(stop.history) == 2


def test_same_seed_same_run_other_seed_other_run(tmp_path):
    task = get_task("imdb")
    runs = [fit(tiny_model(), task, synthetic(96, 0), synthetic(32, 1), TrainConfig(**{**CFG, "max_epochs": 2, "seed": s}),
                tmp_path / f"{i}").history for i, s in enumerate((3, 3, 4))]
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("epoch_time_s", "train_samples_per_s")} for r in h]
    assert strip(runs[0]) == strip(runs[1])
    assert strip(runs[0]) != strip(runs[2])


def test_train_stage_seeds_the_initial_weights(tiny_params, tiny_tokenized, tmp_path):
    """Two models trained in one process start exactly as each would alone: init follows `seed`."""
    from pipelines.train import train

    kwargs = dict(data_dir=tiny_tokenized, report_dir=tmp_path / "reports", tracking=False)
    tiny_params["train"]["max_epochs"] = 1
    train(tiny_params, ["swarmformer_small"], out_root=tmp_path / "a", **kwargs)
    torch.rand(1000)  # disturb the global RNG between runs
    train(tiny_params, ["swarmformer_small"], out_root=tmp_path / "b", **kwargs)
    a = torch.load(tmp_path / "a" / "swarmformer_small" / "last.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "swarmformer_small" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_amp_auto_follows_native_bf16_and_bad_values_are_refused(monkeypatch, tmp_path):
    import pipelines.common.engine as engine

    cpu = torch.device("cpu")
    assert engine.resolve_amp(True, cpu) and engine.resolve_amp("bf16", cpu)
    assert not engine.resolve_amp(False, cpu) and not engine.resolve_amp("fp32", cpu)
    for native in (True, False):
        monkeypatch.setattr(engine, "native_bf16", lambda device, native=native: native)
        assert engine.resolve_amp("auto", cpu) is native
    with pytest.raises(ValueError, match="amp must be one of fp32, bf16, auto"):
        TrainConfig(amp="half")
    with pytest.raises(ValueError, match="got 'yes'"):
        engine.resolve_amp("yes", cpu)

    # The resolved choice is what fit ran with and reports: here "auto" on a CPU said to lack bf16.
    task = get_task("imdb")
    result = fit(tiny_model(), task, synthetic(32, 0), synthetic(16, 1),
                 TrainConfig(batch_size=16, max_epochs=1, device="cpu", amp="auto"), tmp_path)
    assert result.extra["bf16_autocast"] is False
