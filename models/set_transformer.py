"""Set Transformer encoder (Lee et al., 2019) as the set-equivariant baseline of paper 003 (SWARM, §4.1.2).

``x (B, N, dim_input) -> Linear -> num_layers x {SAB | ISAB} -> head``. With ``head="none"`` (default) the
head is a per-entity Linear and the model is permutation-equivariant: the "encoder part" the SWARM paper uses
for direct amortized clustering (one output row of cluster-slot logits per point). ``head="mean"`` or
``"pma"`` makes it permutation-invariant, ``(B, dim_output)``, for the mixture-of-Gaussians task (§4.2).

Defaults are the SWARM paper's best Set Transformer for direct clustering, code (32-60-3) in its Table 2
(Table 1: code (a-b-d) = hidden units - inducing points - layers), with the authors' code for what the paper
leaves out (``amortised_clustering.py``, ``models.py``, ``set_transformer.py`` in zalandoresearch/SWARM).
``set_transformer_sab`` uses the same sizes with SAB blocks (the paper compares ISAB only).

Parameters of ``set_transformer_isab`` (D=32, H=4, m=60, 3 layers, rFF depth 4, in 2, out 10): 57,642.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from models.layers.params import NumParamsMixin
from models.layers.set_blocks import ISAB, HEADS, SAB, SetPoolingHead, check_set_inputs
from models.registry import build_config, register_model
from swarmlab.settings import check_config, setting


@dataclass
class SetTransformerConfig:
    dim_input: int = setting(2, ge=1)  # points in R^2 (paper 003 §4.1.1)
    # S = 10 cluster slots for K <= 10 clusters: the authors' n_out = 10 (amortised_clustering.py)
    dim_output: int = setting(10, ge=1)
    dim_hidden: int = setting(32, ge=1)  # D: Table 2 best Set Transformer (32-60-3), a) hidden units
    num_heads: int = setting(4, ge=1)  # H (Dh = D / H = 8): the authors' -n_heads default; the paper does not list it
    num_layers: int = setting(3, ge=1)  # Table 2 (32-60-3), d) layers
    num_inds: int = setting(60, ge=1)  # m inducing points per ISAB: Table 2 (32-60-3), b); unused by SAB
    # "isab" (the paper's choice, O(N m)) or "sab" (O(N^2)); set by the registered variant
    block: str = setting("isab", choices=("isab", "sab"))
    ff_depth: int = setting(4, ge=1)  # Linear+ReLU pairs per rFF: the authors' RFF has 4 (Lee et al.'s code has 1)
    layer_norm: bool = setting(True)  # post-LN in every MAB: Lee et al. eq. 6-7 and the authors' code
    dropout: float = setting(0.0, ge=0, lt=1)  # on the residual branches; the paper trains with "no dropout" (§4.1.3)
    # "none" per entity (B, N, dim_output); "mean" or "pma" (1 seed) -> (B, dim_output)
    head: str = setting("none", choices=HEADS)

    def __post_init__(self):
        check_config(self)
        if self.dim_hidden % self.num_heads:
            raise ValueError(
                f"dim_hidden={self.dim_hidden} is not divisible by num_heads={self.num_heads}: "
                "change one so that the head width is an integer"
            )


class SetTransformer(NumParamsMixin, nn.Module):
    """``model(x (B, N, dim_input), mask (B, N) bool | None) -> (B, N, dim_output)`` (or (B, dim_output) pooled).

    ``mask`` True = real entity; padded entities are never attention keys, so they do not change the real
    entities' outputs, and their own output rows are zero.
    """

    def __init__(self, cfg: SetTransformerConfig):
        super().__init__()
        self.cfg = cfg
        D = cfg.dim_hidden
        kw = dict(heads=cfg.num_heads, ff_depth=cfg.ff_depth, layer_norm=cfg.layer_norm, dropout=cfg.dropout)
        self.embed = nn.Linear(cfg.dim_input, D)
        if cfg.block == "isab":
            self.blocks = nn.ModuleList(ISAB(D, num_inds=cfg.num_inds, **kw) for _ in range(cfg.num_layers))
        else:
            self.blocks = nn.ModuleList(SAB(D, **kw) for _ in range(cfg.num_layers))
        self.head = SetPoolingHead(D, cfg.dim_output, pooling=cfg.head, **kw)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = check_set_inputs(x, mask, self.cfg.dim_input, type(self).__name__)
        h = self.embed(x)  # (B, N, D)
        for block in self.blocks:
            h = block(h, mask)  # (B, N, D)
        return self.head(h, mask)  # (B, N, dim_output) or (B, dim_output)

    def arch_code(self) -> str:
        """Paper 003 Table 1 code: (hidden units - inducing points - layers); SAB has no inducing points."""
        c = self.cfg
        return (
            f"({c.dim_hidden}-{c.num_inds}-{c.num_layers})" if c.block == "isab" else f"({c.dim_hidden}-{c.num_layers})"
        )


@register_model(kind="set", tags=("permutation_equivariant", "baseline"))
def set_transformer_isab(**overrides) -> SetTransformer:
    """ISAB encoder, (32-60-3): D=32, m=60 inducing points, 3 layers, 4 heads (57,642 parameters)."""
    return SetTransformer(build_config(SetTransformerConfig, {"block": "isab"}, overrides))


@register_model(kind="set", tags=("permutation_equivariant", "baseline"))
def set_transformer_sab(**overrides) -> SetTransformer:
    """SAB encoder at the (32-60-3) sizes: D=32, 3 layers, 4 heads; O(N^2) attention per layer."""
    return SetTransformer(build_config(SetTransformerConfig, {"block": "sab"}, overrides))
