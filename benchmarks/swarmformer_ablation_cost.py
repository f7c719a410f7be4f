"""The cost side of paper 000 §9.5's trade-offs: SwarmFormer-Small's train step and inference batch per T_local and per
cluster size, at the claims profile's grid settings (128 tokens, batch 48), as ratios to the default point
(T_local = 3, C = 8), in one process run.

The ablation grids (``scripts/claims.sh grid t_local`` / ``cluster_size``) record accuracy per point; their timings
are taken wherever each point happened to run, beside whatever else shared the machine. Here every point is timed
in the same interleaved rounds (point 1, point 2, ..., point 1, ...), so a busy machine slows all alike and the
ratios hold; the table gives the median of the rounds and, less sensitive to other processes' bursts, the best.
The two default rows (T_local = 3 and C = 8) are the same model timed twice: their gap is the run's noise.

  * train step = ``swarmlab.bench.train_step``: forward, cross-entropy, backward, clip at 1.0, AdamW (the engine's
    step); bf16 autocast where the CPU computes bf16 natively (the profile's ``amp: auto``), else fp32.
  * inference = ``model.eval()`` + ``torch.inference_mode()`` forward of one batch of 256 (the evaluate stage's).

    python benchmarks/swarmformer_ablation_cost.py [--rounds R] [--threads T] [--seq-len L] [--batch B]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from models import create_model
from swarmlab.bench import timed, train_step
from swarmlab.engine.device import native_bf16
from swarmlab.machine import describe_machine

DEFAULT = {"t_local": 3, "cluster_size": 8}
GRID = [("t_local", v) for v in (1, 2, 3, 4, 5)] + [("cluster_size", v) for v in (2, 4, 8, 16)]


def make_jobs(setting: str, value: int, args, amp: bool) -> tuple[dict, int]:
    torch.manual_seed(0)
    model = create_model("swarmformer_small", seq_len=args.seq_len, **{**DEFAULT, setting: value})
    cfg = model.cfg
    ids = torch.randint(1, cfg.vocab_size, (args.batch, cfg.seq_len))
    mask = torch.ones(args.batch, cfg.seq_len, dtype=torch.bool)
    labels = torch.randint(0, cfg.num_classes, (args.batch,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = train_step(model, (ids, mask), labels, opt, amp=amp, clip=1.0)
    eval_ids = torch.randint(1, cfg.vocab_size, (256, cfg.seq_len))
    eval_mask = torch.ones(256, cfg.seq_len, dtype=torch.bool)

    def infer() -> None:
        model.eval()
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            model(eval_ids, eval_mask)

    return {"train": step, "infer": infer}, sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per point (default 5)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2: the IMDB runs' share)")
    ap.add_argument("--seq-len", type=int, default=128, help="tokens (default 128: the grids' length)")
    ap.add_argument("--batch", type=int, default=48, help="training batch (default 48: the shared settings)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.threads < 1 or args.batch < 1:
        ap.error("--rounds, --threads and --batch must be >= 1")
    if any(args.seq_len % v for s, v in GRID if s == "cluster_size"):
        ap.error(f"--seq-len must be a multiple of 16 (every cluster size of the grid), got {args.seq_len}")
    torch.set_num_threads(args.threads)
    amp = native_bf16(torch.device("cpu"))
    print(describe_machine())
    print(
        f"SwarmFormer-Small, {args.seq_len} tokens, train batch {args.batch}, inference batch 256, "
        f"{args.threads} thread(s), {'bf16 autocast' if amp else 'fp32'}, {args.rounds} interleaved rounds\n"
    )
    points = {(s, v): make_jobs(s, v, args, amp) for s, v in GRID}
    for jobs, _ in points.values():  # warm-up: thread pools, oneDNN primitives, optimizer state
        jobs["train"]()
        jobs["infer"]()
    times: dict[tuple, dict[str, list[float]]] = {p: {"train": [], "infer": []} for p in points}
    for _ in range(args.rounds):
        for p, (jobs, _) in points.items():
            for kind in ("train", "infer"):
                times[p][kind].append(timed(jobs[kind]))
    base = ("t_local", DEFAULT["t_local"])
    ref = {k: statistics.median(times[base][k]) for k in ("train", "infer")}
    print(
        "| point | parameters | train step ms (median / best) | x default | inference ms (median / best) | x default |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for (s, v), (_, n_params) in points.items():
        t, i = times[(s, v)]["train"], times[(s, v)]["infer"]
        mark = " (default)" if DEFAULT[s] == v else ""
        print(
            f"| {s}={v}{mark} | {n_params:,} | {1e3 * statistics.median(t):.1f} / {1e3 * min(t):.1f} | "
            f"{statistics.median(t) / ref['train']:.2f} | {1e3 * statistics.median(i):.1f} / {1e3 * min(i):.1f} | "
            f"{statistics.median(i) / ref['infer']:.2f} |"
        )


if __name__ == "__main__":
    main()
