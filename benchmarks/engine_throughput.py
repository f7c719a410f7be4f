"""Training throughput of SwarmFormer-Small three ways, in one process run: the authors' loop, our bare
model step, and the engine's ``fit`` (each ``train.compile`` mode asked for).

* **authors' loop**: the structure of takara-ai/SwarmFormer ``swarmformer_binary_classification.py``
  (``train_SwarmFormer_model``) around their model (``swarmlab/testing/reference_swarmformer.py``): a ``DataLoader``
  (shuffle; 4 workers and pinned memory on CUDA, none on CPU where they would take the cores the step needs),
  ``autocast`` (fp16 + ``GradScaler`` on CUDA as theirs; off on CPU, where autocast would emulate bf16),
  ``clip_grad_norm_(1.0)``, AdamW over all parameters, and per step ``loss.item()`` plus a memory reading
  (their ``get_memory_usage``: process RSS and ``max_memory_allocated``).
* **bare step**: ``create_model("swarmformer_small")`` (fast path) on batches already on the device:
  forward, cross-entropy, zero_grad, backward, clip, AdamW; nothing else. The floor ``fit`` is held to.
  ``--bare-compile MODE``: the same with the model under ``torch.compile`` as ``fit`` compiles it (the loss,
  clipping and AdamW eager), the floor of ``fit`` in that mode. ``--profile MODE``: after the table, the bare step
  in that mode under ``torch.profiler``: host time by op, kernel launches and CUDA graph replays a step.
* **fit**: ``swarmlab.engine.fit`` on a tokenized split in memory, timed by its own net-training
  clock over the second stretch of ``--steps`` steps (the first one pays for compilation and warm-up).
* **evaluate** (``--eval-rows N``, 0 = off): the evaluate stage's own measurement
  (``swarmlab.drive.evaluation.measure``: eval mode, no grad, each batch of ``--eval-batch``, the amp of the other
  rows) over N synthetic reviews; its throughput (on CUDA the unsynchronised second pass). The stage runs eager;
  ``--eval-compile`` adds rows with the model compiled, what compiling the stage would give. Printed apart.

Data: random token ids (vocabulary 30,522, L=256, batch 48: the paper profile's shapes). Samples/s are
medians over ``--rounds`` rounds, interleaved (authors, bare, fit, authors, ...) so that a noisy, shared
machine slows every row alike; the ratios are of medians from this one run.

    python benchmarks/engine_throughput.py [--device cpu|cuda|auto] [--steps 8] [--rounds 3]
                                           [--compile eager,default,reduce-overhead] [--threads 0]
                                           [--eval-rows 0] [--eval-batch 256[,1024]] [--eval-compile eager[,...]]
                                           [--bare-compile MODE[,...]] [--profile MODE] [--profile-steps 20]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector

from models import create_model
from swarmlab.engine import TrainConfig, autocast, compiled, fit, make_optimizer, sync
from swarmlab.engine.graphstep import WARMUP, GraphStep
from swarmlab.machine import describe_cpu
from swarmlab.testing.reference_swarmformer import AuthorsSwarmFormer
from tasks import get_task
from tasks.text_data import TokenizedTextDataset

VOCAB, L, B = 30522, 256, 48
AUTHORS = "authors' loop"


def synthetic(n: int, seed: int) -> TokenizedTextDataset:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, VOCAB, (n, L), generator=g, dtype=torch.int32)
    return TokenizedTextDataset(ids, torch.full((n,), L), torch.randint(0, 2, (n,), generator=g))


def authors_loop(data: TokenizedTextDataset, steps: int, device: torch.device) -> float:
    """Samples/s of their loop over ``steps`` batches (after 2 untimed ones)."""
    torch.manual_seed(0)
    model = AuthorsSwarmFormer(VOCAB, 128, 2, 3, 8, 0.4).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=4.74e-4, weight_decay=0.0381)
    cuda = device.type == "cuda"
    scaler = torch.amp.GradScaler(enabled=cuda)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(data.input_ids.long(), data.labels),
        batch_size=B,
        shuffle=True,
        num_workers=4 if cuda else 0,
        pin_memory=cuda,
    )
    model.train()
    done, t0 = 0, None
    for i, (x, y) in enumerate(loader):
        if i == 2:
            sync(device)
            t0 = time.perf_counter()
        if i == steps + 2:
            break
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=cuda):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()
        _ = loss.item()  # train_loss += loss.item()
        _ = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, (torch.cuda.max_memory_allocated() if cuda else 0)
        done += len(y) if i >= 2 else 0
    sync(device)
    return done / (time.perf_counter() - t0)


def bare_step(
    data: TokenizedTextDataset, steps: int, device: torch.device, cfg: TrainConfig, profile_steps: int = 0
) -> float:
    """Samples/s of the model's train step alone on batches prepared beforehand on the device; the model run as
    ``cfg.compile`` asks (``torch.compile`` of the model only, as ``fit`` does: the loss, clipping and AdamW stay
    eager). ``profile_steps`` > 0: after the timed steps, that many more under ``torch.profiler``, whose tables
    (host time by op; kernel launches and graph replays a step) are printed."""
    torch.manual_seed(0)
    model = create_model("swarmformer_small").to(device).train()
    drift_row = cfg.compile == "eager" and not profile_steps and device.type == "cuda"
    start = flat(model) if drift_row else None
    net = compiled(model, cfg.compile)
    optimizer = make_optimizer(model, cfg, device)
    warm = 2 if cfg.compile == "eager" else 6  # compilation, then CUDA graph trees record on the second/third call
    batches = device_batches(data, device, steps + warm + profile_steps)

    def step(batch):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.amp == "bf16"):
            loss = F.cross_entropy(net(batch["input_ids"], batch["attention_mask"]).float(), batch["label"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    for i, batch in enumerate(batches[: steps + warm]):
        if i == warm:
            sync(device)
            t0 = time.perf_counter()
        step(batch)
    sync(device)
    rate = steps * B / (time.perf_counter() - t0)
    if drift_row:
        drift = flat(model).sub_(start).norm().item()
        print(f"  bare step, compile eager: parameter drift {drift:.3f}")
    if profile_steps:
        profile(step, batches[steps + warm :], device, cfg.compile)
    return rate


def graphed_step(data: TokenizedTextDataset, steps: int, device: torch.device, cfg: TrainConfig) -> float:
    """Samples/s of the bare step captured whole in one CUDA graph (forward, loss, backward, clip, fused
    capturable AdamW) by the engine's ``GraphStep``, replayed once a step after the batch is copied into its static
    inputs; the model compiled as ``cfg.compile`` asks (``default``: inductor's fused kernels, no CUDA graphs of its
    own). What ``fit``'s ``compile: graph`` does, without the rest of ``fit`` around it. Prints the parameters' drift
    from their start, beside the plain bare step's, as a check that the replays train."""
    torch.manual_seed(0)
    model = create_model("swarmformer_small").to(device).train()
    start = flat(model)
    net = compiled(model, cfg.compile)
    optimizer = make_optimizer(model, cfg, device)

    def compute(batch, cache):
        with autocast(device, cfg.amp == "bf16", cache):
            loss = F.cross_entropy(net(batch["input_ids"], batch["attention_mask"]).float(), batch["label"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return None, loss

    graph = GraphStep(compute, optimizer, device)
    graph.check()  # capturable groups, learning rates in device tensors
    batches = device_batches(data, device, steps + WARMUP + 1)
    for batch in batches[: WARMUP + 1]:  # the warm-ups, then the capture (and its replay)
        graph.step(batch)
    losses = torch.zeros((), device=device)
    sync(device)
    t0 = time.perf_counter()
    for batch in batches[WARMUP + 1 :]:
        losses += graph.step(batch)[1].detach()
    sync(device)
    rate = steps * B / (time.perf_counter() - t0)
    drift = flat(model).sub_(start).norm().item()
    print(
        f"  whole-step graph, compile {cfg.compile}: mean loss {losses.item() / steps:.4f}, parameter drift {drift:.3f}"
    )
    return rate


def flat(model: nn.Module) -> torch.Tensor:
    """The model's parameters as one fp32 vector (a copy): their drift over the timed steps is a check they train."""
    return parameters_to_vector(model.parameters()).detach().float()


def device_batches(data: TokenizedTextDataset, device: torch.device, n: int) -> list[dict]:
    """``n`` batches of ``B`` rows, consecutive and wrapping around, prepared on the device before any timing."""
    on_device = data.to(device)
    return [on_device.get_batch(torch.arange(i * B, (i + 1) * B) % len(data)) for i in range(n)]


def profile(step, batches, device: torch.device, mode: str) -> None:
    """``step`` over ``batches`` under ``torch.profiler``: host time by op, and launches per step."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync(device)
    t0 = time.perf_counter()
    with torch_profile(activities=activities) as prof:
        for batch in batches:
            step(batch)
        sync(device)
    wall = time.perf_counter() - t0
    events = prof.key_averages()
    n = len(batches)
    print(f"\nprofile: bare step, compile {mode}, {n} steps, {1000 * wall / n:.2f} ms a step under the profiler")
    launches = {e.key: e.count for e in events if e.key in LAUNCH_CALLS}
    print("per step: " + (", ".join(f"{k} {v / n:.1f}" for k, v in sorted(launches.items())) or "no launches recorded"))
    print(events.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60))
    if device.type == "cuda":
        print(events.table(sort_by="self_cuda_time_total", row_limit=15, max_name_column_width=60))


LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")


def engine_fit(data: TokenizedTextDataset, val: TokenizedTextDataset, steps: int, cfg: TrainConfig) -> float:
    """Samples/s of ``fit``'s second stretch of ``steps`` steps, by its own net-training clock."""
    torch.manual_seed(0)
    model = create_model("swarmformer_small")
    with tempfile.TemporaryDirectory() as out:
        result = fit(model, get_task("imdb"), data, val, cfg, out)
    return result.history[-1]["train_samples_per_s"]


def evaluate_rate(rows: int, batch_size: int, device: torch.device, amp: bool, mode: str = "eager") -> float:
    """Samples/s of the evaluate stage's measurement pass over ``rows`` synthetic reviews; the model run as
    ``mode`` asks (the stage itself runs eager: a compiled row measures what compiling it would give)."""
    from swarmlab.drive.evaluation.measure import measure

    torch.manual_seed(0)
    model = create_model("swarmformer_small").to(device)
    data = synthetic(rows, 2).to(device)
    warm = 2 if mode == "eager" else 4  # compilation, then the CUDA graph's recording
    _, _, speed = measure(
        compiled(model, mode),
        get_task("imdb"),
        data,
        batch_size=batch_size,
        warmup_batches=warm,
        device=device,
        amp=amp,
    )
    return speed["throughput_samples_per_s"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    parser.add_argument("--steps", type=int, default=8, help="timed steps per measurement (default 8)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--compile",
        default="eager",
        help="comma-separated train.compile modes for the fit rows (eager, default, reduce-overhead, graph; "
        "default: eager)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--amp", default="auto", help="fit's and the bare step's amp: fp32, bf16 or auto (default)")
    parser.add_argument("--eval-rows", type=int, default=0, help="reviews for the evaluate rows (default 0: no row)")
    parser.add_argument(
        "--eval-batch", default="256", help="comma-separated batch sizes of the evaluate rows (default 256)"
    )
    parser.add_argument(
        "--eval-compile",
        default="eager",
        help="comma-separated compile modes of the evaluate rows (default eager, the evaluate stage's own)",
    )
    parser.add_argument(
        "--bare-compile",
        default="",
        help="comma-separated compile modes of extra bare-step rows (the model compiled, the rest eager; default none)",
    )
    parser.add_argument(
        "--graph-compile",
        default="",
        help="comma-separated compile modes of rows with the whole step in one CUDA graph (eager, default; CUDA only)",
    )
    parser.add_argument(
        "--profile",
        default="",
        help="after the table, profile the bare step compiled this way (eager, default, reduce-overhead; default off)",
    )
    parser.add_argument("--profile-steps", type=int, default=20, help="steps under the profiler (default 20)")
    args = parser.parse_args(argv)
    known = ("eager", "default", "reduce-overhead", "graph")
    try:
        eval_batches = [int(b) for b in args.eval_batch.split(",")]
    except ValueError:
        parser.error(f"--eval-batch must be comma-separated integers, not {args.eval_batch!r}")
    modes = args.compile.split(",")
    eval_modes = args.eval_compile.split(",")
    bare_modes = [m for m in args.bare_compile.split(",") if m]
    graph_modes = [m for m in args.graph_compile.split(",") if m]
    for name, values in (
        ("--compile", modes),
        ("--eval-compile", eval_modes),
        ("--bare-compile", bare_modes),
        ("--graph-compile", graph_modes),
        ("--profile", [args.profile] if args.profile else []),
    ):
        if unknown := [m for m in values if m not in known]:
            parser.error(f"{name}: unknown mode(s) {', '.join(unknown)} (known: {', '.join(known)})")
    if args.eval_rows < 0 or min(eval_batches) < 1 or args.rounds < 1 or args.steps < 1 or args.profile_steps < 1:
        parser.error("--eval-rows must be >= 0; --eval-batch, --rounds, --steps and --profile-steps >= 1")
    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else "cpu"
        if args.device == "auto"
        else args.device
    )
    if graph_modes and device.type != "cuda":
        parser.error("--graph-compile needs --device cuda (CUDA graphs)")
    if args.threads:
        torch.set_num_threads(args.threads)
    from swarmlab.engine import resolve_amp

    amp = "bf16" if resolve_amp(args.amp, device) else "fp32"
    data = synthetic(B * (2 * args.steps + 2), 0)
    val = synthetic(B, 1)
    base = dict(
        batch_size=B,
        lr=4.74e-4,
        weight_decay=0.0381,
        max_epochs=0,
        max_steps=2 * args.steps,
        eval_every=args.steps,
        patience=0,
        device=str(device),
        amp=amp,
        eval_batch_size=256,
        num_threads=torch.get_num_threads(),
    )
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else describe_cpu()
    print(
        f"engine throughput, SwarmFormer-Small B={B} L={L}, {device} ({where}), torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, amp {amp}, {args.steps} steps x {args.rounds} rounds",
        flush=True,
    )
    rows: dict[str, list[float]] = {
        AUTHORS: [],
        "bare step": [],
        **{f"bare step, compile {m}": [] for m in bare_modes},
        **{f"whole step in one CUDA graph, compile {m}": [] for m in graph_modes},
        **{f"fit, compile {m}": [] for m in modes},
    }
    for r in range(args.rounds):
        rows[AUTHORS].append(authors_loop(data, args.steps, device))
        rows["bare step"].append(bare_step(data, args.steps, device, TrainConfig(**base)))
        for m in bare_modes:
            rows[f"bare step, compile {m}"].append(bare_step(data, args.steps, device, TrainConfig(**base, compile=m)))
        for m in list(graph_modes):
            key = f"whole step in one CUDA graph, compile {m}"
            try:
                rows[key].append(graphed_step(data, args.steps, device, TrainConfig(**base, compile=m)))
            except Exception:  # a capture that fails is reported and its row dropped; the other rows go on
                traceback.print_exc()
                print(f"  {key}: failed (above); row dropped", flush=True)
                graph_modes.remove(m)
                del rows[key]
        for m in modes:
            rows[f"fit, compile {m}"].append(engine_fit(data, val, args.steps, TrainConfig(**base, compile=m)))
        print(f"round {r + 1}: " + "  ".join(f"{k} {v[-1]:.0f}" for k, v in rows.items()), flush=True)
    evals = {
        (b, m): [evaluate_rate(args.eval_rows, b, device, amp == "bf16", m) for _ in range(args.rounds)]
        for b in (eval_batches if args.eval_rows else [])
        for m in eval_modes
    }
    med = {k: statistics.median(v) for k, v in rows.items()}
    print("\n| row | samples/s (median) | x authors' loop | x bare step |\n|---|---:|---:|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:,.0f} | {v / med[AUTHORS]:.2f} | {v / med['bare step']:.3f} |")
    fit_off = med.get("fit, compile eager")
    if fit_off:
        print(
            f"\nfit (compile eager) costs {100 * (1 - fit_off / med['bare step']):+.1f}% against the bare step "
            f"(goal on CPU: <= 5%)"
        )
    if evals:
        print(
            f"\n| evaluate (swarmlab.drive.evaluation.measure, {args.eval_rows} reviews) | samples/s (median) | rounds |"
            "\n|---|---:|---|"
        )
        for (b, m), v in evals.items():
            print(
                f"| batch {b}, compile {m} | {statistics.median(v):,.0f} | " + ", ".join(f"{e:,.0f}" for e in v) + " |"
            )
    if args.profile:
        bare_step(data, args.steps, device, TrainConfig(**base, compile=args.profile), profile_steps=args.profile_steps)


if __name__ == "__main__":
    main()
