"""The banded window kernel now against the two it replaced, in one process run on this CPU.

The kernels of an older commit (default: f937df0, the last one with two banded kernels) are loaded from
``git show <rev>:<path>`` into throw-away modules, so both versions run interleaved in the same process:

  * Longformer: ``attention_patterns.sliding_chunks_attention`` (global first token, no bias), the
    ``longformer`` geometry H=4, Dh=32, w=32;
  * enhanced SwarmFormer: ``window_attention.sliding_window_attention`` (relative bias, no global token),
    its geometry H=4, Dh=32, r=16;

at L tokens (default 4096) with a key mask that pads the second sample, forward alone and forward +
backward (with a random incoming gradient), median and best of ``--rounds`` interleaved rounds (old, new, old,
new, ...), after one warm-up each.
The outputs of old and new are compared too (max |difference|).

    python benchmarks/window_kernel_speed.py [--tokens 4096] [--batch 2] [--rounds 7] [--rev f937df0]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import tempfile
from pathlib import Path

import torch

from models.layers.attention_patterns import sliding_chunks_attention
from models.layers.window_attention import sliding_window_attention
from swarmlab.bench import timed
from swarmlab.machine import describe_cpu

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout whose git history holds the old kernels


def load_old(rev: str, path: str, name: str):
    """Import ``path`` as it was at git ``rev`` under the module name ``name``."""
    src = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    tmp = Path(tempfile.mkdtemp()) / f"{name}.py"
    tmp.write_text(src)
    spec = importlib.util.spec_from_file_location(name, tmp)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rev", default="f937df0", help="git revision holding the old kernels")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    old_lf = load_old(args.rev, "models/layers/attention_patterns.py", "old_attention_patterns")
    old_sw = load_old(args.rev, "models/layers/window_attention.py", "old_window_attention")

    B, H, L, Dh = args.batch, 4, args.tokens, 32
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, L, Dh, generator=g, requires_grad=True) for _ in range(3))
    mask = torch.ones(B, L, dtype=torch.bool)
    mask[1, L - L // 3 :] = False
    bias = torch.randn(H, 33, generator=g, requires_grad=True)
    grad = torch.randn(B, H, L, Dh, generator=g)  # an incoming gradient like a model's (a sum's is stride-0)
    cases = {
        "longformer w=32 +global": (
            lambda: old_lf.sliding_chunks_attention(q, k, v, mask, window_one_sided=32, global_first=True),
            lambda: sliding_chunks_attention(q, k, v, mask, window_one_sided=32, global_first=True),
        ),
        "enhanced r=16 +bias": (
            lambda: old_sw.sliding_window_attention(q, k, v, window_one_sided=16, key_mask=mask, rel_bias=bias),
            lambda: sliding_window_attention(q, k, v, window_one_sided=16, key_mask=mask, rel_bias=bias),
        ),
    }
    print(
        f"CPU {describe_cpu()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s); B={B} H={H} L={L} Dh={Dh}; "
        f"old = {args.rev}, {args.rounds} interleaved rounds; median and best ms (best: least disturbed by other processes)"
    )
    print(
        "| kernel | mode | old median | new median | new/old | old best | new best | new/old (best) | max abs diff |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for label, (old, new) in cases.items():
        with torch.no_grad():
            diff = (old() - new()).abs().max().item()
        for mode in ("forward", "fwd+bwd"):

            def run(fn):
                if mode == "forward":
                    with torch.no_grad():
                        return timed(fn)
                return timed(lambda: fn().backward(grad))

            run(old), run(new)  # warm-up
            t_old, t_new = [], []
            for _ in range(args.rounds):
                t_old.append(run(old))
                t_new.append(run(new))
            mo, mn = statistics.median(t_old) * 1e3, statistics.median(t_new) * 1e3
            bo, bn = min(t_old) * 1e3, min(t_new) * 1e3
            print(
                f"| {label} | {mode} | {mo:.1f} | {mn:.1f} | {mn / mo:.2f} | {bo:.1f} | {bn:.1f} | {bn / bo:.2f} | {diff:.1e} |"
            )


if __name__ == "__main__":
    main()
