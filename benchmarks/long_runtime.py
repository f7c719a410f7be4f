"""Training-step and inference time per batch at 1k, 2k and 4k tokens: HSW against Longformer, full attention and
SwarmFormer, in one process run on this machine; ratios against Longformer.

Models are compared at *matching width and depth* (printed with the table):

  * group ``small`` (default), matched to ``hsw_small``: width D = 64, hsw_small's stage-1 width, i.e. the
    width at which all L tokens are processed (HSW's later stages are narrower in tokens and wider in channels,
    with about the same L * D^2 per block); depth 5 = hsw_small's 1+1+2+1 blocks; heads of width 32; a local
    window of 129 keys (Longformer and the enhanced SwarmFormer, one-sided 64) against HSW's 128-token windows.
    Models: hsw_small, longformer, transformer (full attention, SDPA), swarmformer_small_padaware,
    swarmformer_enhanced_small. SwarmFormer keeps its own layer structure (T_local = 3 local steps, cluster size
    8) and the encoder baselines their MLP ratio 4; every model keeps its own dropout.
  * group ``seed``, matched to ``hsw_base`` (the paper's sizes; its rows say ``hsw``): D = 96, 12 blocks, 3 heads of 32: hsw and longformer
    (``--seed-all`` adds the other three; full attention then takes minutes per step at 4k).
  * paper-style (``--paper small`` by default): also Longformer at HSW's *final* width and the same depth
    (512 x 5 for hsw_small; 768 x 12 for hsw with ``--paper small seed``), the kind of comparison the paper
    makes (HSW, final width 768 and 12 blocks, against longformer-base, 768 wide and 12 layers at every token);
    measured at the longest length only (about 10 s per step on one core at 4k for 512 x 5).

Byte vocabulary (259), 11 classes, batch ``--batch`` (default 1) of random ids, all tokens real.

  * train step = forward, cross-entropy, zero_grad, backward, clip_grad_norm_(1.0), AdamW step (``make_optimizer``:
    weight decay on matrices but the relative-position tables), as ``swarmlab.engine.fit`` does per batch;
  * inference = ``eval()`` + ``torch.inference_mode()`` forward.

Each (model, length) point gets one untimed warm-up of each, then up to ``--rounds`` timed rounds, interleaved
across the models of a group (round 1 of every model, then round 2, ...) so that a busy machine slows all alike;
a point stops repeating once it has used ``--point-budget`` seconds. Medians and best times are printed; CUDA
(``--device cuda``) is synchronised around every timed call. Ratios are Longformer's time / the model's time
(> 1: faster than Longformer), from the medians.

    python benchmarks/long_runtime.py                  # ~2-3 minutes on one core
    python benchmarks/long_runtime.py --paper small seed --threads 2 --tokens 1024 4096
    python benchmarks/long_runtime.py --paper           # no paper-style rows
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field

import torch

from models import create_model
from swarmlab.bench import train_step
from swarmlab.engine import TrainConfig, make_optimizer
from swarmlab.machine import describe_machine

VOCAB, CLASSES = 259, 11  # tasks/long_data.py: bytes + PAD/CLS/SEP; arXiv-11


@dataclass
class Spec:
    label: str
    name: str
    overrides: dict
    matching: str
    only_longest: bool = False


def group_specs(group: str, seed_all: bool, paper: bool) -> list[Spec]:
    if group == "small":
        D, layers, heads, label, hsw = 64, 5, 2, "hsw_small", "hsw_small"
        final = ("Longformer 512x5", 512, 16)
    else:
        D, layers, heads, label, hsw = 96, 12, 3, "hsw", "hsw_base"  # the row keeps the paper's name
        final = ("Longformer 768x12", 768, 24)
    enc = dict(d_model=D, num_layers=layers, num_heads=heads)
    specs = [
        Spec(label, hsw, {}, f"C={D}, {layers} blocks, W=128"),
        Spec(
            "Longformer",
            "longformer",
            {**enc, "window_one_sided": 64},
            f"D={D}, {layers} layers, w=64 (129 keys) + global",
        ),
    ]
    if group == "small" or seed_all:
        specs += [
            Spec("full attention", "transformer", enc, f"D={D}, {layers} layers, all keys (SDPA)"),
            Spec(
                "SwarmFormer pad-aware",
                "swarmformer_small_padaware",
                dict(d_model=D, num_layers=layers),
                f"D={D}, {layers} layers, S=8, T_local=3",
            ),
            Spec(
                "SwarmFormer enhanced",
                "swarmformer_enhanced_small",
                dict(d_model=D, num_layers=layers, heads=heads, dim_head=32, window_one_sided=64),
                f"D={D}, {layers} layers, window 129, routing block 256",
            ),
        ]
    if paper:
        label, width, h = final
        specs.append(
            Spec(
                label,
                "longformer",
                dict(d_model=width, num_layers=layers, num_heads=h, window_one_sided=64),
                f"HSW's final width {width}, {layers} layers (paper-style)",
                only_longest=True,
            )
        )
    return specs


def make_train_step(model, ids, mask, labels):
    # fit's optimizer: AdamW, decay on matrices but not on what no_weight_decay() names, fused on CUDA
    opt = make_optimizer(model, TrainConfig(lr=1e-4, weight_decay=0.01, optimizer="adamw"), ids.device)
    return train_step(model, (ids, mask), labels, opt, clip=1.0)


def make_infer(model, ids, mask):
    def infer():
        model.eval()
        with torch.inference_mode():
            model(ids, mask)

    return infer


@dataclass
class Point:
    spec: Spec
    tokens: int
    params: int = 0
    train: list[float] = field(default_factory=list)
    infer: list[float] = field(default_factory=list)
    spent: float = 0.0
    fns: tuple = ()


def run_group(specs: list[Spec], tokens: int, *, batch: int, rounds: int, budget: float, device) -> list[Point]:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def timed(fn) -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t0

    points = []
    for spec in specs:
        torch.manual_seed(0)
        model = create_model(spec.name, vocab_size=VOCAB, num_classes=CLASSES, seq_len=tokens, **spec.overrides).to(
            device
        )
        ids = torch.randint(3, VOCAB, (batch, tokens), device=device)
        mask = torch.ones(batch, tokens, dtype=torch.bool, device=device)
        labels = torch.randint(0, CLASSES, (batch,), device=device)
        p = Point(spec, tokens, model.get_num_params())
        p.fns = (make_train_step(model, ids, mask, labels), make_infer(model, ids, mask))
        p.spent = timed(p.fns[0]) + timed(p.fns[1])  # warm-up: kernels, thread pools, optimizer state
        points.append(p)
    for _ in range(rounds):
        for p in points:
            if p.train and p.spent > budget:
                continue
            t, i = timed(p.fns[0]), timed(p.fns[1])
            p.train.append(t)
            p.infer.append(i)
            p.spent += t + i
    for p in points:
        p.fns = ()  # free the models
    return points


def table(points: list[Point], specs: list[Spec]) -> str:
    ref = {p.tokens: p for p in points if p.spec.label == "Longformer"}
    rows = [
        "| model | matching | params | L | train ms | train best | infer ms | infer best | n | train vs LF | infer vs LF |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    order = [s.label for s in specs]
    for p in sorted(points, key=lambda q: (q.tokens, order.index(q.spec.label))):
        tr, inf = statistics.median(p.train), statistics.median(p.infer)
        lf = ref.get(p.tokens)
        ratio_t = f"{statistics.median(lf.train) / tr:.2f}x" if lf else "-"
        ratio_i = f"{statistics.median(lf.infer) / inf:.2f}x" if lf else "-"
        rows.append(
            f"| {p.spec.label} | {p.spec.matching} | {p.params:,} | {p.tokens} | {tr * 1e3:.0f} | "
            f"{min(p.train) * 1e3:.0f} | {inf * 1e3:.0f} | {min(p.infer) * 1e3:.0f} | {len(p.train)} | "
            f"{ratio_t} | {ratio_i} |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[1024, 2048, 4096], help="sequence lengths")
    ap.add_argument("--batch", type=int, default=1, help="sequences per batch")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per point at most")
    ap.add_argument("--point-budget", type=float, default=8.0, help="seconds after which a point stops repeating")
    ap.add_argument("--groups", nargs="+", default=["small", "seed"], choices=["small", "seed"])
    ap.add_argument("--seed-all", action="store_true", help="all five model types in the seed group too")
    ap.add_argument(
        "--paper",
        nargs="*",
        default=["small"],
        choices=["small", "seed"],
        help="groups that also get Longformer at HSW's final width, at the longest length only "
        "(default: small, ~25 s at 4k; seed: 768 x 12, about a minute per step at 4k)",
    )
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (1: least disturbed on a shared machine)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(describe_machine())
    if device.type == "cuda":
        print(f"GPU: {torch.cuda.get_device_name(device)}")
    print(
        f"batch {args.batch}, up to {args.rounds} timed rounds per point (budget {args.point_budget:.0f} s), "
        f"byte vocabulary {VOCAB}, {CLASSES} classes; ratios = Longformer's median time / the model's\n"
    )
    t_start = time.perf_counter()
    summary = []
    for group in args.groups:
        specs = group_specs(group, args.seed_all, group in args.paper)
        points = []
        for n in args.tokens:
            todo = [s for s in specs if not s.only_longest or n == max(args.tokens)]
            points += run_group(todo, n, batch=args.batch, rounds=args.rounds, budget=args.point_budget, device=device)
        matched = "hsw_small" if group == "small" else "hsw_base"
        print(f"## group {group}: matched to {matched}")
        print(table(points, specs) + "\n")
        longest = max(args.tokens)
        by = {p.spec.label: p for p in points if p.tokens == longest}
        if matched in by and "Longformer" in by:
            r = statistics.median(by["Longformer"].train) / statistics.median(by[matched].train)
            line = f"{matched} vs Longformer at {longest} tokens, train step: {r:.2f}x at matching width and depth"
            paper = [p for label, p in by.items() if label.startswith("Longformer ") and p is not by["Longformer"]]
            if paper:
                rp = statistics.median(paper[0].train) / statistics.median(by[matched].train)
                line += f", {rp:.1f}x against {paper[0].spec.label} (paper-style)"
            summary.append(line)
    print("## summary (goal: HSW >= 5x Longformer's training step at 4096 tokens)")
    for line in summary:
        print(f"- {line}")
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
