"""The memory_scaling stage (pipelines/memory_scaling.py, its machinery in swarmlab/drive/memory_scaling.py): spec
parsing, fits, predictions, goals, errors, and a tiny end-to-end run.

Nothing here asserts a speed or a memory size: those are measured by the script and read by people.
"""

from __future__ import annotations

import json
import math

import pytest

import models
from pipelines import memory_scaling as stage
from swarmlab.drive import memory_scaling as ms
from swarmlab.drive.params import load_params, validate_all
from swarmlab.errors import SwarmlabError


def _cfg(**changes) -> dict:
    cfg = load_params(profile="smoke")["memory_scaling"]
    return {**cfg, **changes}


def test_spec_parsing_and_labels():
    spec = ms.ModelSpec.parse("swarmformer_small  cluster_size=8 fast=true name=x")
    assert spec.name == "swarmformer_small"
    assert dict(spec.overrides) == {"cluster_size": 8, "fast": True, "name": "x"}
    assert spec.label == "swarmformer_small cluster_size=8 fast=True name=x"
    assert ms.ModelSpec.parse("transformer").overrides == ()
    with pytest.raises(SwarmlabError, match="key=value"):
        ms.ModelSpec.parse("transformer cluster_size")


def test_fit_exponent_recovers_a_power_law():
    ns = [1024, 4096, 16384, 65536]
    assert ms.fit_exponent(ns, [3.0 * n**1.5 for n in ns]) == pytest.approx(1.5)
    assert ms.fit_exponent(ns, [7.0 * n**2 for n in ns]) == pytest.approx(2.0)
    assert ms.fit_exponent([1024], [5.0]) is None  # one point: no slope
    assert ms.fit_exponent(ns, [0.0, 4.0, 16.0, None]) == pytest.approx(1.0)  # non-positive / missing dropped


def test_fits_use_only_ok_points_above_the_threshold():
    pts = [dict(model="m", tokens=n, status="ok", increment_bytes=n**2, time_s=float(n)) for n in (256, 1024, 4096)]
    pts.append(dict(model="m", tokens=16384, status="timeout"))
    pts[0]["increment_bytes"] = 10**9  # an outlier below fit_min_tokens: must not count
    f = ms.fits(pts, ["m"], fit_min_tokens=1024)["m"]
    assert f["fit_points"] == 2
    assert f["memory_exponent"] == pytest.approx(2.0) and f["time_exponent"] == pytest.approx(1.0)


@pytest.mark.parametrize("N", [1024, 4096])
def test_predicted_quadratic_bytes(N):
    dense = models.create_model("transformer_dense", seq_len=N, vocab_size=8)
    assert ms.predicted_quadratic_bytes(dense, 2, N) == 2 * 2 * 4 * N * N * 4  # scores + softmax, B=2, H=4, fp32
    heads8 = models.create_model("transformer", attn_impl="dense", num_heads=8, seq_len=N, vocab_size=8)
    assert ms.predicted_quadratic_bytes(heads8, 1, N) == 2 * 8 * N * N * 4
    sf = models.create_model("swarmformer_small", cluster_size=4, seq_len=N, vocab_size=8, fast=False)
    assert ms.predicted_quadratic_bytes(sf, 1, N) == 2 * (N // 4) ** 2 * 4
    fast = models.create_model("swarmformer_small", cluster_size=4, seq_len=N, vocab_size=8)  # SDPA: no C x C kept
    assert ms.predicted_quadratic_bytes(fast, 1, N) is None
    for name in ("transformer", "linear_transformer", "sparse_transformer", "longformer"):
        assert ms.predicted_quadratic_bytes(models.create_model(name, seq_len=N, vocab_size=8), 1, N) is None


def test_goals_are_checked_against_the_configured_points():
    goals = _cfg()["goals"]
    label, base = ms.ModelSpec.parse(goals["model"]).label, goals["speed_baseline"]
    pts = [
        dict(model=label, tokens=goals["memory_tokens"], status="ok", increment_bytes=0.2e9, time_s=1.0),
        dict(model=label, tokens=goals["speed_tokens"], status="ok", increment_bytes=1, time_s=0.5),
        dict(model=base, tokens=goals["speed_tokens"], status="ok", increment_bytes=1, time_s=4.0),
    ]
    g = ms.check_goals(pts, goals)
    assert g["memory"]["measured_gb"] == pytest.approx(0.2) and g["memory"]["met"] is True
    assert g["speed"]["ratio"] == pytest.approx(8.0) and g["speed"]["met"] is False
    pts[2]["status"] = "timeout"
    assert ms.check_goals(pts, goals)["speed"]["met"] is None
    assert ms.check_goals([], goals)["memory"]["met"] is None


def test_both_full_attention_baselines_are_compared_with_swarmformer():
    goals = _cfg()["goals"]
    label = ms.ModelSpec.parse(goals["model"]).label
    assert goals["memory_baselines"] == ["transformer", "transformer_dense"]
    n = goals["memory_tokens"]
    pts = [
        dict(model=label, tokens=n, status="ok", increment_bytes=0.25e9, predicted_bytes=None),
        dict(model="transformer", tokens=n, status="ok", increment_bytes=0.5e9, predicted_bytes=None),
        dict(model="transformer_dense", tokens=n, status="over_cap", predicted_bytes=320e9),
    ]
    c = ms.check_goals(pts, goals)["baselines"]
    assert c["model_gb"] == pytest.approx(0.25) and c["model_kind"] == "measured"
    sdpa, dense = c["baselines"]
    assert (sdpa["kind"], sdpa["gb"], sdpa["ratio"]) == ("measured", pytest.approx(0.5), pytest.approx(2.0))
    assert (dense["kind"], dense["gb"], dense["ratio"]) == ("predicted", pytest.approx(320.0), pytest.approx(1280.0))
    assert c["paper_ratio"] == pytest.approx(37.37 / 0.74)
    text = ms.goals_text(ms.check_goals(pts, goals))
    assert "transformer_dense >= 320.00 GB (predicted, not run)" in text and "= 1280x" in text
    pts[2]["status"] = "timeout"  # neither measured nor predicted: no ratio, not a crash
    pts[2]["predicted_bytes"] = None
    assert ms.check_goals(pts, goals)["baselines"]["baselines"][1]["ratio"] is None


def test_dense_attention_memory_is_what_is_predicted():
    """The materialised path's increment is its predicted 2 x (B, H, N, N) float32 (plus small activations); the
    SDPA path of the same model keeps no N x N matrix at all."""
    tiny = [["d_model", 32], ["num_layers", 1], ["vocab_size", 64]]
    payload = dict(
        name="transformer_dense",
        overrides=tiny,
        tokens=2048,
        batch_size=1,
        warmup_tokens=64,
        time_repeats=1,
        mem_cap_bytes=10**10,
        device="cpu",
        num_threads=0,
    )
    dense = ms.measure_point(payload)
    sdpa = ms.measure_point({**payload, "name": "transformer"})
    assert dense["status"] == sdpa["status"] == "ok"
    assert dense["predicted_bytes"] == 2 * 4 * 2048**2 * 4 and sdpa["predicted_bytes"] is None
    assert 0.9 * dense["predicted_bytes"] < dense["increment_bytes"] < 1.5 * dense["predicted_bytes"]
    assert sdpa["increment_bytes"] < 0.1 * dense["predicted_bytes"], sdpa["increment_bytes"]


def test_unknown_model_is_a_clear_error():
    with pytest.raises(SwarmlabError, match=r"\['not_a_model'\] not registered"):
        ms.validate(_cfg(models=["transformer", "not_a_model"]))


def test_lengths_a_model_cannot_take_are_rejected_before_measuring():
    with pytest.raises(SwarmlabError, match="cannot be built with seq_len=1000"):
        ms.validate(_cfg(models=["swarmformer_small cluster_size=16"], tokens=[1024, 1000]))
    with pytest.raises(SwarmlabError, match="cannot be built"):
        ms.validate(_cfg(models=["transformer windw=3"]))


def test_cli_reports_unregistered_models_without_traceback(capsys):
    with pytest.raises(SystemExit) as exc:
        stage.main(["--profile", "smoke", "--models", "swarmformer_enhanced_nope"])
    assert exc.value.code == 2
    assert "not registered" in capsys.readouterr().err


def test_params_profiles():
    assert "smoke" in validate_all()
    smoke = load_params(profile="smoke")["memory_scaling"]
    assert max(smoke["tokens"]) <= 1024, "the smoke profile must stay fast"
    cpu = load_params(profile="cpu")["memory_scaling"]
    assert cpu["tokens"] == [1024, 4096, 16384, 65536, 100000]
    assert {
        "transformer",
        "transformer_dense",
        "linear_transformer",
        "sparse_transformer",
        "longformer",
        "swarmformer_small cluster_size=8",
        "swarmformer_enhanced_small",
    } <= set(cpu["models"])


@pytest.mark.slow
def test_every_registered_cpu_profile_model_takes_every_cpu_length():
    cpu = load_params(profile="cpu")["memory_scaling"]
    registered = set(models.list_models())
    specs = ms.validate({**cpu, "models": [m for m in cpu["models"] if m.split()[0] in registered]})
    assert len(specs) >= 8


def test_measure_point_in_process():
    payload = dict(
        name="linear_transformer",
        overrides=[["d_model", 32]],
        tokens=256,
        batch_size=1,
        warmup_tokens=64,
        time_repeats=3,
        mem_cap_bytes=10**9,
        device="cpu",
        num_threads=0,
    )
    r = ms.measure_point(payload)
    assert r["status"] == "ok" and r["memory_measure"] == "process_rss_vmhwm"
    assert r["peak_bytes"] >= r["baseline_bytes"] > 0
    assert r["increment_bytes"] == r["peak_bytes"] - r["baseline_bytes"]
    assert len(r["times_s"]) == 3 and r["time_s"] == sorted(r["times_s"])[1] > 0  # the median of the repeats
    capped = ms.measure_point({**payload, "name": "transformer_dense", "overrides": [], "mem_cap_bytes": 1000})
    assert capped["status"] == "over_cap" and capped["predicted_bytes"] == 2 * 4 * 256**2 * 4


def test_fast_cluster_attention_memory_is_linear_in_the_cluster_count():
    """The fast path must reach SDPA's flash kernel: at C = 8192 clusters, (C, C) fp32 scores are 256 MiB each.

    (3-D query/key/value silently take the math kernel, which materializes them: the fast path's first version.)
    """
    tiny = [["cluster_size", 2], ["d_model", 32], ["num_layers", 1], ["t_local", 1], ["vocab_size", 64]]
    payload = dict(
        name="swarmformer_small",
        overrides=tiny,
        tokens=16384,
        batch_size=1,
        warmup_tokens=64,
        time_repeats=1,
        mem_cap_bytes=10**10,
        device="cpu",
        num_threads=0,
    )
    fast = ms.measure_point(payload)
    reference = ms.measure_point({**payload, "overrides": tiny + [["fast", False]]})
    assert fast["status"] == reference["status"] == "ok"
    assert reference["increment_bytes"] > 2 * 8192**2 * 4 * 0.9  # scores and softmax, as predicted
    assert fast["increment_bytes"] < 64 * 2**20, fast["increment_bytes"]


@pytest.mark.slow
def test_end_to_end_on_tiny_lengths(tmp_path, capsys):
    out = tmp_path / "ms"
    stage.main(
        [
            "--profile",
            "smoke",
            "--out",
            str(out),
            "--tokens",
            "256",
            "512",
            "--mem-cap-gb",
            "0.003",
            "--models",
            "swarmformer_small cluster_size=8",
            "transformer",
            "transformer_dense",
        ]
    )
    result = json.loads((out / "results.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert (out / "memory_scaling.png").stat().st_size > 10_000
    table = (out / "table.md").read_text()
    by = {(p["model"], p["tokens"]): p for p in result["points"]}
    assert len(by) == 6
    # dense at 512: 2*4*512^2*4 B = 8.4 MB > 3 MB cap -> reported with its prediction, not run; at 256 it runs
    assert by[("transformer_dense", 512)]["status"] == "over_cap"
    assert by[("transformer_dense", 256)]["status"] == "ok"
    assert "not run (predicted 8.4 MB)" in table
    assert "| 512 |" in table and ">= 8.4 MB (predicted, not run)" in table  # the baselines table marks predictions
    assert [b["baseline"] for b in metrics["goals"]["baselines"]["baselines"]] == ["transformer", "transformer_dense"]
    for label in ("swarmformer_small cluster_size=8", "transformer"):
        assert all(by[(label, n)]["status"] == "ok" for n in (256, 512))
        assert math.isfinite(metrics[label]["time_exponent"])
        assert by[(label, 512)]["peak_bytes"] >= by[(label, 512)]["baseline_bytes"]
    assert metrics["goals"]["memory"]["met"] is None  # 100k tokens were not measured
    assert result["environment"]["git_commit"]
    assert "| transformer |" in capsys.readouterr().out
    from mlflow.tracking import MlflowClient  # one MLflow run: N is the step of each curve (#38)

    client = MlflowClient()
    (run,) = client.search_runs([client.get_experiment_by_name("memory_scaling").experiment_id])
    assert run.info.run_name == "memory_scaling | smoke" and run.info.status == "FINISHED"
    curve = client.get_metric_history(run.info.run_id, "increment_mb/transformer")
    assert sorted(m.step for m in curve) == [256, 512]
    assert math.isfinite(run.data.metrics["time_exponent/swarmformer_small cluster_size_8"])
    logged = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"results.json", "metrics.json", "table.md", "memory_scaling.png"} <= logged


@pytest.mark.slow
def test_timeouts_are_reported_and_later_lengths_skipped():
    # 0.5 s is less than a child needs to import torch: the first point must time out.
    result = ms.run_benchmark(
        _cfg(models=["linear_transformer"], tokens=[256, 512], timeout_s=0.5), log=lambda *a, **k: None
    )
    statuses = [p["status"] for p in result["points"]]
    assert statuses == ["timeout", "skipped"]
    assert result["fits"]["linear_transformer"]["memory_exponent"] is None
    assert "timeout (> 0.5 s)" in ms.markdown_table(result)


def test_measure_point_reports_the_median_of_its_repeats(monkeypatch):
    # A fake clock: the three timed forwards take 5 s, 1 s and 3 s; the first is not the median.
    ticks = iter([0.0, 5.0, 10.0, 11.0, 20.0, 23.0])
    monkeypatch.setattr(ms.time, "perf_counter", lambda: next(ticks))
    payload = dict(
        name="linear_transformer",
        overrides=[["d_model", 16]],
        tokens=64,
        batch_size=1,
        warmup_tokens=0,
        time_repeats=3,
        mem_cap_bytes=10**9,
        device="cpu",
        num_threads=0,
    )
    r = ms.measure_point(payload)
    assert r["times_s"] == [5.0, 1.0, 3.0] and r["time_s"] == 3.0
