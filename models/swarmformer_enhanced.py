"""Enhanced SwarmFormer (paper 001, a community design with no public code): seven changes, each a switch.

  a. ``window_attn``  multi-head local window attention (``window_one_sided`` tokens each side, PAD keys
     masked, learned relative-position bias) replaces the circular neighbour mean of the local swarm step;
  b. ``cluster_mha``  multi-head self-attention among the cluster representatives (with an output
     projection) instead of the single-head, projection-free attention;
  c. ``routing``      tokens score learnable cluster embeddings and take a Gumbel-softmax assignment
     (temperature annealable, ``gumbel_hard`` straight-through option) instead of contiguous chunks;
     representatives are assignment-weighted means of the real tokens and the broadcast uses the same
     assignment;
  d. ``gated_mlp``    the cluster -> token update is a gated residual MLP ``x + g * MLP(norm(r))`` (hidden
     ``mlp_ratio * D``) instead of ``x + g * Linear(r)``;
  e. ``preln``        a LayerNorm before every attention and MLP block (local mixer, local MLP, routing scores,
     cluster attention, broadcast update) and before pooling;
  f. ``tied_qkv``     one projection gives Q, K and V in the cluster attention;
  g. ``pyramid``      layer l has ``C / pyramid_factors[l]`` clusters (C, C/2, C/4, ...).

With all seven off the model computes exactly what ``models.swarmformer.SwarmFormer`` computes (same
parameter names, so a reference state dict loads strictly); the differences are masks: PAD tokens are
excluded everywhere (the neighbour mean wraps around among real tokens, chunk means and pooling skip PAD),
which the reference does not do. Every path is padding-invariant, so the model pads inputs internally to the
multiple it needs (the routing block or the largest chunk).

Things the design leaves open, and the choices made here:
  * where the window attention sits: it replaces only the neighbour mean; the local MLP, the gate and the
    ``T_local`` weight-shared micro-steps stay as in the original;
  * the cluster attention output replaces the representatives (no residual), as in the original;
  * the gated residual MLP runs per cluster and is then broadcast (``O(C d^2)``, not ``O(L d^2)``), in the
    same order as the original's Linear-then-copy;
  * attention-weight dropout is ``attn_dropout`` (default 0, unlike the original's 0.4): weight dropout
    forces PyTorch's quadratic math kernel on CPU; outputs are still dropped with ``dropout``.

Routing memory. Scores are ``B * L * C_block`` floats per layer (training keeps ~3 such tensors: logits,
noise, soft assignment), where ``C_block = routing_block / cluster_size``. Global routing over
``C = L / S`` clusters is quadratic in L (100k tokens, S=8: 1.25e9 scores, 5 GB per tensor), so routing is
block-local: each block of ``routing_block`` consecutive tokens routes among its own instances of the same
``C_block`` learned embeddings. With ``routing_block = seq_len`` (the registered defaults) this *is* global
routing at the training length; at longer inputs the parameters are unchanged and memory stays linear:
100k tokens with routing_block=256, S=8 give 3.2e6 scores and 12.5k representatives attended by SDPA's
memory-efficient kernel.

Gumbel temperature. ``gumbel_tau`` is the start value. Either let the model anneal itself per training step
(``gumbel_anneal_steps > 0``: geometric from ``gumbel_tau`` to ``gumbel_tau_final``; the step counter is a
buffer, so checkpoints resume exactly), or call ``model.set_temperature(tau)`` from a training loop, e.g.
with :func:`gumbel_anneal_callback` passed to ``swarmlab.engine.fit(callbacks=...)``. Eval mode uses
no noise: ``softmax(logits / tau)``, or the one-hot argmax when ``gumbel_hard``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.attention import MultiHeadSelfAttention
from models.layers.clustering import ChunkClusters, GumbelRouter, lcm
from models.layers.drop import Dropout
from models.layers.gates import GateNet
from models.layers.mlp import Mlp
from models.layers.neighbours import NeighbourMean
from models.layers.params import NumParamsMixin
from models.layers.window_attention import LocalWindowAttention
from models.registry import build_config, register_model
from swarmlab.settings import check_config, setting

# switch name -> registered ablation suffix (each ablation turns exactly this one switch off)
SWITCHES: dict[str, str] = {
    "window_attn": "no_window",
    "cluster_mha": "no_mha",
    "routing": "no_routing",
    "gated_mlp": "no_gated_mlp",
    "preln": "no_preln",
    "tied_qkv": "no_tied_qkv",
    "pyramid": "no_pyramid",
}


@dataclass
class EnhancedSwarmFormerConfig:
    vocab_size: int = setting(30522, ge=1)  # bert-base-uncased WordPiece vocabulary
    num_classes: int = setting(2, ge=1)  # IMDB: negative / positive
    d_model: int = setting(128, ge=1)  # D; paper 000 Small
    num_layers: int = setting(2, ge=1)  # the paper's best configs use 2 layers
    t_local: int = setting(3, ge=1)  # local swarm micro-steps per layer, sharing one step's weights
    cluster_size: int = setting(8, ge=1)  # S: tokens per cluster in the lowest layer (C = routing_block / S per block)
    seq_len: int = setting(256, ge=1)  # L the data is padded/truncated to; other lengths work (padded internally)
    # the original's one rate: embeddings, local steps, MLPs, attention outputs
    dropout: float = setting(0.4, ge=0, lt=1)
    attn_dropout: float = setting(0.0, ge=0, lt=1)  # on attention weights; > 0 forces SDPA's O(C^2) math kernel on CPU
    heads: int = setting(4, ge=1)  # H for window attention and (when cluster_mha) cluster attention
    dim_head: int = setting(32, ge=1)  # Dh; scale Dh ** -0.5; H * Dh = D for Small
    # a. local window attention instead of the circular neighbour mean
    window_attn: bool = setting(True)
    window_one_sided: int = setting(16, ge=1)  # each token sees 16 tokens on each side and itself: 33 in total
    # b. multi-head cluster attention (off: one head of width D, no output projection)
    cluster_mha: bool = setting(True)
    # c. Gumbel-softmax token -> cluster routing (off: contiguous chunks of S tokens)
    routing: bool = setting(True)
    routing_block: int = setting(256, ge=1)  # tokens per routing block; = seq_len means global routing at that length
    gumbel_tau: float = setting(1.0, gt=0)  # temperature (the start value when annealed)
    gumbel_tau_final: float = setting(0.5, gt=0)  # end of the built-in anneal; unused when gumbel_anneal_steps = 0
    gumbel_anneal_steps: int = setting(0, ge=0)  # training forwards to anneal over; 0 = constant / set_temperature()
    gumbel_hard: bool = setting(False)  # one-hot assignments, straight-through gradients
    # d. gated residual MLP for the cluster -> token update (off: a Linear)
    gated_mlp: bool = setting(True)
    mlp_ratio: int = setting(2, ge=1)  # hidden width of that MLP = mlp_ratio * D
    # e. pre-LayerNorm before every attention / MLP block and before pooling
    preln: bool = setting(True)
    # f. one shared projection for Q, K and V in the cluster attention
    tied_qkv: bool = setting(True)
    # g. pyramid: layer l has C / pyramid_factors[l] clusters (the last factor repeats for deeper layers)
    pyramid: bool = setting(True)
    pyramid_factors: tuple[int, ...] = (1, 2, 4)

    def __post_init__(self):
        if isinstance(self.pyramid_factors, list):  # params.yaml gives lists
            self.pyramid_factors = tuple(self.pyramid_factors)
        check_config(self)
        if not self.pyramid_factors or any(f < 1 for f in self.pyramid_factors):
            raise ValueError(f"pyramid_factors must be positive ints, got {self.pyramid_factors!r}")
        if self.routing:
            for level, size in enumerate(self.level_cluster_sizes):
                if self.routing_block % size:
                    raise ValueError(
                        f"routing_block={self.routing_block} is not a multiple of layer {level}'s cluster size "
                        f"{size} (cluster_size * pyramid factor): choose a routing_block divisible by {size}"
                    )

    @property
    def level_factors(self) -> list[int]:
        """Pyramid factor of each layer (all 1 when the pyramid is off)."""
        if not self.pyramid:
            return [1] * self.num_layers
        f = self.pyramid_factors
        return [f[min(level, len(f) - 1)] for level in range(self.num_layers)]

    @property
    def level_cluster_sizes(self) -> list[int]:
        """Tokens per cluster in each layer: S * factor (routing: routing_block / clusters per block)."""
        return [self.cluster_size * f for f in self.level_factors]

    def cluster_counts(self, length: int | None = None) -> list[int]:
        """Clusters attended in each layer for an input of ``length`` tokens (default seq_len)."""
        length = self.seq_len if length is None else length
        multiple = self.pad_multiple
        padded = -(-length // multiple) * multiple
        return [padded // size for size in self.level_cluster_sizes]

    @property
    def num_clusters(self) -> int:
        """C: clusters in the lowest layer at seq_len."""
        return self.cluster_counts()[0]

    @property
    def pad_multiple(self) -> int:
        """Inputs are padded (masked) to a multiple of this: the routing block, or the largest chunk."""
        return self.routing_block if self.routing else lcm(*self.level_cluster_sizes)


def _norm(cfg: EnhancedSwarmFormerConfig) -> nn.Module:
    return nn.LayerNorm(cfg.d_model) if cfg.preln else nn.Identity()


class LocalSwarmStep(nn.Module):
    """One local micro-step: ``x = drop(x)``; ``n = mix(norm(x))``; ``u = drop(MLP(norm(n)))``;
    ``x + sigmoid(Gate([x; u])) * (u - x)``; ``mix`` is window attention or the circular neighbour mean."""

    def __init__(self, cfg: EnhancedSwarmFormerConfig):
        super().__init__()
        D = cfg.d_model
        self.drop = Dropout(cfg.dropout)
        self.mix_norm = _norm(cfg)
        if cfg.window_attn:
            self.mix = LocalWindowAttention(
                D,
                heads=cfg.heads,
                dim_head=cfg.dim_head,
                window_one_sided=cfg.window_one_sided,
                attn_dropout=cfg.attn_dropout,
            )
        else:
            self.mix = NeighbourMean()
        self.mlp_norm = _norm(cfg)
        self.mlp = Mlp(D, D, cfg.dropout)
        self.gate = GateNet(D)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.drop(x)  # (B, L, D)
        n = self.mix(self.mix_norm(x), mask)  # (B, L, D)
        u = self.drop(self.mlp(self.mlp_norm(n)))  # (B, L, D)
        g = torch.sigmoid(self.gate(x, u))  # (B, L, D)
        return x + g * (u - x)


class ClusterBroadcast(nn.Module):
    """Cluster -> token update: ``u = drop(update(norm(r)))`` per cluster, sent to tokens by the clusterer;
    ``x + sigmoid(Gate([x; u])) * u``; ``update`` is the gated residual MLP or (off) the original Linear."""

    def __init__(self, cfg: EnhancedSwarmFormerConfig):
        super().__init__()
        D = cfg.d_model
        self.gated_mlp = cfg.gated_mlp
        self.norm = _norm(cfg)
        if cfg.gated_mlp:
            self.mlp = Mlp(D, cfg.mlp_ratio * D, cfg.dropout)
        else:
            self.proj = nn.Linear(D, D)
        self.drop = Dropout(cfg.dropout)
        self.gate = GateNet(D)

    def forward(self, x: torch.Tensor, reps: torch.Tensor, clusters: nn.Module, assign) -> torch.Tensor:
        update = self.mlp if self.gated_mlp else self.proj
        u = self.drop(update(self.norm(reps)))  # (B, C, D)
        u = clusters.broadcast(u, assign)  # (B, L, D)
        g = torch.sigmoid(self.gate(x, u))  # (B, L, D)
        return x + g * u


class EnhancedSwarmLayer(nn.Module):
    """``t_local`` local steps (shared weights) -> cluster pooling -> cluster attention -> broadcast."""

    def __init__(self, cfg: EnhancedSwarmFormerConfig, level: int):
        super().__init__()
        self.t_local = cfg.t_local
        self.local = LocalSwarmStep(cfg)
        size = cfg.level_cluster_sizes[level]
        if cfg.routing:
            self.clusters = GumbelRouter(
                cfg.d_model,
                num_clusters=cfg.routing_block // size,
                block=cfg.routing_block,
                hard=cfg.gumbel_hard,
                norm=_norm(cfg),
            )
        else:
            self.clusters = ChunkClusters(size)
        self.cluster_norm = _norm(cfg)
        mha = cfg.cluster_mha
        self.cluster_attn = MultiHeadSelfAttention(
            cfg.d_model,
            heads=cfg.heads if mha else 1,
            dim_head=cfg.dim_head if mha else cfg.d_model,
            tied_qkv=cfg.tied_qkv,
            out_proj=mha,
            attn_dropout=cfg.attn_dropout,
            dropout=cfg.dropout,
        )
        self.broadcast = ClusterBroadcast(cfg)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, tau: torch.Tensor | None) -> torch.Tensor:
        for _ in range(self.t_local):
            x = self.local(x, mask)  # (B, L, D)
        reps, key_mask, assign = self.clusters.pool(x, mask, tau=tau)  # (B, C, D), (B, C) | None
        reps = self.cluster_attn(self.cluster_norm(reps), key_mask)  # (B, C, D)
        return self.broadcast(x, reps, self.clusters, assign)  # (B, L, D)


class EnhancedSwarmFormer(NumParamsMixin, nn.Module):
    """Text classifier: ``model(input_ids (B, L), attention_mask (B, L) bool | None) -> logits (B, num_classes)``.

    ``attention_mask`` True = real token; PAD is excluded from attention keys, neighbour means, routing,
    representatives and pooling, so appending PAD leaves the logits unchanged (eval mode).
    """

    def __init__(self, cfg: EnhancedSwarmFormerConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.emb_drop = Dropout(cfg.dropout)
        self.layers = nn.ModuleList(EnhancedSwarmLayer(cfg, level) for level in range(cfg.num_layers))
        self.ln_f = _norm(cfg)
        self.head_drop = Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, cfg.num_classes)
        if cfg.routing:
            self.register_buffer("gumbel_tau", torch.tensor(float(cfg.gumbel_tau)))
            self.register_buffer("routing_step", torch.tensor(0, dtype=torch.long))  # training forwards so far
        # PyTorch default init, as the original; cluster embeddings are N(0, 1) (see GumbelRouter).

    # ---- Gumbel temperature ------------------------------------------------------------------------------
    @property
    def temperature(self) -> float:
        if not self.cfg.routing:
            raise ValueError("this model has no routing (cfg.routing is False), hence no temperature")
        return float(self.gumbel_tau)

    def set_temperature(self, tau: float) -> None:
        """Set the Gumbel-softmax temperature used from the next forward on (persisted in the state dict)."""
        if not self.cfg.routing:
            raise ValueError("this model has no routing (cfg.routing is False): there is no temperature to set")
        if self.cfg.gumbel_anneal_steps:
            raise ValueError(
                "the model anneals its own temperature (gumbel_anneal_steps > 0); "
                "set gumbel_anneal_steps=0 to control it with set_temperature"
            )
        if not tau > 0:
            raise ValueError(f"temperature must be > 0, got {tau!r}")
        self.gumbel_tau.fill_(float(tau))

    def _step_temperature(self) -> torch.Tensor | None:
        if not self.cfg.routing:
            return None
        cfg = self.cfg
        if self.training and cfg.gumbel_anneal_steps:
            frac = (self.routing_step.float() / cfg.gumbel_anneal_steps).clamp(max=1.0)
            tau = cfg.gumbel_tau * (cfg.gumbel_tau_final / cfg.gumbel_tau) ** frac  # geometric
            self.gumbel_tau.copy_(tau)
            self.routing_step += 1
        return self.gumbel_tau.clone()  # a copy: a later set_temperature must not touch a saved graph tensor

    # ---- forward -----------------------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L = input_ids.shape
        mask = None if attention_mask is None else attention_mask.to(torch.bool)  # (B, L) True = real
        x = self.emb_drop(self.tok_emb(input_ids))  # (B, L, D)
        pad = (-L) % self.cfg.pad_multiple
        if pad:  # padding-invariant model: pad to the multiple that routing / chunks need, masked
            x = F.pad(x, (0, 0, 0, pad))  # (B, L + pad, D)
            if mask is None:
                mask = torch.ones(B, L, dtype=torch.bool, device=x.device)
            mask = F.pad(mask, (0, pad), value=False)
        tau = self._step_temperature()
        for layer in self.layers:
            x = layer(x, mask, tau)  # (B, L, D)
        x = self.ln_f(x)
        if mask is None:
            pooled = x.mean(dim=1)  # (B, D)
        else:
            m = mask[..., None].to(x.dtype)  # (B, L, 1)
            pooled = (x * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)  # (B, D): mean over real tokens
        return self.head(self.head_drop(pooled))  # (B, num_classes)


def gumbel_anneal_callback(model: EnhancedSwarmFormer, *, start: float, end: float, epochs: int):
    """An engine callback ``cb(state)`` (after each evaluation) that anneals the temperature geometrically per epoch.

    Sets ``start`` now and, after epoch ``e``, the value for epoch ``e + 1``: ``start * (end/start) ** (e/(epochs-1))``
    (``end`` from epoch ``epochs`` on). Pass it as ``fit(..., callbacks=(cb,))``. On resume the engine
    restores the checkpointed temperature, which is the one of the last finished epoch (the callback runs
    after the checkpoint is written): the first resumed epoch repeats it. For exact resumes use the built-in
    per-step anneal (``gumbel_anneal_steps``) instead.
    """
    if not (start > 0 and end > 0 and epochs >= 1):
        raise ValueError("start and end must be > 0 and epochs >= 1")

    def tau_for(epoch: int) -> float:  # epochs count from 1
        frac = min(max(epoch - 1, 0) / max(epochs - 1, 1), 1.0)
        return start * (end / start) ** frac

    model.set_temperature(start)  # also validates: raises when the model has no routing or anneals itself

    def callback(state) -> bool:  # swarmlab.engine.TrainState: epochs done, fractional between epoch ends
        model.set_temperature(tau_for(int(state.epoch) + 1))
        return False

    callback.tau_for = tau_for
    return callback


# ---- registered variants ----------------------------------------------------------------------------------
# d, layers, seq len and S as paper 000's Small and Base; routing_block = seq_len: global routing at that length.
_SMALL = dict(
    d_model=128, num_layers=2, seq_len=256, cluster_size=8, t_local=3, heads=4, dim_head=32, routing_block=256
)  # C = 32 clusters, then 16
_BASE = dict(
    d_model=192, num_layers=2, seq_len=768, cluster_size=4, t_local=3, heads=6, dim_head=32, routing_block=768
)  # C = 192 clusters, then 96
_ALL_OFF = {switch: False for switch in SWITCHES}


@register_model(tags=("swarmformer", "swarmformer_enhanced"))
def swarmformer_enhanced_small(**overrides) -> EnhancedSwarmFormer:
    """All seven changes on; D=128, 2 layers, L=256, S=8 (C=32, 16), T_local=3, 4 heads x 32, window +-16
    (4,509,962 parameters)."""
    return EnhancedSwarmFormer(build_config(EnhancedSwarmFormerConfig, _SMALL, overrides))


@register_model(tags=("swarmformer", "swarmformer_enhanced"))
def swarmformer_enhanced_base(**overrides) -> EnhancedSwarmFormer:
    """All seven changes on; D=192, 2 layers, L=768, S=4 (C=192, 96), T_local=3, 6 heads x 32, window +-16
    (7,253,390 parameters)."""
    return EnhancedSwarmFormer(build_config(EnhancedSwarmFormerConfig, _BASE, overrides))


@register_model(tags=("swarmformer", "swarmformer_enhanced", "ablation"))
def swarmformer_enhanced_small_all_off(**overrides) -> EnhancedSwarmFormer:
    """Every switch off: the original SwarmFormer Small computation, made padding-aware (attn_dropout as the
    original's 0.4, so training matches it too); 4,302,850 parameters, as swarmformer_small."""
    return EnhancedSwarmFormer(
        build_config(EnhancedSwarmFormerConfig, {**_SMALL, **_ALL_OFF, "attn_dropout": 0.4}, overrides)
    )


def _register_ablation(switch: str, suffix: str) -> None:
    def builder(**overrides) -> EnhancedSwarmFormer:
        return EnhancedSwarmFormer(build_config(EnhancedSwarmFormerConfig, {**_SMALL, switch: False}, overrides))

    builder.__name__ = builder.__qualname__ = f"swarmformer_enhanced_small_{suffix}"
    builder.__doc__ = f"swarmformer_enhanced_small with only ``{switch}`` turned off (ablation)."
    globals()[builder.__name__] = register_model(builder, tags=("swarmformer", "swarmformer_enhanced", "ablation"))


for _switch, _suffix in SWITCHES.items():
    _register_ablation(_switch, _suffix)
