"""Multi-head local window attention over a 1-D sequence: a banded (chunked) kernel and its dense oracle.

Every query ``i`` attends to the keys ``j`` with ``|i - j| <= window_one_sided`` (so the total window is
``2 * window_one_sided + 1`` tokens), minus the keys the mask drops. The banded kernel splits the sequence
into blocks of ``r = window_one_sided`` queries; block ``n`` reads keys from blocks ``n-1, n, n+1`` (``3r``
keys), which cover the whole band. Memory is ``O(B * H * L * 3r)`` instead of ``O(B * H * L^2)``.

Softmax runs in fp32; masked scores are filled with ``-finfo.max`` and fully masked rows come out as zeros,
never NaN. An optional learned relative-position bias (one scalar per head and offset ``j - i``, Swin-style)
gives the window a notion of order; without it the attention sees a bag of neighbours, like the mean it
replaces.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def _band_offsets(r: int, device) -> torch.Tensor:
    """``j - i`` for query ``a`` of a block and key ``b`` of the 3-block strip around it: (r, 3r) long."""
    a = torch.arange(r, device=device)
    b = torch.arange(3 * r, device=device)
    return b[None, :] - r - a[:, None]  # (r, 3r): key position minus query position


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, window_one_sided: int,
                             key_mask: torch.Tensor | None = None, rel_bias: torch.Tensor | None = None,
                             dropout_p: float = 0.0) -> torch.Tensor:
    """Banded attention, ``O(L * window)`` memory.

    Args:
        q, k, v: (B, H, L, Dh).
        window_one_sided: r >= 1; query i sees keys i-r .. i+r.
        key_mask: (B, L) bool, True = the key may be attended; None = all keys.
        rel_bias: (H, 2r+1) added to the score of offset ``j - i`` (index ``j - i + r``); None = no bias.
        dropout_p: dropout on the attention weights (pass 0 in eval).
    Returns:
        (B, H, L, Dh); rows whose window holds no valid key are zeros.
    """
    r = window_one_sided
    if r < 1:
        raise ValueError(f"window_one_sided must be >= 1, got {r}")
    B, H, L, Dh = q.shape
    nb = -(-L // r)  # number of query blocks
    Lp = nb * r
    pad = Lp - L
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))  # (B, H, Lp, Dh)
    if key_mask is None:
        key_mask = torch.ones(1, L, dtype=torch.bool, device=q.device)
    kmask = F.pad(key_mask, (r, pad + r), value=False)  # (B|1, Lp + 2r): out-of-range keys are invalid
    kmask = kmask.unfold(1, 3 * r, r)  # (B|1, nb, 3r)

    qb = q.reshape(B, H, nb, r, Dh)  # (B, H, nb, r, Dh)
    kw = F.pad(k, (0, 0, r, r)).unfold(2, 3 * r, r)  # (B, H, nb, Dh, 3r): a view, no copy
    vw = F.pad(v, (0, 0, r, r)).unfold(2, 3 * r, r)  # (B, H, nb, Dh, 3r)

    offsets = _band_offsets(r, q.device)  # (r, 3r)
    band = offsets.abs() <= r  # (r, 3r)
    valid = band[None, None] & kmask[:, :, None, :]  # (B|1, nb, r, 3r)
    valid = valid[:, None]  # (B|1, 1, nb, r, 3r)

    # scores: b batch, h head, n block, q query in block, d head dim, k key in strip
    scores = torch.einsum("bhnqd,bhndk->bhnqk", qb, kw).float() * Dh**-0.5  # (B, H, nb, r, 3r)
    if rel_bias is not None:
        bias = rel_bias.float()[:, (offsets.clamp(-r, r) + r)]  # (H, r, 3r); out-of-band entries masked below
        scores = scores + bias[None, :, None]
    scores = scores.masked_fill(~valid, -torch.finfo(scores.dtype).max)
    probs = torch.softmax(scores, dim=-1) * valid  # fully masked rows: uniform * 0 = 0, not NaN
    if dropout_p:
        probs = F.dropout(probs, p=dropout_p, training=True)
    out = torch.einsum("bhnqk,bhndk->bhnqd", probs.to(v.dtype), vw)  # (B, H, nb, r, Dh)
    return out.reshape(B, H, Lp, Dh)[:, :, :L]  # (B, H, L, Dh)


def dense_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, window_one_sided: int,
                           key_mask: torch.Tensor | None = None, rel_bias: torch.Tensor | None = None) -> torch.Tensor:
    """The same function with a full (L, L) score matrix: the test oracle for :func:`sliding_window_attention`."""
    r = window_one_sided
    B, H, L, Dh = q.shape
    pos = torch.arange(L, device=q.device)
    offsets = pos[None, :] - pos[:, None]  # (L, L): j - i
    valid = (offsets.abs() <= r)[None, None]  # (1, 1, L, L)
    if key_mask is not None:
        valid = valid & key_mask[:, None, None, :]  # (B, 1, L, L)
    scores = (q @ k.transpose(-2, -1)).float() * Dh**-0.5  # (B, H, L, L)
    if rel_bias is not None:
        scores = scores + rel_bias.float()[:, offsets.clamp(-r, r) + r][None]  # (1, H, L, L)
    scores = scores.masked_fill(~valid, -torch.finfo(scores.dtype).max)
    probs = torch.softmax(scores, dim=-1) * valid
    return probs.to(v.dtype) @ v  # (B, H, L, Dh)


class LocalWindowAttention(nn.Module):
    """Multi-head attention inside a sliding window of ``2 * window_one_sided + 1`` tokens, PAD keys masked.

    Args:
        dim: model width D.
        heads: H.
        dim_head: Dh; the inner width H * Dh may differ from D (an output projection maps it back).
        window_one_sided: r; each token attends to r tokens on each side and itself.
        attn_dropout: dropout on the attention weights.
        rel_pos_bias: learn one bias per head and relative offset (initialised at zero).
    """

    def __init__(self, dim: int, *, heads: int, dim_head: int, window_one_sided: int, attn_dropout: float = 0.0,
                 rel_pos_bias: bool = True):
        super().__init__()
        self.heads, self.dim_head, self.window_one_sided = heads, dim_head, window_one_sided
        self.attn_dropout = attn_dropout
        inner = heads * dim_head
        self.qkv = nn.Linear(dim, 3 * inner)
        self.out_proj = nn.Linear(inner, dim)
        self.rel_bias = nn.Parameter(torch.zeros(heads, 2 * window_one_sided + 1)) if rel_pos_bias else None

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, L, _ = x.shape
        qkv = self.qkv(x).view(B, L, 3, self.heads, self.dim_head)  # (B, L, 3, H, Dh)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, L, Dh) each
        return q, k, v

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, _ = x.shape
        q, k, v = self._split(x)
        out = sliding_window_attention(q, k, v, window_one_sided=self.window_one_sided, key_mask=mask,
                                       rel_bias=self.rel_bias,
                                       dropout_p=self.attn_dropout if self.training else 0.0)  # (B, H, L, Dh)
        return self.out_proj(out.transpose(1, 2).reshape(B, L, -1))  # (B, L, D)

    def forward_dense(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Same as ``forward`` (without dropout) through the dense oracle; O(L^2) memory, for tests."""
        B, L, _ = x.shape
        q, k, v = self._split(x)
        out = dense_window_attention(q, k, v, window_one_sided=self.window_one_sided, key_mask=mask,
                                     rel_bias=self.rel_bias)
        return self.out_proj(out.transpose(1, 2).reshape(B, L, -1))  # (B, L, D)
