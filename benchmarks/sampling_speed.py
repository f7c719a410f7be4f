"""SWARM Transformer sampling speed, one process run: incremental ``sample`` vs ``sample_naive`` (one full
forward per sub-pixel), a batch of 10 images (one per class), 28x28x1.

The incremental sampler draws the whole image. The naive one costs one full forward per sub-pixel whatever
the sub-pixel, so it is timed on the first ``--naive-pixels`` sub-pixels and extrapolated linearly to all
H*W*C of them (the output says so). Both use the same seeded torch.Generator, so the sub-pixels the naive
run drew must equal the incremental sample's first ones; the script checks that.

    python benchmarks/sampling_speed.py [--model swarm_transformer_base] [--naive-pixels 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from models import create_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model",
        default="swarm_transformer_base",
        help="registered image model (default swarm_transformer_base, the paper's sizes; "
        "swarm_transformer_small for a tighter CPU budget)",
    )
    ap.add_argument("--naive-pixels", type=int, default=4, help="sub-pixels the naive sampler is timed on")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1); 0 = torch's default")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = create_model(args.model, image_size=(1, 28, 28), num_classes=10).eval()
    cfg = model.cfg
    L = cfg.seq_len
    labels = torch.arange(10)  # one image per class
    print(
        f"# SWARM Transformer sampling, {time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), load average at start {os.getloadavg()[0]:.1f}"
    )
    print(
        f"model {args.model}: image {cfg.image_size}, dim {cfg.dim}, hidden {cfg.dim_hidden}, n_iter {cfg.n_iter}, "
        f"{cfg.num_layers} layer(s), {model.get_num_params():,} parameters (untrained: speed does not depend on "
        f"the weights); batch of {len(labels)} (one per class), {L} sub-pixels per image"
    )

    t0 = time.perf_counter()
    fast = model.sample(labels, generator=torch.Generator().manual_seed(1))
    t_fast = time.perf_counter() - t0

    k = min(args.naive_pixels, L)
    t0 = time.perf_counter()
    naive = model.sample_naive(labels, generator=torch.Generator().manual_seed(1), max_positions=k)
    t_naive_k = time.perf_counter() - t0
    t_naive = t_naive_k * L / k
    same = torch.equal(model.to_sequence(fast)[:, :k], model.to_sequence(naive)[:, :k])

    print(f"\n| sampler | sub-pixels timed | seconds | seconds for all {L} | ms per sub-pixel |")
    print("|---|---:|---:|---:|---:|")
    print(f"| incremental (sample) | {L} | {t_fast:.2f} | {t_fast:.2f} | {1e3 * t_fast / L:.2f} |")
    print(
        f"| naive (sample_naive) | {k} | {t_naive_k:.2f} | {t_naive:.0f} (extrapolated x{L / k:.0f}) | "
        f"{1e3 * t_naive_k / k:.0f} |"
    )
    print(
        f"\nspeed-up incremental vs naive: {t_naive / t_fast:.0f}x (naive extrapolated linearly from {k} of {L} "
        f"sub-pixels: one full forward each)"
    )
    print(f"first {k} sub-pixels of both samplers identical (same generator): {same}")
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    if not same:
        raise SystemExit("incremental and naive samples differ: the incremental sampler is wrong")


if __name__ == "__main__":
    main()
