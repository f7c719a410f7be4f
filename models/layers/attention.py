"""Self-attention over a small set (cluster representatives), with key padding masks that never give NaN."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def masked_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, key_mask: torch.Tensor | None = None,
                dropout_p: float = 0.0) -> torch.Tensor:
    """``scaled_dot_product_attention`` with a key padding mask; rows with no valid key give zeros.

    SDPA returns NaN for a fully masked row (softmax of all ``-inf``), and NaN poisons the backward pass even
    when the row is zeroed afterwards. Samples whose keys are all masked are therefore run unmasked and
    their output is zeroed. With a bool mask and no dropout, PyTorch's CPU flash kernel keeps memory
    linear in the set size; attention dropout forces the quadratic math path.

    Args:
        q, k, v: (B, H, N, Dh).
        key_mask: (B, N) bool, True = key may be attended; None = all.
        dropout_p: dropout on attention weights (pass 0 in eval).
    Returns:
        (B, H, N, Dh).
    """
    if key_mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    empty = ~key_mask.any(dim=-1)  # (B,): samples with nothing to attend to
    safe = key_mask | empty[:, None]  # (B, N): all keys for empty samples, so no row is fully masked
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe[:, None, None, :], dropout_p=dropout_p)
    return out.masked_fill(empty[:, None, None, None], 0.0)  # (B, H, N, Dh)


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention with optional tied Q/K/V projection; the output replaces the input.

    With ``heads=1, dim_head=dim, tied_qkv=False, out_proj=False`` this is the original SwarmFormer's
    ``GlobalClusterAttention`` (same parameter names ``q_proj``, ``k_proj``, ``v_proj``).

    Args:
        dim: width D of the set elements.
        heads: H.
        dim_head: Dh; scale is ``Dh ** -0.5``.
        tied_qkv: one ``qkv_proj`` Linear(D, H*Dh) gives Q, K and V (weight tying: 1/3 of the parameters).
        out_proj: a Linear(H*Dh, D) mixing the heads; required when H*Dh != D.
        attn_dropout: dropout on the attention weights (0 keeps SDPA's memory-efficient kernel on CPU).
        dropout: dropout on the output.
    """

    def __init__(self, dim: int, *, heads: int, dim_head: int, tied_qkv: bool, out_proj: bool,
                 attn_dropout: float = 0.0, dropout: float = 0.0):
        super().__init__()
        inner = heads * dim_head
        if not out_proj and inner != dim:
            raise ValueError(f"heads * dim_head = {inner} != dim = {dim}: enable out_proj or change dim_head")
        self.heads, self.dim_head, self.tied_qkv = heads, dim_head, tied_qkv
        if tied_qkv:
            self.qkv_proj = nn.Linear(dim, inner)
        else:
            self.q_proj = nn.Linear(dim, inner)
            self.k_proj = nn.Linear(dim, inner)
            self.v_proj = nn.Linear(dim, inner)
        self.out_proj = nn.Linear(inner, dim) if out_proj else nn.Identity()
        self.attn_dropout = attn_dropout
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, N, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(B, N, self.heads, self.dim_head).transpose(1, 2)  # (B, H, N, Dh)

        if self.tied_qkv:
            q = k = v = heads(self.qkv_proj(x))
        else:
            q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        out = masked_sdpa(q, k, v, key_mask=key_mask,
                          dropout_p=self.attn_dropout if self.training else 0.0)  # (B, H, N, Dh)
        out = out.transpose(1, 2).reshape(B, N, self.heads * self.dim_head)  # (B, N, H*Dh)
        return self.drop(self.out_proj(out))  # (B, N, D)
