"""Set models' training speed on this CPU, one process run: train-step samples/s, median of interleaved rounds.

Each row is ``(group, name, build_fn)``; ``build_fn(dim_input, dim_output)`` returns a module called as
``model(x (B, N, dim_input), mask (B, N) bool) -> (B, N, dim_output)``. The first row of each group is the
baseline that the group's ratios refer to. Rows are timed interleaved (row 1, row 2, ..., row 1, row 2, ...)
so that a noisy, shared machine slows all alike; the median and the best round are both reported.

  * train step = forward, cross-entropy of per-entity logits against random cluster labels, zero_grad,
    backward, one Adam step (paper 003 §4.1.3 trains with Adam, batch size 50);
  * sizes: B = 50 sets of N = 500 2-D points (all real; the mask is passed, so the masked code path is timed),
    10 outputs per entity;
  * group "swarm": the paper's best SWARM, 192 hidden units, 10 iterations, 1 layer, against a transcription of
    the authors' layer (swarmlab/testing/reference_swarm.py);
  * group "isab": the paper's best Set Transformer (32-60-3: width 32, 60 inducing points, 3 ISABs, 4 heads)
    against the public blocks' structure (swarmlab/testing/reference_set_transformer.py: juho-lee/set_transformer's MAB and
    ISAB with LayerNorm, a 1-layer rFF, full-width scaling, no masks, the first ISAB on the raw input); ours
    is timed as registered (rFF depth 4, the SWARM authors' RFF) and with a 1-layer rFF (the public depth).

    python benchmarks/set_speed.py [--rounds 3] [--threads 1] [--batch 50] [--entities 500] [--with-plain]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from models import create_model
from swarmlab.bench import timed, train_step
from swarmlab.machine import describe_cpu
from swarmlab.testing.reference_set_transformer import PublicISABEncoder
from swarmlab.testing.reference_swarm import authors_swarm

HIDDEN, N_ITER, LAYERS = 192, 10, 1  # paper 003 §4.1.4: SWARM(192-10-1)
ST_HIDDEN, ST_INDS, ST_LAYERS, ST_HEADS = 32, 60, 3, 4  # paper 003 Table 2: Set Transformer (32-60-3)

ROWS = [
    (
        "swarm",
        "authors' SwarmLayer (swarmlab/testing/reference_swarm.py, conv1d, MEAN, cache=True)",
        lambda d_in, d_out: authors_swarm(d_in, d_out, HIDDEN, N_ITER, LAYERS, pooling="MEAN", cache=True),
    ),
    (
        "swarm",
        "swarm (models/swarm.py, fast path)",
        lambda d_in, d_out: create_model(
            "swarm", dim_input=d_in, dim_output=d_out, dim_hidden=HIDDEN, n_iter=N_ITER, num_layers=LAYERS
        ),
    ),
    (
        "isab",
        "public ISAB structure (swarmlab/testing/reference_set_transformer.py, ln=True)",
        lambda d_in, d_out: PublicISABEncoder(d_in, d_out, ST_HIDDEN, ST_HEADS, ST_INDS, ST_LAYERS, ln=True),
    ),
    (
        "isab",
        "set_transformer_isab (models/set_transformer.py, rFF depth 4)",
        lambda d_in, d_out: create_model("set_transformer_isab", dim_input=d_in, dim_output=d_out),
    ),
    (
        "isab",
        "set_transformer_isab, rFF depth 1",
        lambda d_in, d_out: create_model("set_transformer_isab", dim_input=d_in, dim_output=d_out, ff_depth=1),
    ),
]
PLAIN_ROW = (
    "swarm",
    "swarm fast=False (plain autograd reference path)",
    lambda d_in, d_out: create_model(
        "swarm", dim_input=d_in, dim_output=d_out, dim_hidden=HIDDEN, n_iter=N_ITER, num_layers=LAYERS, fast=False
    ),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timed rounds after one warm-up (default 3)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1); 0 = torch's default")
    ap.add_argument("--batch", type=int, default=50, help="sets per batch (default 50, the paper's)")
    ap.add_argument("--entities", type=int, default=500, help="entities per set (default 500)")
    ap.add_argument("--with-plain", action="store_true", help="add a row for swarm's plain autograd path")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = ROWS + ([PLAIN_ROW] if args.with_plain else [])
    B, N, D_IN, K = args.batch, args.entities, 2, 10
    t_start = time.perf_counter()
    print(
        f"# set models, train step, {time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), load average at start {os.getloadavg()[0]:.1f}"
    )
    print(f"CPU: {describe_cpu()}")
    print(
        f"B={B} sets x N={N} entities x {D_IN}-D, {K} outputs per entity; SWARM({HIDDEN}-{N_ITER}-{LAYERS}), "
        f"Set Transformer ({ST_HIDDEN}-{ST_INDS}-{ST_LAYERS}); {args.rounds} rounds after 1 warm-up"
    )

    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, N, D_IN, generator=g)
    mask = torch.ones(B, N, dtype=torch.bool)
    labels = torch.randint(0, K, (B, N), generator=g)
    steps = []
    for group, name, build in rows:
        torch.manual_seed(0)
        model = build(D_IN, K)
        steps.append(
            (
                group,
                name,
                train_step(model, (x, mask), labels, torch.optim.Adam(model.parameters(), lr=1e-3)),
                sum(p.numel() for p in model.parameters()),
            )
        )
    for _, _, step, _ in steps:  # warm-up: Adam state, allocator
        step()
    times = {name: [] for _, name, _, _ in steps}
    for _ in range(args.rounds):
        for _, name, step, _ in steps:
            times[name].append(timed(step))

    print(
        "\n| group | model | params | median s/step | samples/s | ratio vs group's first row | best s | ratio (best) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    base = {}
    for group, name, _, n_params in steps:
        med, best = statistics.median(times[name]), min(times[name])
        med0, best0 = base.setdefault(group, (med, best))
        print(
            f"| {group} | {name} | {n_params:,} | {med:.3f} | {B / med:.1f} | {med0 / med:.2f}x | {best:.3f} | "
            f"{best0 / best:.2f}x |"
        )
    print(
        "\nper-round seconds: "
        + "; ".join(f"{n.split(' (')[0]}: {', '.join(f'{t:.3f}' for t in ts)}" for n, ts in times.items())
    )
    print(f"load average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
