"""SwarmFormer (Legg & Sturmanis, 2025; paper 000), computing exactly what the authors' code computes.

Where the paper text and the authors' code differ, the code wins:
  * the local neighbour mean is circular (``torch.roll``): the first and last tokens are neighbours;
  * the cluster attention has no output projection and no residual: representatives are replaced;
  * the broadcast is additive, ``x + g * u`` (the paper writes ``x + g * (z - x)``);
  * dropout is applied at the start of every local step, on the MLP output, on the attention
    weights and on the attention output;
  * no positional embedding and no LayerNorm; pooling is a plain mean over all L positions, PAD included.

Parameters: 30522*D + layers*(12*D^2 + 10*D) + 2*D + 2 (Small 4,302,850; Base 6,749,186).

Two switches, neither adds a parameter (state dicts are interchangeable):
  * ``fast`` (default True): the same function computed with fewer passes over memory: one fused QKV
    matmul and SDPA for the cluster attention, a symmetric neighbour-sum kernel with the 1/3 folded
    into the matmul, the gate's ``fc1([x; u])`` as two matmuls on the two halves of its weight (no
    concat), the broadcast gate's ``u`` half computed once per cluster and broadcast through a
    ``(B, C, S, D)`` view (no ``repeat_interleave``), ``lerp``/``addcmul`` for the updates, and a
    cheaper dropout (``rand >= p``, the same Bernoulli(1 - p) keep and 1/(1 - p) scale as
    ``nn.Dropout``). ``fast=False`` runs the plain code below, kept as the oracle for tests.
  * ``padding_aware`` (default False = the authors' model): PAD positions (``attention_mask`` False)
    carry the zero state between blocks, are left out of neighbour means, cluster means and the
    pooling; the neighbour mean does not wrap around (an end token averages over the neighbours it
    has); all-PAD clusters are masked out as keys of the cluster attention. Appending PAD therefore
    leaves the logits unchanged. With ``attention_mask=None`` every token counts as real.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers import GateNet, Mlp
from models.layers.drop import fast_dropout
from models.layers.params import NumParamsMixin
from models.registry import build_config, register_model
from swarmlab.settings import check_config, setting


@dataclass
class SwarmFormerConfig:
    vocab_size: int = setting(30522, ge=1)  # bert-base-uncased WordPiece vocabulary
    num_classes: int = setting(2, ge=1)  # IMDB: negative / positive
    d_model: int = setting(128, ge=1)  # embedding width D; the whole model stays at this width
    num_layers: int = setting(2, ge=1)  # the paper's best configs use 2 layers
    t_local: int = setting(3, ge=1)  # local swarm micro-steps per layer, sharing one aggregator's weights
    cluster_size: int = setting(8, ge=1)  # S: tokens per contiguous cluster; C = seq_len / S representatives
    seq_len: int = setting(256, ge=1)  # L: inputs are padded/truncated to exactly this length
    dropout: float = setting(0.4, ge=0, lt=1)  # the authors use one rate everywhere (embeddings, MLPs, attention)
    # False = the authors' model: PAD takes part everywhere, neighbours wrap around
    padding_aware: bool = setting(False)
    # fused kernels computing the same function; False = the plain reference code (test oracle)
    fast: bool = setting(True)

    def __post_init__(self):
        check_config(self)
        if self.seq_len % self.cluster_size:
            raise ValueError(
                f"seq_len={self.seq_len} is not divisible by cluster_size={self.cluster_size}: "
                f"choose a seq_len that is a multiple of {self.cluster_size}"
            )

    @property
    def num_clusters(self) -> int:
        return self.seq_len // self.cluster_size


# ---- helpers of the fast path ---------------------------------------------------------------------------


def _neighbour_sum(x: torch.Tensor, circular: bool) -> torch.Tensor:
    """``s_i = x_{i-1} + x_i + x_{i+1}`` along dim 1 of (B, L, D); circular, or zero beyond the ends.

    Eager: written in place into one buffer (the CPU fast path). Under ``torch.compile`` the functional form
    instead: Dynamo cannot trace ``out=`` into a slice and would split the model into one graph per call.
    """
    if torch.compiler.is_compiling():
        return _neighbour_sum_functional(x, circular)
    x = x.contiguous()
    s = torch.empty_like(x)  # (B, L, D)
    torch.add(x[:, 1:], x[:, :-1], out=s[:, 1:])
    if circular:
        torch.add(x[:, 0], x[:, -1], out=s[:, 0])
    else:
        s[:, 0] = x[:, 0]
    s[:, :-1] += x[:, 1:]
    if circular:
        s[:, -1] += x[:, 0]
    return s


def _neighbour_sum_functional(x: torch.Tensor, circular: bool) -> torch.Tensor:
    """:func:`_neighbour_sum` without in-place writes: what ``torch.compile`` traces (and fuses)."""
    if circular:
        return x + x.roll(1, dims=1) + x.roll(-1, dims=1)
    zero = torch.zeros_like(x[:, :1])
    return x + torch.cat([zero, x[:, :-1]], dim=1) + torch.cat([x[:, 1:], zero], dim=1)


class _NeighbourSum(torch.autograd.Function):
    """Autograd for :func:`_neighbour_sum`: the operator is symmetric, so its backward is itself."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, circular: bool) -> torch.Tensor:
        ctx.circular = circular
        return _neighbour_sum(x, circular)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _neighbour_sum(grad, ctx.circular), None


def _linear2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *, alpha: float = 1.0):
    """``alpha * x @ weight.T + bias`` on (..., K) -> (..., N) through one 2-D addmm/mm."""
    x2 = x.reshape(-1, x.shape[-1])  # (B*L, K)
    if bias is None:
        out = torch.mm(x2, weight.t())
        if alpha != 1.0:
            out = out * alpha
    else:
        out = torch.addmm(bias, x2, weight.t(), alpha=alpha)
    return out.view(*x.shape[:-1], weight.shape[0])


class _PadInfo:
    """What the padding-aware blocks need, derived once per forward from ``mask`` (B, L) bool, True = real."""

    def __init__(self, mask: torch.Tensor, cluster_size: int, dtype: torch.dtype):
        B, L = mask.shape
        self.mask = mask  # (B, L) bool
        m = mask.to(dtype)  # (B, L)
        self.keep = m.unsqueeze(-1)  # (B, L, 1): zeroes PAD states
        counts = _neighbour_sum(m.unsqueeze(-1), circular=False)  # (B, L, 1): real tokens among i-1, i, i+1
        self.inv_neighbours = 1.0 / counts.clamp(min=1.0)  # (B, L, 1)
        per_cluster = m.view(B, L // cluster_size, cluster_size).sum(-1, keepdim=True)  # (B, C, 1)
        self.inv_cluster = 1.0 / per_cluster.clamp(min=1.0)  # (B, C, 1)
        cluster_keep = per_cluster.squeeze(-1) > 0  # (B, C)
        # a sequence with no real token at all would mask every key (NaN): let it attend to all its zero reps
        self.cluster_keep = cluster_keep | ~cluster_keep.any(dim=1, keepdim=True)  # (B, C) bool, True = key
        self.inv_tokens = 1.0 / m.sum(1, keepdim=True).clamp(min=1.0)  # (B, 1)


# ---- blocks ---------------------------------------------------------------------------------------------


def _gate_fc1_split(gate: GateNet, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``gate.fc1([x; u])`` without the concat: ``x @ Wx.T + u @ Wu.T + b`` with W = [Wx | Wu]."""
    D = x.shape[-1]
    w = gate.fc1.weight  # (D, 2D)
    h = torch.addmm(gate.fc1.bias, x.reshape(-1, D), w[:, :D].t())  # (B*L, D)
    h = h.addmm_(u.reshape(-1, D).to(h.dtype), w[:, D:].t().to(h.dtype))
    return h.view(*x.shape[:-1], -1)


class LocalSwarmAggregator(nn.Module):
    """One local swarm step (paper §4.1): neighbour mean, MLP, gated interpolation towards it.

    ``x = drop(x); n = (x[i-1] + x[i] + x[i+1]) / 3`` (circular); ``u = drop(MLP(n))``;
    ``g = sigmoid(Gate([x; u]))``; returns ``x + g * (u - x)``.
    Padding-aware: ``n`` averages the real tokens among i-1, i, i+1 (no wrap-around); PAD outputs are 0.
    """

    def __init__(self, dim: int, dropout: float, *, fast: bool = True):
        super().__init__()
        self.fast = fast
        self.drop = nn.Dropout(dropout)
        self.mlp = Mlp(dim, dim, dropout, drop=nn.Dropout)  # the plain path draws the authors' masks
        self.gate = GateNet(dim)

    def forward(self, x: torch.Tensor, pad: _PadInfo | None = None) -> torch.Tensor:
        return self._forward_fast(x, pad) if self.fast else self._forward_reference(x, pad)

    def _forward_reference(self, x: torch.Tensor, pad: _PadInfo | None) -> torch.Tensor:
        x = self.drop(x)  # (B, L, D)
        if pad is None:
            neighbours = (torch.roll(x, 1, dims=1) + x + torch.roll(x, -1, dims=1)) / 3  # (B, L, D), wraps around
        else:
            keep = pad.mask.unsqueeze(-1).to(x.dtype)  # (B, L, 1)
            xk = x * keep  # PAD contributes nothing
            total = F.pad(xk[:, :-1], (0, 0, 1, 0)) + xk + F.pad(xk[:, 1:], (0, 0, 0, 1))  # (B, L, D), no wrap
            count = F.pad(keep[:, :-1], (0, 0, 1, 0)) + keep + F.pad(keep[:, 1:], (0, 0, 0, 1))  # (B, L, 1)
            neighbours = total / count.clamp(min=1)
        u = self.drop(self.mlp(neighbours))  # (B, L, D)
        g = torch.sigmoid(self.gate(x, u))  # (B, L, D)
        out = x + g * (u - x)
        if pad is not None:
            out = out * pad.mask.unsqueeze(-1).to(out.dtype)  # PAD states stay 0
        return out

    def _forward_fast(self, x: torch.Tensor, pad: _PadInfo | None) -> torch.Tensor:
        p, training = self.drop.p, self.training
        x = fast_dropout(x, p, training)  # (B, L, D)
        s = _NeighbourSum.apply(x, pad is None)  # (B, L, D): neighbour sums (PAD states are 0)
        if pad is None:
            h = _linear2d(s, self.mlp.fc1.weight, self.mlp.fc1.bias, alpha=1.0 / 3.0)  # fc1(mean of 3)
        else:
            h = _linear2d(s * pad.inv_neighbours, self.mlp.fc1.weight, self.mlp.fc1.bias)
        del s  # in inference nothing else holds these: free them before the gate's activations (autograd keeps its own)
        h = fast_dropout(F.gelu(h), p, training)
        u = fast_dropout(_linear2d(h, self.mlp.fc2.weight, self.mlp.fc2.bias), p, training)  # (B, L, D)
        del h
        g = _linear2d(F.gelu(_gate_fc1_split(self.gate, x, u)), self.gate.fc2.weight, self.gate.fc2.bias).sigmoid_()
        out = torch.lerp(x, u.to(x.dtype), g.to(x.dtype))  # x + g * (u - x)
        if pad is not None:
            out = out * pad.keep
        return out


class GlobalClusterAttention(nn.Module):
    """Single-head attention among cluster representatives (paper §4.3); the output replaces R."""

    def __init__(self, dim: int, dropout: float, *, fast: bool = True):
        super().__init__()
        self.fast = fast
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.scale = dim**-0.5

    def forward(self, reps: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``reps`` (B, C, D); ``key_mask`` (B, C) bool, True = a cluster that may be attended to."""
        if not self.fast:
            q, k, v = self.q_proj(reps), self.k_proj(reps), self.v_proj(reps)  # (B, C, D) each
            scores = q @ k.transpose(-2, -1) * self.scale  # (B, C, C)
            if key_mask is not None:
                scores = scores.masked_fill(~key_mask.unsqueeze(1), -torch.finfo(scores.dtype).max)
            attn = torch.softmax(scores, dim=-1)  # (B, C, C)
            return self.drop(self.drop(attn) @ v)  # (B, C, D)
        weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])  # (3D, D)
        bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])  # (3D,)
        # One head, as a 4-D (B, 1, C, D) view: PyTorch's CPU flash kernel (memory linear in C) takes only 4-D
        # inputs; 3-D ones fall back to the math kernel, which materializes the (C, C) scores (2.3 GB at C=16384).
        q, k, v = F.linear(reps, weight, bias).unsqueeze(1).chunk(3, dim=-1)  # (B, 1, C, D) each
        attn_mask = None if key_mask is None else key_mask[:, None, None, :]  # (B, 1, 1, C)
        p = self.drop.p if self.training else 0.0
        # SDPA's dropout_p is dropout on the attention weights, as the reference's inner drop
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p, scale=self.scale)
        return fast_dropout(out.squeeze(1), self.drop.p, self.training)  # (B, C, D)


class BroadcastUpdater(nn.Module):
    """Cluster -> token update (paper §4.4, as coded): ``u = drop(W r_c(i))``; ``x + sigmoid(Gate([x; u])) * u``."""

    def __init__(self, dim: int, dropout: float, *, fast: bool = True):
        super().__init__()
        self.fast = fast
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.gate = GateNet(dim)

    def forward(self, x: torch.Tensor, reps: torch.Tensor) -> torch.Tensor:
        B, L, D = x.shape
        C = reps.shape[1]
        S = L // C
        if not self.fast:
            u = self.drop(self.proj(reps))  # (B, C, D)
            u = u.repeat_interleave(S, dim=1)  # (B, L, D): each rep copied to its S tokens
            g = torch.sigmoid(self.gate(x, u))  # (B, L, D)
            return x + g * u
        u = fast_dropout(self.proj(reps), self.drop.p, self.training)  # (B, C, D)
        w = self.gate.fc1.weight  # (D, 2D) = [Wx | Wu]
        hu = F.linear(u, w[:, D:], self.gate.fc1.bias)  # (B, C, D): the u half, once per cluster
        h = _linear2d(x, w[:, :D]).view(B, C, S, D)  # (B, C, S, D): the x half, per token
        h = h + hu.unsqueeze(2).to(h.dtype)  # (B, C, S, D)
        g = _linear2d(F.gelu(h), self.gate.fc2.weight, self.gate.fc2.bias).sigmoid_()  # (B, C, S, D)
        u = u.unsqueeze(2).to(x.dtype)  # (B, C, 1, D): broadcast over the S tokens of a cluster
        return torch.addcmul(x.view(B, C, S, D), g.to(x.dtype), u).view(B, L, D)


class SwarmFormerLayer(nn.Module):
    """``t_local`` local steps (shared weights) -> chunk means -> cluster attention -> broadcast."""

    def __init__(self, cfg: SwarmFormerConfig):
        super().__init__()
        self.t_local = cfg.t_local
        self.cluster_size = cfg.cluster_size
        self.fast = cfg.fast
        self.local = LocalSwarmAggregator(cfg.d_model, cfg.dropout, fast=cfg.fast)
        self.cluster_attn = GlobalClusterAttention(cfg.d_model, cfg.dropout, fast=cfg.fast)
        self.broadcast = BroadcastUpdater(cfg.d_model, cfg.dropout, fast=cfg.fast)

    def forward(self, x: torch.Tensor, pad: _PadInfo | None = None) -> torch.Tensor:
        B, L, D = x.shape
        C, S = L // self.cluster_size, self.cluster_size
        for _ in range(self.t_local):
            x = self.local(x, pad)  # (B, L, D)
        if pad is None:
            reps = x.view(B, C, S, D).mean(dim=2)  # (B, C, D)
            key_mask = None
        elif self.fast:
            reps = x.view(B, C, S, D).sum(dim=2) * pad.inv_cluster  # (B, C, D): PAD states are 0
            key_mask = pad.cluster_keep  # (B, C)
        else:
            keep = pad.mask.view(B, C, S, 1).to(x.dtype)  # (B, C, S, 1)
            count = keep.sum(dim=2)  # (B, C, 1)
            reps = (x.view(B, C, S, D) * keep).sum(dim=2) / count.clamp(min=1)  # (B, C, D)
            key_mask = count.squeeze(-1) > 0  # (B, C)
            key_mask = key_mask | ~key_mask.any(dim=1, keepdim=True)  # an all-PAD sequence attends to all
        reps = self.cluster_attn(reps, key_mask)  # (B, C, D)
        x = self.broadcast(x, reps)  # (B, L, D)
        if pad is not None:
            x = x * pad.keep  # PAD states stay 0
        return x


class SwarmFormer(NumParamsMixin, nn.Module):
    """Text classifier: ``model(input_ids (B, L), attention_mask=None) -> logits (B, num_classes)``.

    The reference model ignores ``attention_mask`` (the authors mean-pool over PAD tokens too); with
    ``padding_aware=True`` it is honoured (bool (B, L), True = real token).
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

    def _dropout(self, module: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
        return fast_dropout(x, module.p, self.training) if self.cfg.fast else module(x)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L = input_ids.shape
        if L % self.cfg.cluster_size:
            raise ValueError(
                f"input length {L} is not divisible by cluster_size={self.cfg.cluster_size}; pad inputs to seq_len"
            )
        x = self._dropout(self.emb_drop, self.tok_emb(input_ids))  # (B, L, D)
        pad = None
        if self.cfg.padding_aware:
            if attention_mask is None:
                mask = torch.ones(B, L, dtype=torch.bool, device=input_ids.device)
            else:
                if attention_mask.shape != input_ids.shape:
                    raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} != input_ids shape {(B, L)}")
                mask = attention_mask.bool()
            pad = _PadInfo(mask, self.cfg.cluster_size, x.dtype)
            x = x * pad.keep  # PAD states are 0 from the start
        for layer in self.layers:
            x = layer(x, pad)  # (B, L, D)
        if pad is None:
            pooled = x.mean(dim=1)  # (B, D)
        elif self.cfg.fast:
            pooled = x.sum(dim=1) * pad.inv_tokens  # (B, D): mean over real tokens (PAD states are 0)
        else:
            keep = pad.mask.unsqueeze(-1).to(x.dtype)  # (B, L, 1)
            pooled = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)  # (B, D): mean over real tokens
        return self.head(self._dropout(self.head_drop, pooled))  # (B, num_classes)

    @staticmethod
    def expected_num_params(cfg: SwarmFormerConfig) -> int:
        d = cfg.d_model
        return cfg.vocab_size * d + cfg.num_layers * (12 * d * d + 10 * d) + d * cfg.num_classes + cfg.num_classes


_SMALL = dict(d_model=128, cluster_size=8, seq_len=256, t_local=3, num_layers=2)
_BASE = dict(d_model=192, cluster_size=4, seq_len=768, t_local=3, num_layers=2)


# the reference variants mean-pool over PAD tokens, as the authors' code does (by design; see above): "ignores_mask"
@register_model(tags=("swarmformer", "reference", "ignores_mask"))
def swarmformer_small(**overrides) -> SwarmFormer:
    """Paper 000 Table 1 'Small': D=128, S=8, L=256, T_local=3, 2 layers (4,302,850 parameters)."""
    return SwarmFormer(build_config(SwarmFormerConfig, _SMALL, overrides))


@register_model(tags=("swarmformer", "reference", "ignores_mask"))
def swarmformer_base(**overrides) -> SwarmFormer:
    """Paper 000 Table 1 'Base': D=192, S=4, L=768, T_local=3, 2 layers (6,749,186 parameters)."""
    return SwarmFormer(build_config(SwarmFormerConfig, _BASE, overrides))


@register_model(tags=("swarmformer", "padding_aware"))
def swarmformer_small_padaware(**overrides) -> SwarmFormer:
    """'Small' that ignores PAD: masked neighbour/cluster means and pooling, no wrap-around (same parameters)."""
    return SwarmFormer(build_config(SwarmFormerConfig, {**_SMALL, "padding_aware": True}, overrides))


@register_model(tags=("swarmformer", "padding_aware"))
def swarmformer_base_padaware(**overrides) -> SwarmFormer:
    """'Base' that ignores PAD: masked neighbour/cluster means and pooling, no wrap-around (same parameters)."""
    return SwarmFormer(build_config(SwarmFormerConfig, {**_BASE, "padding_aware": True}, overrides))


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
    required = [
        pair[1 - src].format(p=p)
        for pair in _KEY_PAIRS
        if "{i}" not in pair[0]
        for p in (("weight",) if "{p}" not in pair[0] else ("weight", "bias"))
    ]
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
