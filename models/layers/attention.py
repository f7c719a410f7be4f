"""Multi-head attention (self and cross) with key padding masks that never give NaN; one kernel: ``masked_sdpa``."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.drop import Dropout


def masked_sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, key_mask: torch.Tensor | None = None, dropout_p: float = 0.0
) -> torch.Tensor:
    """``scaled_dot_product_attention`` with a key padding mask; rows with no valid key give zeros.

    SDPA returns NaN for a fully masked row (softmax of all ``-inf``), and NaN poisons the backward pass even
    when the row is zeroed afterwards. Samples whose keys are all masked are therefore run unmasked and
    their output is zeroed. With a bool mask and no dropout, PyTorch's CPU flash kernel keeps memory
    linear in the set size; attention dropout forces the quadratic math path.

    Args:
        q: (B, H, M, Dh) queries; k, v: (B, H, N, Dh) keys and values (M = N for self-attention).
        key_mask: (B, N) bool, True = key may be attended; None = all.
        dropout_p: dropout on attention weights (pass 0 in eval).
    Returns:
        (B, H, M, Dh); scaled by ``Dh ** -0.5`` (SDPA's default: per head).
    """
    if key_mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    empty = ~key_mask.any(dim=-1)  # (B,): samples with nothing to attend to
    safe = key_mask | empty[:, None]  # (B, N): all keys for empty samples, so no row is fully masked
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe[:, None, None, :], dropout_p=dropout_p)
    return out.masked_fill(empty[:, None, None, None], 0.0)  # (B, H, M, Dh)


class MultiHeadAttention(nn.Module):
    """Multi-head attention of ``queries`` over ``keys_values`` (self-attention when that is None).

    ``q = q_proj(queries)``, ``k = k_proj(kv)``, ``v = v_proj(kv)`` split into H heads of width Dh, attended
    by :func:`masked_sdpa` (scale ``Dh ** -0.5``, per head, not the full width), heads concatenated and mixed
    by ``out_proj``. Padded keys are excluded through ``key_mask``; a query whose keys are all padded gets
    zeros (then ``out_proj``'s bias), never NaN.

    Args:
        dim_q: width Dq of the queries (and of the output, through ``out_proj``).
        dim_kv: width Dkv of the keys/values; None = ``dim_q``.
        heads: H.
        dim_head: Dh; scale is ``Dh ** -0.5``.
        out_proj: a Linear(H*Dh, dim_out) mixing the heads; without it H*Dh must equal dim_out.
        dim_out: output width; None = ``dim_q``.
        tied_qkv: one ``qkv_proj`` Linear(Dq, H*Dh) gives Q, K and V (weight tying; needs Dkv == Dq).
        attn_dropout: dropout on the attention weights (0 keeps SDPA's memory-efficient kernel on CPU).
        dropout: dropout on the output.
    """

    def __init__(
        self,
        dim_q: int,
        dim_kv: int | None = None,
        *,
        heads: int,
        dim_head: int,
        out_proj: bool = True,
        dim_out: int | None = None,
        tied_qkv: bool = False,
        attn_dropout: float = 0.0,
        dropout: float = 0.0,
    ):
        super().__init__()
        dim_kv = dim_q if dim_kv is None else dim_kv
        dim_out = dim_q if dim_out is None else dim_out
        inner = heads * dim_head
        if not out_proj and inner != dim_out:
            raise ValueError(
                f"heads * dim_head = {inner} != output width {dim_out}: enable out_proj or change dim_head"
            )
        if tied_qkv and dim_kv != dim_q:
            raise ValueError(
                f"tied_qkv needs equal query and key widths, got dim_q={dim_q}, dim_kv={dim_kv}: "
                "untie the projections or project the keys first"
            )
        self.heads, self.dim_head, self.tied_qkv = heads, dim_head, tied_qkv
        if tied_qkv:
            self.qkv_proj = nn.Linear(dim_q, inner)
        else:
            self.q_proj = nn.Linear(dim_q, inner)
            self.k_proj = nn.Linear(dim_kv, inner)
            self.v_proj = nn.Linear(dim_kv, inner)
        self.out_proj = nn.Linear(inner, dim_out) if out_proj else nn.Identity()
        self.attn_dropout = attn_dropout
        self.drop = Dropout(dropout)

    def forward(
        self, queries: torch.Tensor, keys_values: torch.Tensor | None = None, key_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """
        Args:
            queries: (B, M, Dq).
            keys_values: (B, N, Dkv); None = ``queries`` (self-attention).
            key_mask: (B, N) bool, True = real key; None = all.
        Returns:
            (B, M, dim_out).
        """
        kv = queries if keys_values is None else keys_values
        B, M, _ = queries.shape
        N = kv.shape[1]

        def heads(t: torch.Tensor, n: int) -> torch.Tensor:
            return t.view(B, n, self.heads, self.dim_head).transpose(1, 2)  # (B, H, n, Dh)

        if self.tied_qkv:
            q = heads(self.qkv_proj(queries), M)
            k = v = q if keys_values is None else heads(self.qkv_proj(kv), N)
        else:
            q, k, v = heads(self.q_proj(queries), M), heads(self.k_proj(kv), N), heads(self.v_proj(kv), N)
        out = masked_sdpa(
            q, k, v, key_mask=key_mask, dropout_p=self.attn_dropout if self.training else 0.0
        )  # (B, H, M, Dh)
        out = out.transpose(1, 2).reshape(B, M, self.heads * self.dim_head)  # (B, M, H*Dh)
        return self.drop(self.out_proj(out))  # (B, M, dim_out)


class MultiHeadSelfAttention(MultiHeadAttention):
    """Self-attention form of :class:`MultiHeadAttention`: ``forward(x, key_mask)``, output width = input width.

    With ``heads=1, dim_head=dim, tied_qkv=False, out_proj=False`` this is the original SwarmFormer's
    ``GlobalClusterAttention`` (same parameter names ``q_proj``, ``k_proj``, ``v_proj``).

    Args:
        dim: width D of the set elements.
        heads, dim_head, tied_qkv, out_proj, attn_dropout, dropout: as :class:`MultiHeadAttention`.
    """

    def __init__(
        self,
        dim: int,
        *,
        heads: int,
        dim_head: int,
        tied_qkv: bool,
        out_proj: bool,
        attn_dropout: float = 0.0,
        dropout: float = 0.0,
    ):
        super().__init__(
            dim,
            dim,
            heads=heads,
            dim_head=dim_head,
            out_proj=out_proj,
            tied_qkv=tied_qkv,
            attn_dropout=attn_dropout,
            dropout=dropout,
        )

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, N, D); key_mask: (B, N) bool, True = real. Returns (B, N, D)."""
        return super().forward(x, None, key_mask)
