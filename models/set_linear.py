"""SetLinear networks (paper 003 eq. 2; Deep Sets' equivariant layer, Zaheer et al. 2017), mean or max pooling.

Eq. 2 is ``y_i = W= x_i + W!= sum_{k != i} x_k + b``: an entity-wise affine map plus one population term shared
by every entity. As in the authors' code (``SetLinear`` in zalandoresearch/SWARM ``models.py``) the population
term is a *pooled* projection, ``pool_k(Gamma x_k)``, over the real entities only:

    SetLinear(x)_i = Lambda x_i + b + pool_{k real}(Gamma x_k),   pool = mean ("set_linear_mean") or max

(the mean makes the layer independent of the set size N; ``Gamma`` has no bias, it would duplicate ``b``).
The network is ``num_layers`` such layers with ReLU between them and a linear last layer (§4.1.2).

Defaults: Table 2's best codes, SetLinear (64-6) and SetLinear (max) (96-6), code (a-d) = hidden units - layers.
Table 1 lists a smaller explored range (hidden 32, 64; layers 2, 4, 8) than Table 2's winners; Table 2 is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.params import NumParamsMixin
from models.layers.set_blocks import check_set_inputs
from models.layers.transformer import masked_mean
from models.registry import build_config, register_model
from swarmlab.settings import check_config, setting


def masked_max(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Max of ``x (B, N, D)`` over the real entities (``mask (B, N)`` True); a set with none gives 0."""
    if mask is None:
        return x.amax(dim=1)
    neg = torch.finfo(x.dtype).min
    out = x.masked_fill(~mask[..., None], neg).amax(dim=1)  # (B, D)
    return out.masked_fill(~mask.any(dim=1, keepdim=True), 0.0)  # (B, D)


class SetLinear(nn.Module):
    """``Lambda x_i + b + pool_k(Gamma x_k)``: eq. 2 with the population term mean- or max-pooled.

    Args:
        dim_in: input width.
        dim_out: output width.
        pool: "mean" or "max" over the real entities.
    """

    def __init__(self, dim_in: int, dim_out: int, pool: str = "mean"):
        super().__init__()
        if pool not in ("mean", "max"):
            raise ValueError(f"pool must be 'mean' or 'max', got {pool!r}")
        self.pool = pool
        self.entity = nn.Linear(dim_in, dim_out)  # Lambda, b
        self.population = nn.Linear(dim_in, dim_out, bias=False)  # Gamma

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, N, dim_in); mask: (B, N) bool, True = real. Returns (B, N, dim_out)."""
        g = self.population(x)  # (B, N, dim_out)
        pooled = masked_mean(g, mask) if self.pool == "mean" else masked_max(g, mask)  # (B, dim_out)
        return self.entity(x) + pooled[:, None, :]  # (B, N, dim_out)


@dataclass
class SetLinearConfig:
    dim_input: int = setting(2, ge=1)  # points in R^2 (paper 003 §4.1.1)
    dim_output: int = setting(10, ge=1)  # S = 10 cluster slots (the authors' n_out = 10)
    # Table 2 best SetLinear (64-6), a) hidden units; the max variant uses 96 (96-6)
    dim_hidden: int = setting(64, ge=1)
    # Table 2 (64-6) and (96-6), d) layers; 1 = a single SetLinear from input to output
    num_layers: int = setting(6, ge=1)
    # "mean" (eq. 2 up to the 1/N) or "max"; set by the registered variant
    pool: str = setting("mean", choices=("mean", "max"))

    def __post_init__(self):
        check_config(self)


class SetLinearNet(NumParamsMixin, nn.Module):
    """``model(x (B, N, dim_input), mask (B, N) bool | None) -> (B, N, dim_output)``, permutation-equivariant.

    Pooling runs over the real entities only, so padding never changes the real entities' outputs; padded
    output rows are zero.
    """

    def __init__(self, cfg: SetLinearConfig):
        super().__init__()
        self.cfg = cfg
        widths = [cfg.dim_input] + [cfg.dim_hidden] * (cfg.num_layers - 1) + [cfg.dim_output]
        self.layers = nn.ModuleList(SetLinear(a, b, cfg.pool) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = check_set_inputs(x, mask, self.cfg.dim_input, type(self).__name__)
        for i, layer in enumerate(self.layers):
            x = layer(F.relu(x) if i > 0 else x, mask)  # (B, N, dim_hidden), last (B, N, dim_output)
        return x if mask is None else x.masked_fill(~mask[..., None], 0.0)


@register_model(kind="set", tags=("permutation_equivariant", "baseline"))
def set_linear_mean(**overrides) -> SetLinearNet:
    """SetLinear (64-6): 6 mean-pooled set-linear layers of width 64, ReLU between."""
    return SetLinearNet(build_config(SetLinearConfig, {"pool": "mean"}, overrides))


@register_model(kind="set", tags=("permutation_equivariant", "baseline"))
def set_linear_max(**overrides) -> SetLinearNet:
    """SetLinear (max) (96-6): 6 max-pooled set-linear layers of width 96, ReLU between."""
    return SetLinearNet(build_config(SetLinearConfig, {"pool": "max", "dim_hidden": 96}, overrides))
