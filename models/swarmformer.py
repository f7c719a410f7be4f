"""SwarmFormer (Legg & Sturmanis, 2025; seed 000), computing exactly what the authors' code computes.

Where the paper text and the authors' code differ, the code wins:
  * the local neighbour mean is circular (``torch.roll``): the first and last tokens are neighbours;
  * the cluster attention has no output projection and no residual: representatives are replaced;
  * the broadcast is additive, ``x + g * u`` (the paper writes ``x + g * (z - x)``);
  * dropout is applied at the start of every local step, on the MLP output, on the attention
    weights and on the attention output;
  * no positional embedding and no LayerNorm; pooling is a plain mean over all L positions, PAD included.

Parameters: 30522*D + layers*(12*D^2 + 10*D) + 2*D + 2 (Small 4,302,850; Base 6,749,186).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers import GateNet
from models.registry import register_model


@dataclass
class SwarmFormerConfig:
    vocab_size: int = 30522  # bert-base-uncased WordPiece vocabulary
    num_classes: int = 2  # IMDB: negative / positive
    d_model: int = 128  # embedding width D; the whole model stays at this width
    num_layers: int = 2  # the seed's best configs use 2 layers
    t_local: int = 3  # local swarm micro-steps per layer, sharing one aggregator's weights
    cluster_size: int = 8  # S: tokens per contiguous cluster; C = seq_len / S representatives
    seq_len: int = 256  # L: inputs are padded/truncated to exactly this length
    dropout: float = 0.4  # the authors use one rate everywhere (embeddings, MLPs, attention)

    def __post_init__(self):
        for name in ("vocab_size", "num_classes", "d_model", "num_layers", "t_local", "cluster_size", "seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SwarmFormerConfig.{name} must be a positive int, got {value!r}")
        if self.seq_len % self.cluster_size:
            raise ValueError(
                f"seq_len={self.seq_len} is not divisible by cluster_size={self.cluster_size}: "
                f"choose a seq_len that is a multiple of {self.cluster_size}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"SwarmFormerConfig.dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def num_clusters(self) -> int:
        return self.seq_len // self.cluster_size


class Mlp(nn.Module):
    """Linear(D, D) -> GELU -> Dropout -> Linear(D, D)."""

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(F.gelu(self.fc1(x))))


class LocalSwarmAggregator(nn.Module):
    """One local swarm step (paper §4.1): neighbour mean, MLP, gated interpolation towards it.

    ``x = drop(x); n = (x[i-1] + x[i] + x[i+1]) / 3`` (circular); ``u = drop(MLP(n))``;
    ``g = sigmoid(Gate([x; u]))``; returns ``x + g * (u - x)``.
    """

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.mlp = Mlp(dim, dropout)
        self.gate = GateNet(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.drop(x)  # (B, L, D)
        neighbours = (torch.roll(x, 1, dims=1) + x + torch.roll(x, -1, dims=1)) / 3  # (B, L, D), wraps around
        u = self.drop(self.mlp(neighbours))  # (B, L, D)
        g = torch.sigmoid(self.gate(x, u))  # (B, L, D)
        return x + g * (u - x)


class GlobalClusterAttention(nn.Module):
    """Single-head attention among cluster representatives (paper §4.3); the output replaces R."""

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.scale = dim**-0.5

    def forward(self, reps: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q_proj(reps), self.k_proj(reps), self.v_proj(reps)  # (B, C, D) each
        attn = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)  # (B, C, C)
        return self.drop(self.drop(attn) @ v)  # (B, C, D)


class BroadcastUpdater(nn.Module):
    """Cluster -> token update (paper §4.4, as coded): ``u = drop(W r_c(i))``; ``x + sigmoid(Gate([x; u])) * u``."""

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.gate = GateNet(dim)

    def forward(self, x: torch.Tensor, reps: torch.Tensor) -> torch.Tensor:
        cluster_size = x.shape[1] // reps.shape[1]
        u = self.drop(self.proj(reps))  # (B, C, D)
        u = u.repeat_interleave(cluster_size, dim=1)  # (B, L, D): each rep copied to its S tokens
        g = torch.sigmoid(self.gate(x, u))  # (B, L, D)
        return x + g * u


class SwarmFormerLayer(nn.Module):
    """``t_local`` local steps (shared weights) -> chunk means -> cluster attention -> broadcast."""

    def __init__(self, cfg: SwarmFormerConfig):
        super().__init__()
        self.t_local = cfg.t_local
        self.cluster_size = cfg.cluster_size
        self.local = LocalSwarmAggregator(cfg.d_model, cfg.dropout)
        self.cluster_attn = GlobalClusterAttention(cfg.d_model, cfg.dropout)
        self.broadcast = BroadcastUpdater(cfg.d_model, cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, D = x.shape
        for _ in range(self.t_local):
            x = self.local(x)  # (B, L, D)
        reps = x.view(B, L // self.cluster_size, self.cluster_size, D).mean(dim=2)  # (B, C, D)
        reps = self.cluster_attn(reps)  # (B, C, D)
        return self.broadcast(x, reps)  # (B, L, D)


class SwarmFormer(nn.Module):
    """Text classifier: ``model(input_ids (B, L), attention_mask=None) -> logits (B, num_classes)``.

    The reference model ignores ``attention_mask`` (the authors mean-pool over PAD tokens too).
    """

    def __init__(self, cfg: SwarmFormerConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.emb_drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(SwarmFormerLayer(cfg) for _ in range(cfg.num_layers))
        self.head_drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, cfg.num_classes)
        # PyTorch default init on purpose: it is what the authors' code (and their weights) used.

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L = input_ids.shape
        if L % self.cfg.cluster_size:
            raise ValueError(
                f"input length {L} is not divisible by cluster_size={self.cfg.cluster_size}; pad inputs to seq_len"
            )
        x = self.emb_drop(self.tok_emb(input_ids))  # (B, L, D)
        for layer in self.layers:
            x = layer(x)  # (B, L, D)
        pooled = self.head_drop(x.mean(dim=1))  # (B, D)
        return self.head(pooled)  # (B, num_classes)

    def get_num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @staticmethod
    def expected_num_params(cfg: SwarmFormerConfig) -> int:
        d = cfg.d_model
        return cfg.vocab_size * d + cfg.num_layers * (12 * d * d + 10 * d) + d * cfg.num_classes + cfg.num_classes


def _build(defaults: dict, overrides: dict) -> SwarmFormer:
    fields = SwarmFormerConfig.__dataclass_fields__
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise TypeError(f"unknown SwarmFormer option(s) {unknown}; valid: {sorted(fields)}")
    return SwarmFormer(SwarmFormerConfig(**{**defaults, **overrides}))


@register_model(tags=("swarmformer", "reference"))
def swarmformer_small(**overrides) -> SwarmFormer:
    """Seed 000 Table 1 'Small': D=128, S=8, L=256, T_local=3, 2 layers (4,302,850 parameters)."""
    return _build(dict(d_model=128, cluster_size=8, seq_len=256, t_local=3, num_layers=2), overrides)


@register_model(tags=("swarmformer", "reference"))
def swarmformer_base(**overrides) -> SwarmFormer:
    """Seed 000 Table 1 'Base': D=192, S=4, L=768, T_local=3, 2 layers (6,749,186 parameters)."""
    return _build(dict(d_model=192, cluster_size=4, seq_len=768, t_local=3, num_layers=2), overrides)


# ---- the authors' published key names <-> ours -------------------------------------------------------
# Pairs of templates: {i} is a layer index, {p} is "weight" or "bias".
_KEY_PAIRS: list[tuple[str, str]] = [
    ("embedding.embed.weight", "tok_emb.weight"),
    ("layers.{i}.local_agg.mlp.0.{p}", "layers.{i}.local.mlp.fc1.{p}"),
    ("layers.{i}.local_agg.mlp.3.{p}", "layers.{i}.local.mlp.fc2.{p}"),
    ("layers.{i}.local_agg.gate_net.0.{p}", "layers.{i}.local.gate.fc1.{p}"),
    ("layers.{i}.local_agg.gate_net.2.{p}", "layers.{i}.local.gate.fc2.{p}"),
    ("layers.{i}.global_attn.query.{p}", "layers.{i}.cluster_attn.q_proj.{p}"),
    ("layers.{i}.global_attn.key.{p}", "layers.{i}.cluster_attn.k_proj.{p}"),
    ("layers.{i}.global_attn.value.{p}", "layers.{i}.cluster_attn.v_proj.{p}"),
    ("layers.{i}.broadcast.linear.{p}", "layers.{i}.broadcast.proj.{p}"),
    ("layers.{i}.broadcast.gate_net.0.{p}", "layers.{i}.broadcast.gate.fc1.{p}"),
    ("layers.{i}.broadcast.gate_net.2.{p}", "layers.{i}.broadcast.gate.fc2.{p}"),
    ("classifier.{p}", "head.{p}"),
]
_PER_LAYER_KEYS = 2 * 10  # ten Linear modules per layer, weight + bias each


def _template_regex(template: str) -> re.Pattern:
    pattern = re.escape(template).replace(r"\{i\}", r"(?P<i>\d+)").replace(r"\{p\}", r"(?P<p>weight|bias)")
    return re.compile(pattern)


def _rename(sd: dict, src: int, who: str) -> dict:
    """Rename every key of ``sd`` from column ``src`` of _KEY_PAIRS to the other; check completeness."""
    table = [(_template_regex(pair[src]), pair[1 - src]) for pair in _KEY_PAIRS]
    out: dict = {}
    per_layer: dict[int, int] = {}
    for key, value in sd.items():
        for pattern, template in table:
            m = pattern.fullmatch(key)
            if m:
                groups = m.groupdict()
                out[template.format(**groups)] = value
                if "i" in groups:
                    per_layer[int(groups["i"])] = per_layer.get(int(groups["i"]), 0) + 1
                break
        else:
            raise KeyError(f"{who}: unexpected key {key!r}; it matches no SwarmFormer parameter")
    required = [pair[1 - src].format(p=p) for pair in _KEY_PAIRS if "{i}" not in pair[0]
                for p in (("weight",) if "{p}" not in pair[0] else ("weight", "bias"))]
    missing = [k for k in required if k not in out]
    if missing:
        raise KeyError(f"{who}: missing key(s) {missing}")
    if sorted(per_layer) != list(range(len(per_layer))):
        raise KeyError(f"{who}: layer indices {sorted(per_layer)} are not 0..{len(per_layer) - 1}")
    short = {i: n for i, n in per_layer.items() if n != _PER_LAYER_KEYS}
    if short:
        raise KeyError(f"{who}: incomplete layer(s) {short}: each layer has {_PER_LAYER_KEYS} tensors")
    return out


def convert_reference_state_dict(sd: dict) -> dict:
    """Map the authors' published key names to this implementation's; unknown or missing keys raise KeyError."""
    return _rename(sd, 0, "convert_reference_state_dict")


def to_reference_state_dict(sd: dict) -> dict:
    """Inverse of :func:`convert_reference_state_dict`: our key names -> the authors'."""
    return _rename(sd, 1, "to_reference_state_dict")
