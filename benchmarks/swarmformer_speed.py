"""SwarmFormer speed on this CPU: the plain reference path (``fast=False``) against the fast path, one process run.

For Small (B=48, L=256) and Base (L=768, B=16 by default: B=48 would take ~3x longer per step and the whole
run must stay near 3 minutes), it prints the median time of a training step and of an inference batch for
each path, samples/s, the speedup, the achieved GFLOP/s and its share of a matmul ceiling measured in the
same run (a 2048^3 matmul and the model's own narrow (B*L, D) x (D, D) shape). Measurements are interleaved
(ceiling, ref, fast, fast+bf16, ceiling, ref, fast, ...) so that a noisy, shared machine slows all alike; the
medians and, less sensitive to other processes' bursts, the best round are both reported.

  * train step = what ``swarmlab.engine.fit`` does per batch: forward, cross-entropy, zero_grad,
    backward, clip_grad_norm_(1.0) and an AdamW step over all parameters (the 3.9M-row embedding included,
    with the engine's decay / no-decay groups).
  * inference = ``model.eval()`` + ``torch.inference_mode()`` forward of one batch.
  * FLOPs are counted analytically from the reference's matmuls (2*m*n*k each; see ``model_flops``),
    training = 3x forward (backward = input grads + weight grads). The fast path does ~5% fewer (the
    broadcast gate's u half runs once per cluster, not per token) but is credited with the same count, so
    the GFLOP/s columns compare like with like: they are "useful" FLOP/s.
  * the bf16 rows run the fast path under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (fp32 master
    weights, as the engine's ``amp: true``); their accuracy column is the max |logit difference| to fp32
    relative to the max |logit| on one eval batch. bf16 is not the default.

    python benchmarks/swarmformer_speed.py [--quick] [--threads 1] [--rounds R] [--base-batch B] [--compile]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from models import create_model
from models.swarmformer import SwarmFormerConfig
from swarmlab.bench import timed, train_step


def model_flops(cfg: SwarmFormerConfig, batch: int) -> int:
    """Forward matmul FLOPs of the reference SwarmFormer (2*m*n*k per matmul; elementwise ops not counted).

    N = B*L tokens, Bc = B*C cluster representatives, per layer:
      local steps   t_local * 2*N*(D*D [mlp.fc1] + D*D [mlp.fc2] + 2D*D [gate.fc1 on [x; u]] + D*D [gate.fc2])
      cluster attn  2*Bc*3*D*D [q, k, v] + B * (2*C*C*D [q k^T] + 2*C*C*D [A v])
      broadcast     2*Bc*D*D [proj] + 2*N*2D*D [gate.fc1] + 2*N*D*D [gate.fc2]
    plus the head 2*B*D*num_classes. The embedding lookup is a gather (no FLOPs).
    """
    D, L, S = cfg.d_model, cfg.seq_len, cfg.cluster_size
    C = L // S
    N, Bc = batch * L, batch * C
    local = cfg.t_local * 2 * N * (D * D + D * D + 2 * D * D + D * D)
    attn = 2 * Bc * 3 * D * D + batch * (2 * C * C * D + 2 * C * C * D)
    broadcast = 2 * Bc * D * D + 2 * N * 2 * D * D + 2 * N * D * D
    return cfg.num_layers * (local + attn + broadcast) + 2 * batch * D * cfg.num_classes


def make_train_step(model, ids, mask, labels, *, amp: bool):
    """One engine-style training step (see the module docstring): AdamW with decay on matrices, clipping at 1."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.0381}, {"params": no_decay, "weight_decay": 0.0}], lr=4.74e-4
    )
    return train_step(model, (ids, mask), labels, opt, amp=amp, clip=1.0)


def make_infer(model, ids, mask, *, amp: bool):
    def infer():
        model.eval()
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            return model(ids, mask)

    return infer


def make_matmul(m: int, k: int, n: int, dtype=torch.float32):
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    return (lambda: torch.mm(a, b)), 2 * m * k * n


def bench_model(name: str, batch: int, rounds: int, use_compile: bool) -> dict:
    torch.manual_seed(0)
    ref = create_model(name, fast=False)
    cfg = ref.cfg
    ids = torch.randint(1, cfg.vocab_size, (batch, cfg.seq_len))
    mask = torch.ones(batch, cfg.seq_len, dtype=torch.bool)
    labels = torch.randint(0, cfg.num_classes, (batch,))
    variants = {"ref": (ref, False)}
    for key, amp in (("fast", False), ("fast_bf16", True)):
        m = create_model(name)
        m.load_state_dict(ref.state_dict())
        variants[key] = (m, amp)
    compile_s = None
    if use_compile:
        m = create_model(name)
        m.load_state_dict(ref.state_dict())
        t0 = time.perf_counter()
        compiled = torch.compile(m)
        make_infer(compiled, ids, mask, amp=False)()
        make_train_step(compiled, ids, mask, labels, amp=False)()
        compile_s = time.perf_counter() - t0
        variants["fast_compiled"] = (compiled, False)

    # accuracy of bf16 against fp32 (same weights, one eval batch)
    full = make_infer(variants["fast"][0], ids, mask, amp=False)()
    half = make_infer(variants["fast_bf16"][0], ids, mask, amp=True)().float()
    bf16_rel_err = ((half - full).abs().max() / full.abs().max()).item()

    jobs = {}
    for key, (m, amp) in variants.items():
        jobs[(key, "train")] = make_train_step(m, ids, mask, labels, amp=amp)
        jobs[(key, "infer")] = make_infer(m, ids, mask, amp=amp)
    ceilings = {
        "mm2048_fp32": make_matmul(2048, 2048, 2048),
        "narrow_fp32": make_matmul(batch * cfg.seq_len, cfg.d_model, cfg.d_model),
        "narrow_bf16": make_matmul(batch * cfg.seq_len, cfg.d_model, cfg.d_model, torch.bfloat16),
    }
    for fn in list(jobs.values()) + [c[0] for c in ceilings.values()]:  # warm-up (allocator, AdamW state)
        fn()
    times: dict = {k: [] for k in list(jobs) + list(ceilings)}
    for _ in range(rounds):
        for key, (fn, _flops) in ceilings.items():
            times[key].append(min(timed(fn) for _ in range(3)))
        for mode in ("train", "infer"):
            for key in variants:  # interleaved: ref, fast, fast_bf16, ref, fast, ...
                times[(key, mode)].append(timed(jobs[(key, mode)]))
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    return {
        "name": name,
        "batch": batch,
        "cfg": cfg,
        "flops": model_flops(cfg, batch),
        "med": med,
        "best": best,
        "ceil": {k: ceilings[k][1] / med[k] / 1e9 for k in ceilings},
        "variants": list(variants),
        "bf16_rel_err": bf16_rel_err,
        "compile_s": compile_s,
        "rounds": rounds,
    }


def report(r: dict) -> list[str]:
    cfg, med, best, ceil = r["cfg"], r["med"], r["best"], r["ceil"]
    lines = [
        f"\n### {r['name']}: B={r['batch']}, L={cfg.seq_len}, D={cfg.d_model}, S={cfg.cluster_size}, "
        f"{r['rounds']} rounds, forward = {r['flops'] / 1e9:.2f} GFLOP",
        f"ceiling: 2048^3 fp32 {ceil['mm2048_fp32']:.1f} GFLOP/s, "
        f"narrow ({r['batch'] * cfg.seq_len}x{cfg.d_model})x({cfg.d_model}x{cfg.d_model}) "
        f"fp32 {ceil['narrow_fp32']:.1f} / bf16 {ceil['narrow_bf16']:.1f} GFLOP/s",
        "",
        "| path | mode | median s | samples/s | speedup vs ref | GFLOP/s | % narrow fp32 | % 2048^3 fp32 "
        "| best s | speedup (best) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, mult in (("train", 3), ("infer", 1)):
        for key in r["variants"]:
            t = med[(key, mode)]
            gf = mult * r["flops"] / t / 1e9
            lines.append(
                f"| {key} | {mode} | {t:.3f} | {r['batch'] / t:.1f} | {med[('ref', mode)] / t:.2f}x | "
                f"{gf:.1f} | {100 * gf / ceil['narrow_fp32']:.0f}% | {100 * gf / ceil['mm2048_fp32']:.0f}% | "
                f"{best[(key, mode)]:.3f} | {best[('ref', mode)] / best[(key, mode)]:.2f}x |"
            )
    lines.append(
        f"\nbf16 autocast accuracy: max |logit_bf16 - logit_fp32| / max |logit_fp32| = {r['bf16_rel_err']:.2e}"
    )
    if r["compile_s"] is not None:
        lines.append(f"torch.compile: first inference + first train step took {r['compile_s']:.0f} s (compile)")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds, Base at batch 8 (~1 minute)")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: on the shared 2-core machine 2 threads ran ~3x slower); "
        "0 = torch's default",
    )
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds per measurement (default 5, quick 2)")
    ap.add_argument("--base-batch", type=int, default=0, help="Base batch size (default 16, quick 8)")
    ap.add_argument("--compile", action="store_true", help="add a torch.compile(fast) row (compiles for minutes)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rounds = args.rounds or (2 if args.quick else 5)
    base_batch = args.base_batch or (8 if args.quick else 16)
    t0 = time.perf_counter()
    print(
        f"# SwarmFormer speed, {time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
        f"load average at start {os.getloadavg()[0]:.1f}"
    )
    lines = []
    for name, batch in (("swarmformer_small", 48), ("swarmformer_base", base_batch)):
        lines += report(bench_model(name, batch, rounds, args.compile))
    print("\n".join(lines))
    print(f"\nload average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
