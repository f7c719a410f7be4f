"""Every decisive model's train step at its claims-profile shape, beside its FLOP bound and its public reference code
at the same config, width and depth, timed interleaved in one process run (issue 40, item 1).

Rows: the models the claims profile (params.yaml ``profiles.claims``) trains, each at its task's shapes, plus
``set_transformer_sab`` (a clustering_direct model of the defaults) at clustering_direct's. Shapes, model overrides,
optimizer and gradient clipping come from the resolved claims params (``swarmlab.drive.run_config``); a set task's N is
the middle of its claims n range (clustering_direct 100..300 -> 200, clustering_mog 100..500 -> 300), a text task's L
its model's ``seq_len`` (imdb 256) or the data's ``max_len`` (lra_text 1024), MNIST's images 1x28x28.

Columns:
  * **ours ms**: median of ``--rounds`` rounds of one train step (forward, cross-entropy against random labels,
    zero_grad, backward, clipping where the task clips, the task's optimizer step: ``swarmlab.bench.train_step``;
    the MoG task's likelihood loss and MNIST's per-sub-pixel one are replaced by a cross-entropy over the same logits,
    a negligible share of the step; inputs are random, all real, with the all-True mask the engine passes),
    fp32 for every row (the claims runs' ``amp: auto`` is bf16 autocast on a CPU with native bf16; the header says
    which), after a FLOP-counting step and one warm-up step. All rows, ours and references, are timed interleaved
    (row 1 ours, row 1 reference, row 2 ours, ..., row 1 ours, ...) so that a shared machine slows all alike.
  * **reference**: public code built from OUR model's config (same width, depth, heads, dropout, input and output
    sizes), called the same way on the same tensors with the same optimizer:
      - swarmformer_small: the authors' SwarmFormer (swarmlab/testing/reference_swarmformer.py);
      - swarm: the authors' SwarmLayer (swarmlab/testing/reference_swarm.py), with the entity mean for the MoG head;
      - set_transformer_isab / _sab: the public Set Transformer blocks (swarmlab/testing/reference_set_transformer.py;
        SAB = MAB(X, X); their PMA for the MoG head) at our width, heads, inducing points, layers and LayerNorm
        switch, their one-layer rFF deepened to ours (``PublicSetTransformer``'s ``ff_depth``). They keep their
        structure, so they hold fewer parameters (the params column): no output projection after attention, no
        embedding before the first block (which reads the 2-D points), no rFF before PMA; and no mask;
      - transformer: ``torch.nn.TransformerEncoder`` (batch_first, norm_first, GELU, our d_model, heads, FFN width,
        layers, dropout and attention dropout, a final LayerNorm) with our embedding, positions and head, the mask
        as ``src_key_padding_mask``; the authors' SwarmFormer takes no mask (nor does our Small use one);
      - the others: no public reference (``-``).
  * **speed-up** = reference ms / ours ms (> 1: ours is faster).
  * **GFLOP** per step, forward + backward (``swarmlab.bench.count_flops``; the optimizer's elementwise update is not
    counted), ours / reference; **bound ms** = our FLOPs / the fp32 matmul ceiling, the best of a 1024^3 matmul and
    SWARM's (1024 x 192) x (192 x 768), timed in the same rounds (as benchmarks/set_step_bound.py);
    **ours / bound** = ours ms / bound ms (1 = the step runs at the matmul peak).

    PYTHONPATH=. python benchmarks/family_step.py --rounds 3 --threads 1     # the whole table, minutes on one core
    PYTHONPATH=. python benchmarks/family_step.py --only swarm,transformer --rounds 5
    PYTHONPATH=. python benchmarks/family_step.py --quick                    # tiny shapes, one round: a smoke test

(``PYTHONPATH=.``: a script's own folder comes first on ``sys.path``, so without it ``models`` and ``swarmlab`` are
imported from wherever the environment installed them; the header prints the checkout that was timed.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from models import create_model
from swarmlab.bench import count_flops, matmul_probe, timed, train_step
from swarmlab.engine import make_optimizer, resolve_amp
from swarmlab.machine import cpu_flags
from swarmlab.drive.params import load_params
from swarmlab.drive.run_config import model_overrides, train_config
from swarmlab.paths import git_commit
from swarmlab.testing.reference_set_transformer import PublicISAB, PublicMAB
from swarmlab.testing.reference_swarm import authors_swarm
from swarmlab.testing.reference_swarmformer import AuthorsSwarmFormer

ROWS = [  # (task, model): the claims profile's models, and SAB beside ISAB
    ("imdb", "swarmformer_small"),
    *[("clustering_direct", m) for m in ("swarm", "set_transformer_isab", "set_transformer_sab")],
    *[("clustering_direct", m) for m in ("set_linear_mean", "set_linear_max", "lstm", "lstm_sorted")],
    ("clustering_mog", "swarm"),
    ("clustering_mog", "set_transformer_isab"),
    ("mnist", "swarm_transformer_small"),
    *[("lra_text", m) for m in ("hsw_small", "longformer", "transformer")],
]
# what the data fixes (tasks' model_kwargs, which read the data's meta.json): vocabularies, classes, dimensions
DATA = {
    "imdb": {"vocab_size": 30522, "num_classes": 2},  # bert-base-uncased WordPiece, negative / positive
    "clustering_direct": {"dim_input": 2},  # dim_output = the task's slots option
    "clustering_mog": {"dim_input": 2, "dim_output": 4 * (2 * 2 + 1)},  # (pi, mu, sigma) of 4 components in R^2
    "mnist": {"image_size": (1, 28, 28), "num_classes": 10},
    "lra_text": {"vocab_size": 259, "num_classes": 2},  # bytes + PAD/CLS/SEP (tasks/long_data.py); seq_len = max_len
}
QUICK = {"B": 2, "N": 16, "L": 128, "image": (1, 8, 8)}  # --quick: tiny inputs, the real widths and depths
CEILINGS = {"1024^3": (1024, 1024, 1024), "SWARM (1024x192)x(192x768)": (1024, 192, 768)}


@dataclass
class Row:
    task: str
    model: str
    kind: str  # "text", "set" or "image"
    shape: dict  # B and N, L or image
    overrides: dict  # create_model keywords: the data's, then the claims' model_overrides


def resolve_rows(params: dict, only: set[str] | None = None, quick: bool = False) -> list[Row]:
    """The table's rows (those of ``only`` when given) at the shapes of ``params``; tiny ones when ``quick``."""
    rows = []
    for task, model in ROWS:
        if only and model not in only:
            continue
        options = params["tasks"][task].get("options") or {}
        data = dict(DATA[task])
        B = QUICK["B"] if quick else train_config(params, task, model).batch_size
        if task.startswith("clustering"):
            data.setdefault("dim_output", options.get("slots"))
            kind, shape = "set", {"N": QUICK["N"] if quick else (options["n_min"] + options["n_max"]) // 2}
        elif task == "mnist":
            data["image_size"] = QUICK["image"] if quick else data["image_size"]
            kind, shape = "image", {"image": data["image_size"]}
        else:
            if task == "lra_text" or quick:  # lra_text: seq_len = the data's max_len, as its model_kwargs
                data["seq_len"] = QUICK["L"] if quick else options["max_len"]
            kind, shape = "text", {}
        overrides = {**data, **model_overrides(params, task, model)}
        if kind == "text":  # imdb: the model's own seq_len (256 for Small)
            shape["L"] = overrides.get("seq_len") or create_model(model, **overrides).cfg.seq_len
        rows.append(Row(task, model, kind, {"B": B, **shape}, overrides))
    return rows


# ---- references built from our config --------------------------------------------------------------------------


class Adapter(nn.Module):
    """``fn(inner, *inputs)``: a model called the way the step calls every model of its row."""

    def __init__(self, inner: nn.Module, fn):
        super().__init__()
        self.inner, self.fn = inner, fn

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.fn(self.inner, *inputs)


def entity_mean(layer: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The authors' MoG head: per-entity outputs averaged over the real entities, (B, N, K) -> (B, K)."""
    m = mask[..., None].float()  # (B, N, 1)
    return (layer(x, mask) * m).sum(1) / m.sum(1)


class PublicSetTransformer(nn.Module):
    """The public blocks as juho-lee/set_transformer assembles them: ISAB(X) or SAB(X) = MAB(X, X), the first from
    the input width; a per-entity Linear, or PMA (k seeds attend to the set, MAB(S, X)) and a Linear.

    ``ff_depth``: their rFF is ``relu(fc_o(O))``, one Linear + ReLU; with ``ff_depth`` d, ``fc_o`` becomes d Linears
    with ReLUs between, so that ``relu(fc_o(O))`` is d x (Linear + ReLU), our ``RowwiseFF`` (the SWARM authors'
    RFF has 4). Nothing else of the block changes."""

    def __init__(self, cfg, *, pma_seeds: int = 1):
        super().__init__()
        assert cfg.head in ("none", "pma"), f"no public head for head={cfg.head!r}"
        D, H, ln = cfg.dim_hidden, cfg.num_heads, cfg.layer_norm
        widths = [cfg.dim_input] + [D] * cfg.num_layers
        self.sab = cfg.block == "sab"
        self.blocks = nn.ModuleList(
            PublicMAB(a, a, b, H, ln=ln) if self.sab else PublicISAB(a, b, H, cfg.num_inds, ln=ln)
            for a, b in zip(widths[:-1], widths[1:])
        )
        self.seeds = nn.Parameter(nn.init.xavier_uniform_(torch.empty(1, pma_seeds, D))) if cfg.head == "pma" else None
        self.pma = PublicMAB(D, D, D, H, ln=ln) if cfg.head == "pma" else None
        self.out = nn.Linear(D * (pma_seeds if cfg.head == "pma" else 1), cfg.dim_output)
        for mab in (m for m in self.modules() if isinstance(m, PublicMAB)):
            linears = [nn.Linear(mab.dim_v, mab.dim_v) for _ in range(cfg.ff_depth)]
            mab.fc_o = nn.Sequential(*[m for lin in linears[:-1] for m in (lin, nn.ReLU())], linears[-1])

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for block in self.blocks:  # the mask is ignored: the public blocks attend to every entity
            x = block(x, x) if self.sab else block(x)  # (B, N, D)
        if self.pma is None:
            return self.out(x)  # (B, N, dim_output)
        return self.out(self.pma(self.seeds.repeat(x.shape[0], 1, 1), x).flatten(1))  # (B, dim_output)


class TorchTransformer(nn.Module):
    """Our encoder classifier's embedding, positions, mean pooling and head around ``nn.TransformerEncoder`` (pre-LN,
    GELU, FFN ``mlp_ratio * D``, a final LayerNorm): full attention as PyTorch ships it."""

    def __init__(self, cfg):
        super().__init__()
        D = cfg.d_model
        self.tok_emb, self.pos_emb = nn.Embedding(cfg.vocab_size, D), nn.Embedding(cfg.seq_len, D)
        self.drop, self.head_drop = nn.Dropout(cfg.dropout), nn.Dropout(cfg.dropout)
        layer = nn.TransformerEncoderLayer(
            D, cfg.num_heads, cfg.mlp_ratio * D, cfg.dropout, "gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, cfg.num_layers, norm=nn.LayerNorm(D), enable_nested_tensor=False)
        for block in self.encoder.layers:
            block.self_attn.dropout = cfg.attention_dropout  # ours has its own rate on the probabilities (lra: 0)
        self.head = nn.Linear(D, cfg.num_classes)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.tok_emb(ids) + self.pos_emb.weight[: ids.shape[1]])  # (B, L, D)
        x = self.encoder(x, src_key_padding_mask=~mask)  # (B, L, D); True = padding for torch
        m = mask[..., None].float()
        return self.head(self.head_drop((x * m).sum(1) / m.sum(1)))  # (B, num_classes)


def swarm_reference(cfg) -> nn.Module:
    assert cfg.pooling in ("mean", "causal") and cfg.head in ("none", "mean"), "no authors' layer for this SWARM"
    layer = authors_swarm(
        cfg.dim_input, cfg.dim_output, cfg.dim_hidden, cfg.n_iter, cfg.num_layers, cfg.dropout, cfg.pooling.upper()
    )
    return Adapter(layer, entity_mean) if cfg.head == "mean" else layer


REFERENCES = {  # our model's name -> (reference name, builder from our model's config)
    "swarmformer_small": (
        "authors' SwarmFormer",
        lambda c: Adapter(  # it takes token ids only: PAD is a token to it, as to our (not pad-aware) Small
            AuthorsSwarmFormer(
                c.vocab_size, c.d_model, c.num_layers, c.t_local, c.cluster_size, c.dropout, c.num_classes
            ),
            lambda m, ids, mask: m(ids),
        ),
    ),
    "swarm": ("authors' SwarmLayer", swarm_reference),
    "set_transformer_isab": ("public ISAB blocks", PublicSetTransformer),
    "set_transformer_sab": ("public MAB as SAB", PublicSetTransformer),
    "transformer": ("torch nn.TransformerEncoder", TorchTransformer),
}


def build_ours(row: Row) -> nn.Module:
    """Our model of the row, seeded as in every pair."""
    torch.manual_seed(0)
    return create_model(row.model, **row.overrides)


def build_pair(row: Row) -> tuple[nn.Module, nn.Module | None]:
    """Our model and its reference (None where there is none), both seeded the same."""
    ours = build_ours(row)
    if row.model not in REFERENCES:
        return ours, None
    torch.manual_seed(0)
    return ours, REFERENCES[row.model][1](ours.cfg)


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---- one train step per model ----------------------------------------------------------------------------------


def row_batch(row: Row) -> tuple[tuple, torch.Tensor]:
    """The row's random inputs (as its model is called) and labels, the same at every call."""
    g = torch.Generator().manual_seed(0)
    B = row.shape["B"]
    if row.kind == "text":
        L = row.shape["L"]
        inputs = (
            torch.randint(3, row.overrides["vocab_size"], (B, L), generator=g),
            torch.ones(B, L, dtype=torch.bool),
        )
        return inputs, torch.randint(0, row.overrides["num_classes"], (B,), generator=g)
    if row.kind == "set":
        N, K = row.shape["N"], row.overrides["dim_output"]
        inputs = (torch.randn(B, N, 2, generator=g), torch.ones(B, N, dtype=torch.bool))  # one N per batch: all real
        return inputs, torch.randint(0, K, (B,) if row.task == "clustering_mog" else (B, N), generator=g)
    pixels = torch.randint(0, 256, (B, *row.shape["image"]), generator=g)
    return (pixels, torch.randint(0, 10, (B,), generator=g)), pixels.permute(0, 2, 3, 1)


def make_step(row: Row, model: nn.Module, params: dict, amp: bool = False):
    """One train step of ``model`` on the row's random inputs, with the task's optimizer and clipping; its forward in
    bf16 autocast when ``amp``."""
    inputs, labels = row_batch(row)
    if row.kind == "image":
        # logits (B, 256, C, H, W) as the task's loss reads them, (B, H, W, C, 256): a view of their memory, no copy
        model = Adapter(model, lambda m, pixels, y: m(pixels, y).permute(0, 3, 4, 2, 1))
    tc = train_config(params, row.task, row.model)
    opt = make_optimizer(model, tc, torch.device("cpu"))
    return train_step(model, inputs, labels, opt, amp=amp, clip=tc.grad_clip or None)


# ---- measurement and table -------------------------------------------------------------------------------------


def measure(rows: list[Row], params: dict, rounds: int) -> dict:
    entries = []  # (row index, "ours" | "ref", step)
    res = {"params": {}, "flops": {}, "times": {}}
    for i, row in enumerate(rows):
        for side, model in zip(("ours", "ref"), build_pair(row)):
            if model is None:
                continue
            step = make_step(row, model, params)
            res["params"][i, side], res["flops"][i, side] = num_params(model), count_flops(step)
            step()  # warm-up: Adam state, allocator, kernels outside the counting mode
            entries.append(((i, side), step))
            res["times"][i, side] = []
    probes = {name: matmul_probe(*shape) for name, shape in CEILINGS.items()}
    peak = {name: 0.0 for name in probes}
    for _ in range(rounds):
        for name, probe in probes.items():
            peak[name] = max(peak[name], probe())
        for key, step in entries:
            res["times"][key].append(timed(step))
    res["ceiling_gflops"] = peak
    return res


def shape_text(row: Row) -> str:
    s = row.shape
    return f"B={s['B']}, " + (
        f"N={s['N']}" if "N" in s else f"L={s['L']}" if "L" in s else "x".join(map(str, s["image"]))
    )


def table(rows: list[Row], res: dict) -> str:
    ceiling = max(res["ceiling_gflops"].values())
    lines = [
        "| model | task | shape | params ours / ref | ours ms | reference | ref ms | speed-up | GFLOP/step ours / ref "
        "| bound ms | ours / bound |",
        "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for i, row in enumerate(rows):
        ours, flops = statistics.median(res["times"][i, "ours"]), res["flops"][i, "ours"]
        bound = flops / (ceiling * 1e9)
        has_ref = (i, "ref") in res["times"]
        ref = statistics.median(res["times"][i, "ref"]) if has_ref else None
        n_ref = f"{res['params'][i, 'ref']:,}" if has_ref else "-"
        f_ref = f"{res['flops'][i, 'ref'] / 1e9:.2f}" if has_ref else "-"
        lines.append(
            f"| {row.model} | {row.task} | {shape_text(row)} | {res['params'][i, 'ours']:,} / {n_ref} | "
            f"{ours * 1e3:.0f} | {REFERENCES[row.model][0] if has_ref else '-'} | "
            f"{f'{ref * 1e3:.0f}' if has_ref else '-'} | {f'{ref / ours:.2f}x' if has_ref else '-'} | "
            f"{flops / 1e9:.2f} / {f_ref} | {bound * 1e3:.1f} | {ours / bound:.1f} |"
        )
    peaks = ", ".join(f"{k} {v:.1f}" for k, v in res["ceiling_gflops"].items())
    return "\n".join(lines) + f"\n\nfp32 matmul ceiling {ceiling:.1f} GFLOP/s (best of {peaks})"


def cpu_line() -> str:
    name, flags = cpu_flags()
    isa = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile"))
    return f"CPU: {name}; {isa}; torch capability {torch.backends.cpu.get_cpu_capability()}; {os.cpu_count()} cores"


def row_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of a benchmark over this table's rows (this one and benchmarks/compile_step.py)."""
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds after one warm-up (default 5)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--only", default="", help="comma-separated model names (default: every row)")
    ap.add_argument("--quick", action="store_true", help="tiny inputs (real widths and depths), one round")
    ap.add_argument("--profile", default="claims", help="params.yaml profile of the shapes (default claims)")


def only_models(ap: argparse.ArgumentParser, text: str) -> set[str]:
    """``--only``'s models; a name that is no row of the table is the parser's error."""
    only = {m for m in text.split(",") if m}
    unknown = sorted(only - {m for _, m in ROWS})
    if unknown:
        ap.error(f"--only: {unknown} are not rows of the table ({', '.join(dict.fromkeys(m for _, m in ROWS))})")
    return only


def setup(args: argparse.Namespace, only: set[str]) -> tuple[dict, list[Row], int]:
    """The threads set, the profile's params, the table's rows and the rounds, from ``row_arguments``' options."""
    torch.set_num_threads(args.threads)
    params = load_params(profile=args.profile)
    return params, resolve_rows(params, only, args.quick), 1 if args.quick else args.rounds


def header(title: str, args: argparse.Namespace, rounds: int, extra: str = "", precision: str = "fp32") -> str:
    """The CPU line and the run's line (what was timed, when, at which commit, threads, precision, profile, rounds,
    load)."""
    return (
        f"{cpu_line()}\n# {title}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {git_commit()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {precision}, profile {args.profile}"
        f"{' (--quick: tiny shapes)' if args.quick else ''}, {rounds} round(s) after 1 warm-up, {extra}load average "
        f"at start {os.getloadavg()[0]:.1f}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    row_arguments(ap)
    args = ap.parse_args(argv)
    params, rows, rounds = setup(args, only_models(ap, args.only))
    code = Path(create_model.__code__.co_filename).parents[1]  # the checkout whose models are timed (PYTHONPATH)
    print(header("train step per model family vs reference and FLOP bound", args, rounds, f"code from {code}, "))
    amp = "bf16" if resolve_amp("auto", torch.device("cpu")) else "fp32"
    print(f"(the claims runs' amp 'auto' is {amp} on this CPU; every row here is fp32)\n", flush=True)
    t0 = time.perf_counter()
    print(table(rows, measure(rows, params, rounds)))
    print(f"load average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
