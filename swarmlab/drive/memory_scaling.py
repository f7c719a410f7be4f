"""The machinery of the stage `memory_scaling` (pipelines/memory_scaling.py): peak memory and time of one inference
forward pass versus sequence length N (paper 000, Figure 3).

For every model spec and every N in ``memory_scaling.tokens`` (params.yaml, profile-aware) a fresh
subprocess builds the model with ``seq_len=N``, runs one untimed warm-up forward on ``warmup_tokens``
tokens (loads kernels and thread pools, whose one-off allocations would otherwise count as the
forward's), returns freed memory to the OS (``malloc_trim``), then measures ONE forward of a batch of
``batch_size`` random sequences of N tokens in eval mode under ``torch.no_grad()``:

* CPU: ``baseline`` = VmRSS just before the forward, after resetting the peak (``/proc/self/clear_refs``
  = 5, Linux); ``peak`` = VmHWM after it; ``increment = peak - baseline`` is the memory the forward
  itself needs (activations and temporaries; the weights and the ~0.3 GB of Python + libtorch are in
  the baseline). Time: ``time.perf_counter`` around the forward; the median of ``time_repeats`` forwards.
* CUDA: ``baseline`` = ``torch.cuda.memory_allocated()`` (weights + inputs), ``peak`` =
  ``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats``; time from CUDA events.

The goals are checked against ``increment``. Points whose model would materialize an N^2 score matrix
larger than ``mem_cap_gb`` are not run: their predicted size is reported instead (status
``over_cap``). A point that exceeds ``timeout_s`` is killed and reported as ``timeout``; the longer
inputs of that model are then ``skipped`` (reported, not hidden). Per model, the growth exponents are
least-squares slopes of log(increment) and log(time) against log(N) over the ``ok`` points with
N >= ``fit_min_tokens`` (small-N memory is dominated by allocator granularity).

``write_outputs`` writes ``results.json`` (every point), ``metrics.json`` (exponents and goals), ``table.md`` and
``memory_scaling.png`` to one folder. A model spec is a registry name followed by ``key=value`` overrides (values
parsed as YAML). Each point's subprocess runs this module: ``python -m swarmlab.drive.memory_scaling <payload json>``.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from swarmlab.paths import REPO_ROOT, git_commit
from swarmlab import plots
from swarmlab.errors import SwarmlabError
from swarmlab.io import atomic_dir

GB = 1e9  # goals are in decimal GB, like the paper's "0.74 GB"
RESULT_PREFIX = "MEMORY_SCALING_RESULT "
CHILD_MODULE = "swarmlab.drive.memory_scaling"  # what each point's subprocess runs (child_main)


# ---- model specs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """A registry name plus config overrides, written ``"name key=value ..."``."""

    name: str
    overrides: tuple[tuple[str, object], ...] = ()

    @classmethod
    def parse(cls, text: str) -> "ModelSpec":
        parts = str(text).split()
        if not parts:
            raise SwarmlabError("memory_scaling: an empty model spec; write 'name key=value ...'")
        overrides = []
        for part in parts[1:]:
            key, sep, value = part.partition("=")
            if not sep or not key:
                raise SwarmlabError(f"memory_scaling: bad override {part!r} in {text!r}; write key=value")
            overrides.append((key, yaml.safe_load(value)))
        return cls(parts[0], tuple(overrides))

    @property
    def label(self) -> str:
        return " ".join([self.name, *(f"{k}={v}" for k, v in self.overrides)])


# ---- measurement (runs in the child process) --------------------------------------------------------


def _proc_status_bytes(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    """Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _trim_heap() -> None:
    """Give freed heap memory back to the OS, so the baseline RSS does not hold the warm-up's temporaries."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def predicted_quadratic_bytes(model, batch_size: int, tokens: int) -> int | None:
    """Bytes of the N^2-sized tensors alive at once in ``model``'s forward; None when it builds none.

    A model may state its own with ``predicted_attention_bytes(batch_size, seq_len)``: full attention with
    materialised scores (``transformer_dense``) keeps the scores and their softmax, 2*B*H*N^2 float32
    (models/transformer.py). Known here: the reference SwarmFormer (no ``fast`` path) keeps the same two
    (B, C, C) matrices, C = N / S.
    """
    own = getattr(model, "predicted_attention_bytes", None)
    if callable(own):
        return own(batch_size, tokens)
    cfg = model.cfg
    from models.swarmformer import SwarmFormer  # torch: heavy, and only the path that builds models needs it

    if isinstance(model, SwarmFormer) and not getattr(cfg, "fast", False):
        clusters = tokens // cfg.cluster_size
        return 2 * batch_size * clusters**2 * 4
    return None


def measure_point(payload: dict) -> dict:
    """One (model, N) point, in this process; see the module docstring for what is measured."""
    import torch  # torch: heavy, and only the path that builds models needs it

    import models

    spec = ModelSpec(payload["name"], tuple(map(tuple, payload["overrides"])))
    N, B = payload["tokens"], payload["batch_size"]
    if payload["num_threads"] > 0:
        torch.set_num_threads(payload["num_threads"])
    device = torch.device(payload["device"])
    torch.manual_seed(0)
    model = models.create_model(spec.name, **dict(spec.overrides), seq_len=N).eval().to(device)
    out = {
        "threads": torch.get_num_threads(),
        "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
    }
    predicted = predicted_quadratic_bytes(model, B, N)
    out["predicted_bytes"] = predicted
    if predicted is not None and predicted > payload["mem_cap_bytes"]:
        return {
            **out,
            "status": "over_cap",
            "message": f"predicted {_fmt_bytes(predicted)} of N^2 tensors > cap {_fmt_bytes(payload['mem_cap_bytes'])}",
        }
    vocab = model.cfg.vocab_size
    ids = torch.randint(1, vocab, (B, N), device=device)
    times = []
    with torch.no_grad():
        warm = min(payload["warmup_tokens"], N)
        if warm > 0:
            model(ids[:, :warm])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            baseline = torch.cuda.memory_allocated(device)
            for r in range(payload["time_repeats"]):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(ids)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
                if r == 0:
                    peak = torch.cuda.max_memory_allocated(device)
            measure, hwm_reset = "cuda_max_memory_allocated", True
        else:
            _trim_heap()
            hwm_reset = _reset_peak_rss()
            baseline = _proc_status_bytes("VmRSS")
            for r in range(payload["time_repeats"]):
                t0 = time.perf_counter()
                model(ids)
                times.append(time.perf_counter() - t0)
                if r == 0:
                    peak = _proc_status_bytes("VmHWM")
            measure = "process_rss_vmhwm"
    if baseline is None or peak is None:
        return {**out, "status": "error", "message": "/proc/self/status is not readable: RSS needs Linux"}
    return {
        **out,
        "status": "ok",
        "memory_measure": measure,
        "peak_reset": hwm_reset,
        "baseline_bytes": baseline,
        "peak_bytes": peak,
        "increment_bytes": peak - baseline,
        "time_s": statistics.median(times),
        "times_s": times,
    }


def child_main(payload_json: str) -> None:
    """A point's subprocess: measure the point of ``payload_json`` and print it on one ``RESULT_PREFIX`` line."""
    result = measure_point(json.loads(payload_json))
    print(RESULT_PREFIX + json.dumps(result), flush=True)


# ---- orchestration (parent process) ----------------------------------------------------------------


def _run_child(spec: ModelSpec, tokens: int, cfg: dict) -> dict:
    payload = dict(
        name=spec.name,
        overrides=[list(kv) for kv in spec.overrides],
        tokens=tokens,
        batch_size=cfg["batch_size"],
        warmup_tokens=cfg["warmup_tokens"],
        time_repeats=cfg["time_repeats"],
        mem_cap_bytes=int(cfg["mem_cap_gb"] * GB),
        device=cfg["device"],
        num_threads=cfg["num_threads"],
    )
    cmd = [sys.executable, "-m", CHILD_MODULE, json.dumps(payload)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=cfg["timeout_s"])
    except subprocess.TimeoutExpired:
        return {
            "status": "timeout",
            "message": f"no result within {cfg['timeout_s']:g} s (killed)",
            "child_wall_s": time.perf_counter() - t0,
        }
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        why = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        return {"status": "error", "message": f"{why}: {tail}"[:500], "child_wall_s": wall}
    return {**json.loads(lines[-1][len(RESULT_PREFIX) :]), "child_wall_s": wall}


def fit_exponent(tokens: list[int], values: list[float]) -> float | None:
    """Least-squares slope of log(value) against log(tokens); None with fewer than 2 distinct N."""
    pairs = [(math.log(n), math.log(v)) for n, v in zip(tokens, values) if v is not None and v > 0]
    if len({x for x, _ in pairs}) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sum((x - mx) ** 2 for x, _ in pairs)


def fits(points: list[dict], labels: list[str], fit_min_tokens: int) -> dict:
    out = {}
    for label in labels:
        ok = [p for p in points if p["model"] == label and p["status"] == "ok" and p["tokens"] >= fit_min_tokens]
        ns = [p["tokens"] for p in ok]
        out[label] = {
            "memory_exponent": fit_exponent(ns, [p["increment_bytes"] for p in ok]),
            "time_exponent": fit_exponent(ns, [p["time_s"] for p in ok]),
            "fit_points": len(ok),
        }
    return out


def _point(points: list[dict], label: str, tokens: int) -> dict | None:
    return next((p for p in points if p["model"] == label and p["tokens"] == tokens), None)


def check_goals(points: list[dict], goals: dict) -> dict:
    """The two targets: memory of ``goals.model`` at ``memory_tokens``; its speed-up over ``speed_baseline``."""
    label = ModelSpec.parse(goals["model"]).label
    baseline_label = ModelSpec.parse(goals["speed_baseline"]).label
    mem = {
        "model": label,
        "tokens": goals["memory_tokens"],
        "limit_gb": goals["memory_gb"],
        "paper_reported_gb": goals["paper_memory_gb"],
        "measure": "increment_bytes (peak minus baseline)",
    }
    p = _point(points, label, goals["memory_tokens"])
    if p is None or p["status"] != "ok":
        mem.update(measured_gb=None, met=None, note="not measured" if p is None else f"point status {p['status']}")
    else:
        mem.update(measured_gb=p["increment_bytes"] / GB, met=p["increment_bytes"] / GB <= goals["memory_gb"])
    speed = {
        "model": label,
        "baseline": baseline_label,
        "tokens": goals["speed_tokens"],
        "min_ratio": goals["speed_ratio"],
    }
    a, b = _point(points, label, goals["speed_tokens"]), _point(points, baseline_label, goals["speed_tokens"])
    if a is None or b is None or a["status"] != "ok" or b["status"] != "ok":
        missing = [x for x, pt in ((label, a), (baseline_label, b)) if pt is None or pt["status"] != "ok"]
        speed.update(ratio=None, met=None, note=f"no ok point for {missing}")
    else:
        ratio = b["time_s"] / a["time_s"]
        speed.update(
            model_time_s=a["time_s"], baseline_time_s=b["time_s"], ratio=ratio, met=ratio >= goals["speed_ratio"]
        )
    return {"memory": mem, "speed": speed, "baselines": baseline_comparison(points, goals, goals["memory_tokens"])}


def point_memory(p: dict | None) -> tuple[int | None, str | None]:
    """(bytes, "measured" | "predicted") of a point: its measured increment, else the predicted size of its N^2
    tensors (a lower bound of what it would need: the rest of the forward is not counted); (None, None) if neither."""
    if p is None:
        return None, None
    if p["status"] == "ok":
        return p["increment_bytes"], "measured"
    if p.get("predicted_bytes") is not None:
        return p["predicted_bytes"], "predicted"
    return None, None


def baseline_comparison(points: list[dict], goals: dict, tokens: int) -> dict:
    """Memory of every ``goals.memory_baselines`` model against ``goals.model`` at ``tokens``, each measured or
    predicted (marked), as a ratio baseline / model; beside the paper's own ratio (its full attention over its
    SwarmFormer at 100k tokens)."""
    label = ModelSpec.parse(goals["model"]).label
    model_bytes, model_kind = point_memory(_point(points, label, tokens))
    rows = []
    for spec in goals.get("memory_baselines", []):
        base = ModelSpec.parse(spec).label
        b, kind = point_memory(_point(points, base, tokens))
        rows.append(
            {
                "baseline": base,
                "gb": b / GB if b is not None else None,
                "kind": kind,
                "ratio": b / model_bytes if b is not None and model_bytes else None,
            }
        )
    paper_base, paper_model = goals.get("paper_baseline_memory_gb"), goals.get("paper_memory_gb")
    return {
        "model": label,
        "tokens": tokens,
        "model_gb": model_bytes / GB if model_bytes is not None else None,
        "model_kind": model_kind,
        "baselines": rows,
        "paper_baseline_gb": paper_base,
        "paper_model_gb": paper_model,
        "paper_ratio": paper_base / paper_model if paper_base and paper_model else None,
    }


def validate(cfg: dict) -> list[ModelSpec]:
    """Fail before measuring anything: unknown models, bad overrides, lengths a model cannot take."""
    import models  # torch: heavy, and only the path that builds models needs it

    specs = [ModelSpec.parse(s) for s in cfg["models"]]
    registered = set(models.list_models(kind="text"))
    unknown = [s.name for s in specs if s.name not in registered]
    if unknown:
        raise SwarmlabError(
            f"memory_scaling: model(s) {unknown} not registered (text models: {', '.join(sorted(registered))}); "
            f"fix memory_scaling.models in params.yaml or pass --models"
        )
    if len({s.label for s in specs}) != len(specs):
        raise SwarmlabError("memory_scaling: a model spec is listed twice")
    tokens = cfg["tokens"]
    if not tokens or any(not isinstance(n, int) or n < 1 for n in tokens):
        raise SwarmlabError(f"memory_scaling.tokens must be positive ints, got {tokens!r}")
    if cfg["device"] not in ("cpu", "cuda"):
        raise SwarmlabError(f"memory_scaling.device must be cpu, cuda or auto, got {cfg['device']!r}")
    if cfg["time_repeats"] < 1 or cfg["batch_size"] < 1 or cfg["timeout_s"] <= 0:
        raise SwarmlabError("memory_scaling: time_repeats and batch_size must be >= 1 and timeout_s > 0")
    for spec in specs:  # build tiny-vocabulary copies: cheap, and catches bad overrides and divisibility
        for n in sorted(set(tokens)):
            try:
                models.create_model(spec.name, **dict(spec.overrides), seq_len=n, vocab_size=8)
            except (TypeError, ValueError) as exc:
                raise SwarmlabError(f"memory_scaling: {spec.label!r} cannot be built with seq_len={n}: {exc}") from None
    return specs


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch  # torch: heavy, and only the path that builds models needs it

    return "cuda" if torch.cuda.is_available() else "cpu"


def run_benchmark(cfg: dict, *, log=print) -> dict:
    """Measure every (model, N) point of ``cfg`` (the ``memory_scaling`` params) in its own subprocess."""
    cfg = {**cfg, "device": _resolve_device(cfg["device"])}
    specs = validate(cfg)
    tokens = sorted(set(cfg["tokens"]))
    started = dt.datetime.now(dt.timezone.utc)
    load_start = os.getloadavg()
    points = []
    for spec in specs:
        stop_reason = None
        for n in tokens:
            if stop_reason:
                result = {"status": "skipped", "message": stop_reason}
            else:
                result = _run_child(spec, n, cfg)
                if result["status"] in ("timeout", "error"):
                    stop_reason = f"not run: N={n} ended with {result['status']}"
            point = {"model": spec.label, "name": spec.name, "overrides": dict(spec.overrides), "tokens": n, **result}
            points.append(point)
            log(_describe(point), flush=True)
    labels = [s.label for s in specs]
    return {
        "config": cfg,
        "environment": _environment(cfg, started, load_start),
        "points": points,
        "fits": fits(points, labels, cfg["fit_min_tokens"]),
        "goals": check_goals(points, cfg["goals"]),
    }


def _environment(cfg: dict, started, load_start) -> dict:
    import torch  # torch: heavy, and only the path that builds models needs it

    env = {
        "date_utc": started.isoformat(timespec="seconds"),
        "duration_s": round((dt.datetime.now(dt.timezone.utc) - started).total_seconds(), 1),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "device": cfg["device"],
    }
    if cfg["device"] == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def _fmt_bytes(b: float | None) -> str:
    if b is None:
        return "-"
    return f"{b / 1e6:.1f} MB" if b < 1e9 else f"{b / 1e9:.2f} GB"


def _describe(p: dict) -> str:
    head = f"{p['model']:<40} N={p['tokens']:>7}  "
    if p["status"] == "ok":
        return (
            head
            + f"increment {_fmt_bytes(p['increment_bytes']):>10}  peak {_fmt_bytes(p['peak_bytes']):>10}  time {p['time_s']:.3f} s"
        )
    return head + f"{p['status']}: {p.get('message', '')}"


def _cell(p: dict | None, timeout_s: float) -> str:
    if p is None:
        return ""
    if p["status"] == "ok":
        return f"{_fmt_bytes(p['increment_bytes'])} / {p['time_s']:.3g} s"
    if p["status"] == "over_cap":
        return f"not run (predicted {_fmt_bytes(p['predicted_bytes'])})"
    if p["status"] == "timeout":
        return f"timeout (> {timeout_s:g} s)"
    return p["status"]


def markdown_table(result: dict) -> str:
    """Model x N: memory increment / time of one forward; then the fitted exponents."""
    points, cfg = result["points"], result["config"]
    tokens = sorted({p["tokens"] for p in points})
    labels = list(dict.fromkeys(p["model"] for p in points))
    head = "| model | " + " | ".join(f"N={n}" for n in tokens) + " | mem. exponent | time exponent |"
    lines = [head, "|" + "---|" * (len(tokens) + 3)]
    for label in labels:
        f = result["fits"][label]
        exps = [f"{f[k]:.2f}" if f[k] is not None else "-" for k in ("memory_exponent", "time_exponent")]
        cells = [_cell(_point(points, label, n), cfg["timeout_s"]) for n in tokens]
        lines.append(f"| {label} | " + " | ".join(cells + exps) + " |")
    return "\n".join(lines) + "\n" + baselines_table(result)


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.1f}x" if r < 10 else f"{r:.0f}x"


def _mem_cell(gb: float | None, kind: str | None) -> str:
    if gb is None:
        return "-"
    text = _fmt_bytes(gb * GB)
    return text if kind == "measured" else f">= {text} (predicted, not run)"


def baselines_table(result: dict) -> str:
    """Full-attention baselines against ``goals.model`` at every N: memory (measured or predicted) and the ratio."""
    goals = result["config"]["goals"]
    if not goals.get("memory_baselines"):
        return ""
    tokens = sorted({p["tokens"] for p in result["points"]})
    rows = [baseline_comparison(result["points"], goals, n) for n in tokens]
    names = [r["baseline"] for r in rows[0]["baselines"]]
    head = f"| N | {rows[0]['model']} | " + " | ".join(f"{n} | ratio" for n in names) + " |"
    lines = [
        "",
        f"Full attention against {rows[0]['model']}: forward memory increment, measured where run, else the "
        "predicted size of the N^2 tensors (a lower bound); ratio = baseline / SwarmFormer.",
        "",
        head,
        "|---:|" + "---:|" * (1 + 2 * len(names)),
    ]
    for r in rows:
        cells = [_mem_cell(r["model_gb"], r["model_kind"])]
        for b in r["baselines"]:
            cells += [_mem_cell(b["gb"], b["kind"]), _ratio(b["ratio"])]
        lines.append(f"| {r['tokens']} | " + " | ".join(cells) + " |")
    if rows[0]["paper_ratio"] is not None:
        lines.append(
            f"\nPaper 000 at N=100000: full attention {rows[0]['paper_baseline_gb']} GB / SwarmFormer "
            f"{rows[0]['paper_model_gb']} GB = {rows[0]['paper_ratio']:.0f}x."
        )
    return "\n".join(lines) + "\n"


def goals_text(goals: dict) -> str:
    m, s = goals["memory"], goals["speed"]
    verdict = {True: "met", False: "NOT met", None: "not measured"}
    mem = (
        f"memory: {m['model']} at N={m['tokens']}: increment "
        + (f"{m['measured_gb']:.3f} GB" if m["measured_gb"] is not None else "-")
        + f" vs goal <= {m['limit_gb']} GB (paper 000 reports {m['paper_reported_gb']} GB): {verdict[m['met']]}"
    )
    spd = (
        f"speed: {s['baseline']} / {s['model']} at N={s['tokens']}: "
        + (f"{s['ratio']:.1f}x" if s["ratio"] is not None else "-")
        + f" vs goal >= {s['min_ratio']}x: {verdict[s['met']]}"
    )
    lines = [mem, spd]
    c = goals.get("baselines") or {}
    for b in c.get("baselines", []):
        lines.append(
            f"memory vs full attention at N={c['tokens']}: {b['baseline']} {_mem_cell(b['gb'], b['kind'])} / "
            f"{c['model']} {_mem_cell(c['model_gb'], c['model_kind'])} = "
            + _ratio(b["ratio"])
            + (
                f" (paper 000: {c['paper_baseline_gb']} / {c['paper_model_gb']} GB = {c['paper_ratio']:.0f}x)"
                if c.get("paper_ratio")
                else ""
            )
        )
    return "\n".join(lines) + "\n"


def write_outputs(result: dict, out_dir: Path) -> None:
    metrics = {**result["fits"], "goals": result["goals"]}
    with atomic_dir(out_dir) as tmp:
        (tmp / "results.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        (tmp / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
        (tmp / "table.md").write_text(markdown_table(result) + "\n" + goals_text(result["goals"]), encoding="utf-8")
        plots.memory_scaling(result, tmp / "memory_scaling.png")


if __name__ == "__main__":  # a point's subprocess (run_benchmark)
    child_main(sys.argv[1])
