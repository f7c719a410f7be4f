"""Set Transformer blocks (Lee et al., 2019, "Set Transformer", §3): MAB, SAB, ISAB, PMA, with key masks.

Names and equations follow the paper, so a reader with it open finds each one:

    MAB(X, Y) = LayerNorm(H + rFF(H)),  H = LayerNorm(X + Multihead(X, Y, Y))     (eq. 6-7)
    SAB(X)    = MAB(X, X)                                                          (eq. 8)
    ISAB_m(X) = MAB(X, H),  H = MAB(I, X),  I: m learned inducing points           (eq. 9-10)
    PMA_k(Z)  = MAB(S, rFF(Z)),  S: k learned seed vectors                         (eq. 11)

Differences from the public code (juho-lee/set_transformer; zalandoresearch/SWARM ``set_transformer.py``),
each on purpose:
  * attention is scaled per head, ``Dh ** -0.5`` (both public versions divide by the full width or ignore the
    heads), through the shared :class:`models.layers.attention.MultiHeadAttention`;
  * padded entities are excluded as keys (``mask`` True = real entity); the public MAB has no mask, and the
    SWARM authors' one adds ``log(mask)`` (``-inf``) and multiplies padded rows by 0, which gives NaN for
    an all-padded set;
  * PMA applies its row-wise feed-forward to Z before pooling, as eq. 11 states (the public code leaves it out);
  * LayerNorm can be switched off (``layer_norm=False``; the paper's eq. 6-7 without the two LayerNorms).

Every block takes ``(x, mask)``; outputs at padded positions are not meaningful (they never reach real
entities, because padded entities are never keys) and the models zero them at the end.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from models.layers.attention import MultiHeadAttention
from models.layers.drop import Dropout
from models.layers.transformer import masked_mean

HEADS = ("none", "mean", "pma")


class RowwiseFF(nn.Module):
    """rFF: ``depth`` x (Linear(D, D) -> ReLU), applied to every entity alone (Lee et al.'s "rFF").

    ``depth=1`` is juho-lee/set_transformer's ``relu(fc_o(O))``; ``depth=4`` is the SWARM authors' ``RFF``.

    Args:
        dim: width D.
        depth: number of Linear+ReLU pairs (>= 1).
        dropout: dropout on the output.
    """

    def __init__(self, dim: int, depth: int = 1, dropout: float = 0.0):
        super().__init__()
        if depth < 1:
            raise ValueError(f"rFF depth must be >= 1, got {depth}")
        self.net = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(dim, dim), nn.ReLU())])
        self.drop = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.net(x))  # (B, N, D)


class MAB(nn.Module):
    """Multihead Attention Block: X attends to Y; ``LN(H + rFF(H))``, ``H = LN(X + Multihead(X, Y, Y))``.

    Args:
        dim: width D of X, Y and the output.
        heads: H; D must be divisible by H (Dh = D / H).
        ff_depth: Linear+ReLU pairs in the rFF.
        layer_norm: the two LayerNorms of eq. 6-7 (False: plain residuals).
        dropout: on the attention output and the rFF output (the residual branches).
    """

    def __init__(self, dim: int, *, heads: int, ff_depth: int = 1, layer_norm: bool = True, dropout: float = 0.0):
        super().__init__()
        if dim % heads:
            raise ValueError(f"width {dim} is not divisible by heads={heads}: change dim_hidden or num_heads")
        self.attn = MultiHeadAttention(dim, dim, heads=heads, dim_head=dim // heads, out_proj=True, dropout=dropout)
        self.ln1 = nn.LayerNorm(dim) if layer_norm else nn.Identity()
        self.rff = RowwiseFF(dim, ff_depth, dropout)
        self.ln2 = nn.LayerNorm(dim) if layer_norm else nn.Identity()

    def forward(self, x: torch.Tensor, y: torch.Tensor, y_mask: torch.Tensor | None = None) -> torch.Tensor:
        """
        Args:
            x: (B, M, D) queries.
            y: (B, N, D) keys/values.
            y_mask: (B, N) bool, True = real entity of Y; None = all real.
        Returns:
            (B, M, D).
        """
        h = self.ln1(x + self.attn(x, y, y_mask))  # (B, M, D)
        return self.ln2(h + self.rff(h))  # (B, M, D)


class SAB(nn.Module):
    """Set Attention Block: ``MAB(X, X)``; O(N^2) in the set size. Permutation-equivariant.

    Args:
        dim, heads, ff_depth, layer_norm, dropout: as :class:`MAB`.
    """

    def __init__(self, dim: int, *, heads: int, ff_depth: int = 1, layer_norm: bool = True, dropout: float = 0.0):
        super().__init__()
        self.mab = MAB(dim, heads=heads, ff_depth=ff_depth, layer_norm=layer_norm, dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, N, D); mask: (B, N) bool, True = real. Returns (B, N, D)."""
        return self.mab(x, x, mask)


class ISAB(nn.Module):
    """Induced Set Attention Block: m inducing points summarise X, then X attends to the summary; O(N m).

    Args:
        dim, heads, ff_depth, layer_norm, dropout: as :class:`MAB`.
        num_inds: m, the number of learned inducing points.
    """

    def __init__(
        self, dim: int, *, heads: int, num_inds: int, ff_depth: int = 1, layer_norm: bool = True, dropout: float = 0.0
    ):
        super().__init__()
        if num_inds < 1:
            raise ValueError(f"ISAB needs num_inds >= 1 inducing points, got {num_inds}")
        self.inducing = nn.Parameter(torch.empty(1, num_inds, dim))  # I: (1, m, D)
        nn.init.xavier_uniform_(self.inducing)
        kw = dict(heads=heads, ff_depth=ff_depth, layer_norm=layer_norm, dropout=dropout)
        self.mab_in = MAB(dim, **kw)  # H = MAB(I, X)
        self.mab_out = MAB(dim, **kw)  # MAB(X, H)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, N, D); mask: (B, N) bool, True = real. Returns (B, N, D)."""
        inducing = self.inducing.expand(x.shape[0], -1, -1)  # (B, m, D)
        h = self.mab_in(inducing, x, mask)  # (B, m, D): only real entities are keys
        return self.mab_out(x, h)  # (B, N, D): the m summaries are all real keys


class PMA(nn.Module):
    """Pooling by Multihead Attention: k learned seeds attend to ``rFF(Z)``; ``(B, N, D) -> (B, k, D)``.

    Permutation-invariant in the entities. The rFF on Z is eq. 11's, missing from the public code.

    Args:
        dim, heads, ff_depth, layer_norm, dropout: as :class:`MAB`.
        num_seeds: k, the number of output vectors.
    """

    def __init__(
        self,
        dim: int,
        *,
        heads: int,
        num_seeds: int = 1,
        ff_depth: int = 1,
        layer_norm: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        if num_seeds < 1:
            raise ValueError(f"PMA needs num_seeds >= 1, got {num_seeds}")
        self.seeds = nn.Parameter(torch.empty(1, num_seeds, dim))  # S: (1, k, D)
        nn.init.xavier_uniform_(self.seeds)
        self.rff = RowwiseFF(dim, ff_depth, dropout)
        self.mab = MAB(dim, heads=heads, ff_depth=ff_depth, layer_norm=layer_norm, dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, N, D); mask: (B, N) bool, True = real. Returns (B, k, D); an all-padded set gets no NaN."""
        seeds = self.seeds.expand(x.shape[0], -1, -1)  # (B, k, D)
        return self.mab(seeds, self.rff(x), mask)  # (B, k, D)


class SetPoolingHead(nn.Module):
    """Output head of a set encoder: per-entity, or pooled over the real entities (permutation-invariant).

    ``pooling``:
      * ``"none"``: ``proj(x)`` per entity -> (B, N, dim_out); padded rows are zeroed;
      * ``"mean"``: ``proj(masked_mean(x))`` -> (B, dim_out) (the mean commutes with the Linear, so this is
        also "project every entity, then average", as the SWARM authors' MoG model does);
      * ``"pma"``: ``proj(flatten(PMA_k(x)))`` -> (B, dim_out).
    An all-padded set gives finite outputs (zeros before ``proj``).

    Args:
        dim: width D of the encoder output.
        dim_out: output width; None = no projection (width D, or k*D for PMA).
        pooling: "none", "mean" or "pma".
        heads, num_seeds, ff_depth, layer_norm, dropout: for the PMA (unused otherwise).
    """

    def __init__(
        self,
        dim: int,
        dim_out: int | None = None,
        *,
        pooling: str = "mean",
        heads: int = 4,
        num_seeds: int = 1,
        ff_depth: int = 1,
        layer_norm: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        if pooling not in HEADS:
            raise ValueError(f"pooling must be one of {HEADS}, got {pooling!r}")
        self.pooling = pooling
        self.pma = (
            PMA(dim, heads=heads, num_seeds=num_seeds, ff_depth=ff_depth, layer_norm=layer_norm, dropout=dropout)
            if pooling == "pma"
            else None
        )
        width = dim * num_seeds if pooling == "pma" else dim
        self.proj = nn.Linear(width, dim_out) if dim_out is not None else nn.Identity()

    @property
    def invariant(self) -> bool:
        """True when the output is one vector per set (permutation-invariant), False when per entity."""
        return self.pooling != "none"

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, N, D); mask: (B, N) bool, True = real. Returns (B, N, dim_out) or (B, dim_out)."""
        if self.pooling == "none":
            out = self.proj(x)  # (B, N, dim_out)
            return out if mask is None else out.masked_fill(~mask[..., None], 0.0)
        if self.pooling == "mean":
            return self.proj(masked_mean(x, mask))  # (B, dim_out)
        pooled = self.pma(x, mask)  # (B, k, D)
        return self.proj(pooled.flatten(1))  # (B, dim_out)


def check_set_inputs(x: torch.Tensor, mask: torch.Tensor | None, dim_input: int, model: str) -> torch.Tensor | None:
    """Validate ``x (B, N, dim_input)`` and ``mask (B, N)``; return the mask as bool (None stays None).

    Args:
        x: the set batch.
        mask: True = real entity, or None (all real).
        dim_input: the width the model was built for.
        model: the model's name, for the error message.
    """
    if x.dim() != 3 or x.shape[-1] != dim_input:
        raise ValueError(
            f"{model}: x must be (B, N, {dim_input}), got {tuple(x.shape)}: "
            f"build the model with dim_input={x.shape[-1] if x.dim() == 3 else '?'} or reshape x"
        )
    if mask is None:
        return None
    if mask.shape != x.shape[:2]:
        raise ValueError(f"{model}: mask must be (B, N) = {tuple(x.shape[:2])} like x, got {tuple(mask.shape)}")
    return mask.bool()


__all__ = ["ISAB", "MAB", "PMA", "HEADS", "RowwiseFF", "SAB", "SetPoolingHead", "check_set_inputs"]
