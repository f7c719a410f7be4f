"""``train.compile: graph`` (swarmlab.engine.graphstep): the whole train step in one CUDA graph.

The learning-rate helpers and the refusal on a CPU run everywhere; the captured step itself needs a CUDA device,
and those tests say so when skipped (they ran on a lent H200: reports/side/engine_gpu/graph_mode/)."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from models.swarmformer import SwarmFormer, SwarmFormerConfig
from swarmlab.engine import TrainConfig, fit
from swarmlab.engine.graphstep import WARMUP, GraphStep, plain_lr, set_lr, tensor_lr
from swarmlab.errors import SwarmlabError
from tests.swarmlab.test_engine import CFG, IMDB, synthetic, tiny_model

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="the captured step needs a CUDA device")


def adamw(model, **kw):
    return torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, **kw)


def test_compile_graph_is_a_setting_and_refused_on_a_cpu(tmp_path):
    cfg = TrainConfig(**{**CFG, "compile": "graph", "max_epochs": 1})
    with pytest.raises(SwarmlabError, match="train.compile graph .* the device is cpu: use eager"):
        fit(tiny_model(), IMDB, synthetic(64, 0), synthetic(32, 1), cfg, tmp_path)
    with pytest.raises(SwarmlabError, match="CUDA graph"):
        GraphStep(lambda batch, cache: None, adamw(nn.Linear(2, 2)), torch.device("cpu"))


def test_learning_rates_in_tensors_are_filled_in_place_and_made_plain_again():
    opt = adamw(nn.Linear(3, 2))
    set_lr(opt, 0.5)  # a float group: assigned
    assert opt.param_groups[0]["lr"] == 0.5
    tensor_lr(opt, torch.device("cpu"))
    lr = opt.param_groups[0]["lr"]
    assert torch.is_tensor(lr) and lr.item() == 0.5 and opt.param_groups[0]["capturable"]
    set_lr(opt, 0.25)
    assert opt.param_groups[0]["lr"] is lr and lr.item() == 0.25  # the same tensor: a graph keeps reading it
    plain_lr(opt, torch.device("cpu"))
    assert opt.param_groups[0]["lr"] == 0.25 and isinstance(opt.param_groups[0]["lr"], float)
    assert opt.param_groups[0]["capturable"] is False  # a CPU cannot capture


def step_fn(model, opt):
    def compute(batch, cache):
        loss = F.cross_entropy(model(batch["x"]), batch["y"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return None, loss

    return compute


def batches(n, rows=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        {"x": torch.randn(rows, 6, generator=g).cuda(), "y": torch.randint(0, 3, (rows,), generator=g).cuda()}
        for _ in range(n)
    ]


@cuda
def test_the_replayed_step_trains_as_the_eager_step_does():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3)).cuda()
    twin = copy.deepcopy(model)
    opt, twin_opt = adamw(model, fused=True), adamw(twin, fused=True)
    graph = GraphStep(step_fn(model, opt), opt, torch.device("cuda"))
    graph.check()  # tensor learning rates, capturable groups
    plain = step_fn(twin, twin_opt)
    data = batches(12) + batches(1, rows=5, seed=1) + batches(3, seed=2)  # a short batch: eager in between
    for i, batch in enumerate(data):
        if i == 6:
            set_lr(opt, 5e-3)
            set_lr(twin_opt, 5e-3)
        _, loss = graph.step(batch)
        twin_opt.zero_grad(set_to_none=True)
        _, twin_loss = plain(batch, True)
        torch.testing.assert_close(loss, twin_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # 3 warm-ups, then the capture's replay and every full batch after it; the short batch eager
    assert graph.counts() == {"graph_replays": len(data) - WARMUP - 1, "graph_eager_steps": WARMUP + 1}


@cuda
def test_each_replay_draws_fresh_dropout():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 64), nn.Dropout(0.5), nn.Linear(64, 3)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-12, fused=True)  # weights all but still: the masks differ
    graph = GraphStep(step_fn(model, opt), opt, torch.device("cuda"))
    graph.check()
    batch = batches(1)[0]
    losses = [graph.step(batch)[1].item() for _ in range(WARMUP + 4)]
    assert len(set(losses[WARMUP:])) == 4, losses


@cuda
def test_a_reloaded_optimizer_state_is_captured_again():
    torch.manual_seed(0)
    model = nn.Linear(6, 3).cuda()
    opt = adamw(model, fused=True)
    graph = GraphStep(step_fn(model, opt), opt, torch.device("cuda"))
    graph.check()
    for batch in batches(WARMUP + 2):
        graph.step(batch)
    assert graph.graph is not None
    opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # what backtracking does: new state tensors
    graph.check()
    assert graph.graph is None and torch.is_tensor(opt.param_groups[0]["lr"])
    for batch in batches(WARMUP + 2, seed=3):
        graph.step(batch)
    assert graph.graph is not None


@cuda
def test_fit_in_graph_mode_matches_fit_compiled_and_resumes(tmp_path):
    train, val = synthetic(200, 0), synthetic(50, 1)  # 200 rows at batch 16: a short last batch each epoch
    base = {**CFG, "device": "cuda", "eval_every": 5, "warmup_steps": 4, "max_epochs": 3}
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("train_time_s", "train_samples_per_s")} for r in h]

    def model():  # tiny_model's shape without dropout: parity (graph and eager draw their masks differently)
        torch.manual_seed(0)
        return SwarmFormer(
            SwarmFormerConfig(
                vocab_size=50, d_model=16, num_layers=1, t_local=2, cluster_size=4, seq_len=16, dropout=0.0
            )
        )

    ref = fit(model(), IMDB, train, val, TrainConfig(**{**base, "compile": "default"}), tmp_path / "default")
    run = fit(model(), IMDB, train, val, TrainConfig(**{**base, "compile": "graph"}), tmp_path / "graph")
    assert run.extra["graph_replays"] > 0 and run.extra["graph_eager_steps"] >= WARMUP + 2  # + 2 short batches
    for a, b in zip(strip(run.history), strip(ref.history)):
        assert a["step"] == b["step"]
        assert a["val_loss"] == pytest.approx(b["val_loss"], rel=2e-3)
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=2e-3)

    class Crash(Exception):
        pass

    def crash_at_third(state):
        if state.evaluation == 3:
            raise Crash

    cfg = TrainConfig(**{**base, "compile": "graph"})
    with pytest.raises(Crash):
        fit(model(), IMDB, train, val, cfg, tmp_path / "resumed", callbacks=(crash_at_third,))
    resumed = fit(model(), IMDB, train, val, cfg, tmp_path / "resumed", resume=True)
    assert len(resumed.history) == len(run.history)
    for a, b in zip(strip(resumed.history), strip(run.history)):
        assert a["val_loss"] == pytest.approx(b["val_loss"], rel=2e-3)
