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
* **fit**: ``swarmlab.engine.fit`` on a tokenized split in memory, timed by its own net-training
  clock over the second stretch of ``--steps`` steps (the first one pays for compilation and warm-up).
* **evaluate** (``--eval-rows N``, 0 = off): the evaluate stage's own measurement
  (``swarmlab.drive.evaluation.measure``: eval mode, no grad, batch ``--eval-batch``, the amp of the other rows) over N
  synthetic reviews; its throughput (on CUDA the unsynchronised second pass). Not a training row: printed apart.

Data: random token ids (vocabulary 30,522, L=256, batch 48: the paper profile's shapes). Samples/s are
medians over ``--rounds`` rounds, interleaved (authors, bare, fit, authors, ...) so that a noisy, shared
machine slows every row alike; the ratios are of medians from this one run.

    python benchmarks/engine_throughput.py [--device cpu|cuda|auto] [--steps 8] [--rounds 3]
                                           [--compile eager,default,reduce-overhead] [--threads 0]
                                           [--eval-rows 0] [--eval-batch 256]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from models import create_model
from swarmlab.engine import TrainConfig, fit, make_optimizer, sync
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


def bare_step(data: TokenizedTextDataset, steps: int, device: torch.device, cfg: TrainConfig) -> float:
    """Samples/s of the model's train step alone on batches prepared beforehand on the device."""
    torch.manual_seed(0)
    model = create_model("swarmformer_small").to(device).train()
    optimizer = make_optimizer(model, cfg, device)
    batches = [data.to(device).get_batch(torch.arange(i * B, (i + 1) * B)) for i in range(steps + 2)]
    for i, batch in enumerate(batches):
        if i == 2:
            sync(device)
            t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.amp == "bf16"):
            loss = F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]).float(), batch["label"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    sync(device)
    return steps * B / (time.perf_counter() - t0)


def engine_fit(data: TokenizedTextDataset, val: TokenizedTextDataset, steps: int, cfg: TrainConfig) -> float:
    """Samples/s of ``fit``'s second stretch of ``steps`` steps, by its own net-training clock."""
    torch.manual_seed(0)
    model = create_model("swarmformer_small")
    with tempfile.TemporaryDirectory() as out:
        result = fit(model, get_task("imdb"), data, val, cfg, out)
    return result.history[-1]["train_samples_per_s"]


def evaluate_rate(rows: int, batch_size: int, device: torch.device, amp: bool) -> float:
    """Samples/s of the evaluate stage's measurement pass over ``rows`` synthetic reviews."""
    from swarmlab.drive.evaluation.measure import measure

    torch.manual_seed(0)
    model = create_model("swarmformer_small").to(device)
    data = synthetic(rows, 2).to(device)
    _, _, speed = measure(
        model, get_task("imdb"), data, batch_size=batch_size, warmup_batches=2, device=device, amp=amp
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
        help="comma-separated train.compile modes for the fit rows (eager, default, reduce-overhead; default: eager)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--amp", default="auto", help="fit's and the bare step's amp: fp32, bf16 or auto (default)")
    parser.add_argument("--eval-rows", type=int, default=0, help="reviews for the evaluate row (default 0: no row)")
    parser.add_argument("--eval-batch", type=int, default=256, help="the evaluate row's batch size (default 256)")
    args = parser.parse_args(argv)
    if args.eval_rows < 0 or args.eval_batch < 1:
        parser.error("--eval-rows must be >= 0 and --eval-batch >= 1")
    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else "cpu"
        if args.device == "auto"
        else args.device
    )
    if args.threads:
        torch.set_num_threads(args.threads)
    from swarmlab.engine import resolve_amp

    amp = "bf16" if resolve_amp(args.amp, device) else "fp32"
    modes = args.compile.split(",")
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
    rows: dict[str, list[float]] = {AUTHORS: [], "bare step": [], **{f"fit, compile {m}": [] for m in modes}}
    for r in range(args.rounds):
        rows[AUTHORS].append(authors_loop(data, args.steps, device))
        rows["bare step"].append(bare_step(data, args.steps, device, TrainConfig(**base)))
        for m in modes:
            rows[f"fit, compile {m}"].append(engine_fit(data, val, args.steps, TrainConfig(**base, compile=m)))
        print(f"round {r + 1}: " + "  ".join(f"{k} {v[-1]:.0f}" for k, v in rows.items()), flush=True)
    evals = [
        evaluate_rate(args.eval_rows, args.eval_batch, device, amp == "bf16")
        for _ in range(args.rounds * bool(args.eval_rows))
    ]
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
            f"\nevaluate (swarmlab.drive.evaluation.measure, batch {args.eval_batch}, {args.eval_rows} reviews): "
            f"{statistics.median(evals):,.0f} samples/s (median of {len(evals)}: "
            + ", ".join(f"{e:,.0f}" for e in evals)
            + ")"
        )


if __name__ == "__main__":
    main()
