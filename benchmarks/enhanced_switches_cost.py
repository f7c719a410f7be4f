"""The cost side of paper 001's seven changes: the enhanced SwarmFormer Small with all of them on, each one switched
off in turn, and all off (= the original SwarmFormer Small), as in the claims grid ``enhanced_switches`` (issue 19).

Two tables, in one process run:

  * **counts** (no clock: the same on a busy machine as on an idle one), per model and length L, fp32, per sequence
    (counted on a batch of ``--count-batch``: every count is linear in the batch): parameters; FLOPs of one forward
    and of one training forward + backward (``swarmlab.bench.count_flops``: matmuls and attention, 2 per
    multiply-add; elementwise work is not counted); the activation bytes that the training forward keeps for its
    backward (``swarmlab.bench.saved_activation_bytes``, parameters excluded). At every length ``routing_block = L``,
    as the registered models (global routing at their length; the grid sets the same); L = 256 is the registered
    Small. ``x enhanced`` = the row's training FLOPs / the enhanced model's. Memory: counting on a batch of 48 at
    1,024 tokens ran this 24 GB machine out of memory; with the default batch of 8 one model's counts at 1,024 tokens
    peak at 1.4 GB (the whole run's peak RSS was 13.4 GB, the allocator keeping what the models built in turn freed).
  * **timing** at ``--seq-len`` (the grid's 128 tokens): the engine's train step (``swarmlab.bench.train_step``:
    forward, cross-entropy, backward, clip at 1.0, AdamW; bf16 autocast where the CPU computes bf16 natively, as the
    profiles' ``amp: auto``) and one inference batch of 256 (the evaluate stage's), every model timed in the same
    interleaved rounds, so that a busy machine slows all alike and the ratios hold; median and best of the rounds.
    The two timings of the grid's evaluate stage are taken wherever each point ran, beside whatever else ran.

The ledger (reports/REPORT.md) reads both tables, committed at reports/side/enhanced_switches_cost/: the forward
FLOPs at 256 tokens for s001-fewer-flops, the median train step and inference batch at 128 tokens for
s001-faster-training and s001-faster-inference (medians of interleaved rounds: the grid's own timings are each
taken once, beside whatever else ran).

    python benchmarks/enhanced_switches_cost.py [--only counts|timing] [--lengths 128,256,1024] [--count-batch 8]
                                                [--seq-len 128] [--batch 48] [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from models import create_model
from models.swarmformer_enhanced import SWITCHES
from swarmlab.bench import count_flops, saved_activation_bytes, timed, train_step
from swarmlab.engine.device import native_bf16
from swarmlab.machine import describe_machine

BASE = "swarmformer_enhanced_small"
MODELS = [(BASE, "none (all on)")]
MODELS += [(f"{BASE}_{suffix}", switch) for switch, suffix in SWITCHES.items()]
MODELS += [(f"{BASE}_all_off", "all (the original)")]


def build(name: str, length: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model(name, seq_len=length, routing_block=length)


def batch(model: torch.nn.Module, size: int, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    cfg = model.cfg
    ids = torch.randint(1, cfg.vocab_size, (size, length), generator=g)
    return ids, torch.ones(size, length, dtype=torch.bool), torch.randint(0, cfg.num_classes, (size,), generator=g)


def counts(name: str, length: int, size: int) -> dict:
    model = build(name, length)
    ids, mask, labels = batch(model, size, length)
    model.eval()
    with torch.no_grad():
        forward = count_flops(lambda: model(ids, mask))
    model.train()

    def train_pass() -> None:
        torch.nn.functional.cross_entropy(model(ids, mask), labels).backward()

    train = count_flops(train_pass)
    saved = saved_activation_bytes(lambda: model(ids, mask), exclude=model.parameters())
    return {"params": sum(p.numel() for p in model.parameters()), "forward": forward, "train": train, "saved": saved}


def timing_jobs(name: str, args, amp: bool) -> dict:
    model = build(name, args.seq_len)
    ids, mask, labels = batch(model, args.batch, args.seq_len)
    eval_ids, eval_mask, _ = batch(model, 256, args.seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = train_step(model, (ids, mask), labels, opt, amp=amp, clip=1.0)

    def infer() -> None:
        model.eval()
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            model(eval_ids, eval_mask)

    return {"train": step, "infer": infer}


def parse_lengths(text: str) -> list[int]:
    try:
        lengths = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--lengths takes comma-separated integers, got {text!r}") from None
    if not lengths or min(lengths) < 1:
        raise argparse.ArgumentTypeError(f"--lengths takes positive integers, got {text!r}")
    return lengths


def print_counts(args) -> None:
    print(
        f"\n## Counts per sequence (taken on a batch of {args.count_batch}), fp32, routing_block = L: FLOPs of matmuls "
        "and attention; activations = bytes the training forward keeps for backward\n"
    )
    print(
        "| model | switched off | L | params | forward MFLOP / seq | train MFLOP / seq | activations MB / seq | "
        "x enhanced (train MFLOP) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for length in args.lengths:
        rows = [(name, off, counts(name, length, args.count_batch)) for name, off in MODELS]
        ref = rows[0][2]["train"]
        per = 1e6 * args.count_batch
        for name, off, c in rows:
            print(
                f"| {name} | {off} | {length} | {c['params']:,} | {c['forward'] / per:,.1f} | {c['train'] / per:,.1f} | "
                f"{c['saved'] / per:.2f} | {c['train'] / ref:.2f} |"
            )


def print_timing(args, amp: bool) -> None:
    print(
        f"\n## Timing: {args.seq_len} tokens, train batch {args.batch}, inference batch 256, {args.threads} thread(s), "
        f"{'bf16 autocast' if amp else 'fp32'}, {args.rounds} interleaved rounds\n"
    )
    jobs = {name: timing_jobs(name, args, amp) for name, _ in MODELS}
    for job in jobs.values():  # warm-up: thread pools, oneDNN primitives, optimizer state
        job["train"]()
        job["infer"]()
    times: dict[str, dict[str, list[float]]] = {name: {"train": [], "infer": []} for name in jobs}
    for _ in range(args.rounds):
        for name, job in jobs.items():
            for kind in ("train", "infer"):
                times[name][kind].append(timed(job[kind]))
    ref = {k: statistics.median(times[BASE][k]) for k in ("train", "infer")}
    print(
        "| model | switched off | L | train ms | train best ms | x enhanced | infer ms | infer best ms | x enhanced |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, off in MODELS:
        t, i = times[name]["train"], times[name]["infer"]
        print(
            f"| {name} | {off} | {args.seq_len} | {1e3 * statistics.median(t):.1f} | {1e3 * min(t):.1f} | "
            f"{statistics.median(t) / ref['train']:.2f} | {1e3 * statistics.median(i):.1f} | {1e3 * min(i):.1f} | "
            f"{statistics.median(i) / ref['infer']:.2f} |"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("counts", "timing"), help="one of the two tables (default: both)")
    ap.add_argument("--lengths", type=parse_lengths, default=[128, 256, 1024], help="counted lengths (128,256,1024)")
    ap.add_argument("--count-batch", type=int, default=8, help="batch the counts are taken on (default 8)")
    ap.add_argument("--seq-len", type=int, default=128, help="timed length (default 128: the grid's)")
    ap.add_argument("--batch", type=int, default=48, help="training batch (default 48: the shared settings)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per model (default 5)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2: the IMDB runs' share)")
    args = ap.parse_args(argv)
    if min(args.rounds, args.threads, args.batch, args.count_batch, args.seq_len) < 1:
        ap.error("--rounds, --threads, --batch, --count-batch and --seq-len must be >= 1")
    # every layer's cluster size (8, then 16 with the pyramid) must divide the routing block (= the length)
    for length in [*args.lengths, args.seq_len]:
        try:
            for name, _ in MODELS:
                build(name, length)
        except ValueError as exc:
            ap.error(f"length {length}: {exc}")
    torch.set_num_threads(args.threads)
    amp = native_bf16(torch.device("cpu"))
    print(describe_machine())
    if args.only != "timing":
        print_counts(args)
    if args.only != "counts":
        print_timing(args, amp)


if __name__ == "__main__":
    main()
