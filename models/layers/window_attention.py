"""Multi-head local window attention over a 1-D sequence: one module for every windowed model.

Two window shapes, each a fast kernel (their dense oracles: ``swarmlab/testing/reference_window_attention.py``):

* **banded** (sliding) windows, :func:`banded_window_attention`: query ``i`` sees the keys
  ``|i - j| <= window_one_sided`` (``2 * window_one_sided + 1`` in total), optionally plus a global first
  token that attends to and is attended by every token (Longformer's [CLS], Beltagy et al., 2020) and a
  learned relative-position bias. Used by Longformer (``attention_patterns.sliding_chunks_attention``) and
  the enhanced SwarmFormer's local mixer (:class:`LocalWindowAttention`). The sequence is cut into blocks of
  ``r = window_one_sided`` queries; block ``n`` reads the ``3r`` keys of blocks ``n-1, n, n+1``, which cover
  its band (allenai/longformer ``sliding_chunks.py``). Memory ``O(B * H * L * 3r)``, not ``O(B * H * L^2)``.
* **partitioned** (non-overlapping, Swin-style) windows, :func:`shifted_window_attention`: the sequence is
  cut into windows of ``window`` tokens (total, not one-sided) and each token attends inside its own window.
  A shifted block first rolls the sequence left by ``shift`` tokens (half a window), so the windows straddle
  the previous block's boundaries; the last window then holds the sequence's end and its start, which the
  mask of Swin Transformer (Liu et al., 2021) keeps apart (:func:`shifted_window_mask`). Used by HSW
  (:class:`ShiftedWindowAttention`). Memory ``O(B * H * L * window)``.

Conventions (shared by both kernels): queries are scaled by ``Dh ** -0.5`` before the product; scores are
soft-maxed in float32 after ``-finfo(float32).max`` is added to the masked entries; a query row with no key
it may attend comes out as zeros, never NaN. Masks are bool, True = keep. A relative-position bias holds one
scalar per head and offset ``j - i`` (Swin); without one the window sees a bag of neighbours.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.drop import Dropout, fast_dropout

_NEG = -torch.finfo(torch.float32).max  # fill for masked scores; softmax runs in float32


def masked_softmax(scores: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """float32 softmax over the last dim where ``keep`` (broadcastable bool); rows with nothing kept are zeros.

    ``scores`` is overwritten (it is a fresh product in every caller, not needed by the backward pass).
    """
    scores = scores.float()
    if keep is None:
        return torch.softmax(scores, dim=-1)
    scores.masked_fill_(~keep, _NEG)
    probs = torch.softmax(scores, dim=-1)  # a fully masked row is uniform here ...
    row_ok = keep.any(dim=-1, keepdim=True)
    if not bool(row_ok.all()):
        probs = probs * row_ok  # ... and zero here; the common case (every row has a key) skips this pass
    return probs


def _window_softmax(scores: torch.Tensor, keep: torch.Tensor | None, dropout_p: float) -> torch.Tensor:
    """float32 softmax of window scores (..., q, k) where ``keep`` (bool, broadcastable), then dropout.

    The mask is *added* (0 / ``-finfo.max``, float32, as small as ``keep``) rather than filled in: the add's
    backward hands the gradient through unchanged, where masked_fill's would mask it again (one more pass over
    the largest tensor). Fully masked rows come out uniform here; the kernels zero their *outputs* instead
    (:func:`_zero_empty_rows`), a pass over (..., q, Dh) instead of (..., q, k).
    """
    scores = scores.float()
    if keep is not None:
        scores = scores + torch.zeros(keep.shape, device=keep.device).masked_fill_(~keep, _NEG)
    probs = torch.softmax(scores, dim=-1)
    return fast_dropout(probs, dropout_p, True)


def _zero_empty_rows(out: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """``out`` (..., q, Dh) with the rows whose ``keep`` (..., q, k) holds no key set to 0 (skipped if none)."""
    if keep is None:
        return out
    row_ok = keep.any(dim=-1, keepdim=True)  # (..., q, 1)
    return out if bool(row_ok.all()) else out * row_ok


# ---- banded (sliding) windows ------------------------------------------------------------------------------


def _band_offsets(r: int, device) -> torch.Tensor:
    """``j - i`` for query ``a`` of a block and key ``b`` of the 3-block strip around it: (r, 3r) long."""
    a = torch.arange(r, device=device)
    b = torch.arange(3 * r, device=device)
    return b[None, :] - r - a[:, None]  # (r, 3r): key j = (n-1)r + b, query i = nr + a, so j - i = b - r - a


def banded_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_mask: torch.Tensor | None = None,
    *,
    window_one_sided: int,
    global_first: bool = False,
    rel_bias: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Sliding-window attention, ``O(L * window)`` memory.

    Args:
        q, k, v: (B, H, L, Dh).
        key_mask: (B, L) bool, True = the key may be attended; None = all keys.
        window_one_sided: r >= 1; query i sees keys i-r .. i+r.
        global_first: token 0 attends to every key and every query attends to it (Longformer). Key 0 then
            enters each row once, through an extra "global" column, and carries no relative bias.
        rel_bias: (H, 2r+1) added to the score of offset ``j - i`` (index ``j - i + r``); None = no bias.
        dropout_p: dropout on the attention weights (pass 0 in eval).
    Returns:
        (B, H, L, Dh); rows with no valid key are zeros.
    """
    r = window_one_sided
    if r < 1:
        raise ValueError(f"window_one_sided must be >= 1, got {r}")
    B, H, L, Dh = q.shape
    nb = -(-L // r)  # number of query blocks
    pad = nb * r - L
    valid = key_mask if key_mask is not None else torch.ones(1, L, dtype=torch.bool, device=q.device)  # (B|1, L)

    qb = F.pad(q * Dh**-0.5, (0, 0, 0, pad)).view(B, H, nb, r, Dh)  # (B, H, nb, r, Dh): queries nr..nr+r-1
    # Keys and values of the 3-block strip around each block (B, H, nb, 3r, Dh), overlapping views; with
    # global_first key 0 is appended to every strip (one copy): 3r + 1 rows.
    kw = F.pad(k, (0, 0, r, pad + r)).unfold(2, 3 * r, r).transpose(-1, -2)  # (B, H, nb, 3r, Dh): a view
    vw = F.pad(v, (0, 0, r, pad + r)).unfold(2, 3 * r, r).transpose(-1, -2)  # (B, H, nb, 3r, Dh)
    kvalid = F.pad(valid, (r, pad + r), value=False)  # (B|1, Lp + 2r): out-of-range keys are invalid
    if global_first:
        kvalid = kvalid.clone()
        kvalid[:, r] = False  # key 0 is reached through the global column instead
        kw = torch.cat([kw, k[:, :, None, :1].expand(B, H, nb, 1, Dh)], dim=3)  # (B, H, nb, 3r+1, Dh)
        vw = torch.cat([vw, v[:, :, None, :1].expand(B, H, nb, 1, Dh)], dim=3)  # (B, H, nb, 3r+1, Dh)
    kvalid = kvalid.unfold(1, 3 * r, r)  # (B|1, nb, 3r)

    offsets = _band_offsets(r, q.device)  # (r, 3r)
    keep = (offsets.abs() <= r) & kvalid[:, :, None, :]  # (B|1, nb, r, 3r)
    if global_first:
        g_ok = valid[:, :1, None, None].expand(keep.shape[0], nb, r, 1)  # (B|1, nb, r, 1): is key 0 real
        keep = torch.cat([keep, g_ok], dim=-1)  # (B|1, nb, r, 3r+1)

    # scores: b batch, h head, n block, q query in block, k key in strip, d head dim
    scores = torch.einsum("bhnqd,bhnkd->bhnqk", qb, kw)  # (B, H, nb, r, 3r[+1])
    if rel_bias is not None:
        bias = rel_bias[:, offsets.clamp(-r, r) + r]  # (H, r, 3r); out-of-band entries are masked below
        if global_first:
            bias = F.pad(bias, (0, 1))  # (H, r, 3r+1): no bias on the global column
        scores = scores + bias[None, :, None].to(scores.dtype)
    probs = _window_softmax(scores, keep[:, None], dropout_p)  # (B, H, nb, r, 3r[+1]) float32
    out = torch.einsum("bhnqk,bhnkd->bhnqd", probs.to(v.dtype), vw)  # (B, H, nb, r, Dh)
    out = _zero_empty_rows(out, keep[:, None])  # (B, H, nb, r, Dh)
    out = out.reshape(B, H, nb * r, Dh)[:, :, :L]  # (B, H, L, Dh)
    if global_first:  # the global query: token 0 over every real key
        s0 = torch.einsum("bhd,bhld->bhl", qb[:, :, 0, 0], k)  # (B, H, L): query 0 x every key
        p0 = _window_softmax(s0, valid[:, None, :], dropout_p)  # (B, H, L)
        out0 = torch.einsum("bhl,bhld->bhd", p0.to(v.dtype), v)  # (B, H, Dh)
        out0 = _zero_empty_rows(out0, valid[:, None, :])  # (B, H, Dh): a fully padded sample gives 0
        out = torch.cat([out0[:, :, None], out[:, :, 1:]], dim=2)  # (B, H, L, Dh)
    return out


def sliding_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    window_one_sided: int,
    key_mask: torch.Tensor | None = None,
    rel_bias: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """:func:`banded_window_attention` without a global token (the enhanced SwarmFormer's call signature)."""
    return banded_window_attention(
        q, k, v, key_mask, window_one_sided=window_one_sided, rel_bias=rel_bias, dropout_p=dropout_p
    )


# ---- partitioned (Swin-style) windows, plain or shifted ----------------------------------------------------


def window_partition(x: torch.Tensor, window: int) -> torch.Tensor:
    """(B, L, ...) -> (B, L / W, W, ...): consecutive, non-overlapping windows (a view; L % W == 0)."""
    B, L = x.shape[:2]
    if L % window:
        raise ValueError(f"length {L} is not a multiple of the window {window}: pad it first")
    return x.view(B, L // window, window, *x.shape[2:])


def window_reverse(windows: torch.Tensor) -> torch.Tensor:
    """(B, nW, W, ...) -> (B, nW * W, ...): the inverse of :func:`window_partition`."""
    B, nW, W = windows.shape[:3]
    return windows.reshape(B, nW * W, *windows.shape[3:])


def shifted_window_mask(L: int, window: int, shift: int, device=None) -> torch.Tensor:
    """(nW, W, W) bool, True = keep: Swin's attention mask for a sequence rolled left by ``shift``.

    After ``roll(x, -shift)`` position ``p`` holds token ``(p + shift) mod L``. Swin labels three slices of
    the rolled sequence, ``[0, L-W)``, ``[L-W, L-shift)`` and ``[L-shift, L)``, and lets two tokens of one
    window attend only when their labels agree. Only the last window holds two labels: its first ``W-shift``
    positions are the sequence's end, its last ``shift`` positions (rolled around) are the sequence's start.
    """
    label = torch.zeros(L, dtype=torch.long, device=device)
    if shift:
        label[L - window : L - shift] = 1
        label[L - shift :] = 2
    lw = label.view(L // window, window)  # (nW, W)
    return lw[:, :, None] == lw[:, None, :]  # (nW, W, W): query x key


def relative_position_index(window: int, device=None) -> torch.Tensor:
    """(W, W) long: ``j - i + W - 1`` for query ``i`` and key ``j`` of a window, an index into a (2W - 1) table."""
    pos = torch.arange(window, device=device)
    return pos[None, :] - pos[:, None] + window - 1


def partitioned_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_mask: torch.Tensor | None = None,
    *,
    window: int,
    attn_mask: torch.Tensor | None = None,
    rel_bias: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Attention inside consecutive windows of ``window`` tokens (no roll: see :func:`shifted_window_attention`).

    Args:
        q, k, v: (B, H, L, Dh), L a multiple of ``window`` (:func:`shifted_window_attention` pads any L).
        key_mask: (B, L) bool, True = the key may be attended; None = all keys.
        window: W, tokens per window (total).
        attn_mask: (nW, W, W) bool, True = query may attend key (e.g. :func:`shifted_window_mask`); None = all.
        rel_bias: (H, 2W - 1) added to the score of offset ``j - i`` (index ``j - i + W - 1``); None = no bias.
        dropout_p: dropout on the attention weights (pass 0 in eval).
    Returns:
        (B, H, L, Dh); rows with no valid key are zeros.
    """
    B, H, L, Dh = q.shape
    W = window
    if L % W:
        raise ValueError(f"length {L} is not a multiple of the window {W}: pad it first")
    nW = L // W
    qw = (q * Dh**-0.5).view(B, H, nW, W, Dh)  # (B, H, nW, W, Dh)
    kw, vw = k.view(B, H, nW, W, Dh), v.view(B, H, nW, W, Dh)  # (B, H, nW, W, Dh)
    # scores: b batch, h head, n window, q query in window, k key in window, d head dim
    scores = torch.einsum("bhnqd,bhnkd->bhnqk", qw, kw)  # (B, H, nW, W, W)
    if rel_bias is not None:
        bias = rel_bias[:, relative_position_index(W, q.device)]  # (H, W, W)
        scores = scores + bias[None, :, None].to(scores.dtype)
    keep = None
    if key_mask is not None:
        keep = key_mask.view(B, 1, nW, 1, W)  # (B, 1, nW, 1, W)
    if attn_mask is not None:
        keep = attn_mask[None, None] if keep is None else keep & attn_mask[None, None]  # (B|1, 1, nW, W, W)
    probs = _window_softmax(scores, keep, dropout_p)  # (B, H, nW, W, W) float32
    out = torch.einsum("bhnqk,bhnkd->bhnqd", probs.to(v.dtype), vw)  # (B, H, nW, W, Dh)
    out = _zero_empty_rows(out, keep)  # (B, H, nW, W, Dh)
    return out.reshape(B, H, L, Dh)


def shifted_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_mask: torch.Tensor | None = None,
    *,
    window: int,
    shift: int = 0,
    rel_bias: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Swin's (shifted-)window attention in 1-D, any length: pad the end to a multiple of ``window`` (padded keys
    masked), roll left by ``shift``, attend per window with the wrap-around masked, roll back, cut the padding.
    ``shift=0`` is plain window attention. Arguments as :func:`partitioned_window_attention`, L unrestricted.

    Equivalent to attention inside the blocks ``[0, shift), [shift, shift+W), [shift+W, shift+2W), ...`` of the
    sequence (the dense oracle in swarmlab/testing computes exactly that); appending more padding
    changes no block of the real tokens.
    """
    B, H, L, Dh = q.shape
    if not 0 <= shift < window:
        raise ValueError(f"shift must be in [0, window={window}), got {shift}")
    pad = (-L) % window
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))  # (B, H, Lp, Dh)
        key_mask = torch.ones(B, L, dtype=torch.bool, device=q.device) if key_mask is None else key_mask
        key_mask = F.pad(key_mask, (0, pad), value=False)  # (B, Lp)
    attn_mask = None
    if shift:
        q, k, v = (torch.roll(t, -shift, dims=2) for t in (q, k, v))  # (B, H, Lp, Dh): position p holds token p + shift
        key_mask = None if key_mask is None else torch.roll(key_mask, -shift, dims=1)  # (B, Lp)
        attn_mask = shifted_window_mask(L + pad, window, shift, q.device)  # (nW, W, W)
    out = partitioned_window_attention(
        q, k, v, key_mask, window=window, attn_mask=attn_mask, rel_bias=rel_bias, dropout_p=dropout_p
    )  # (B, H, Lp, Dh)
    if shift:
        out = torch.roll(out, shift, dims=2)
    return out[:, :, :L] if pad else out  # (B, H, L, Dh)


def window_block_ids(L: int, window: int, shift: int = 0, device=None) -> torch.Tensor:
    """(L,) long: the block each position attends within, in unrolled coordinates: cuts at ``shift + k*W``."""
    return (torch.arange(L, device=device) + (window - shift) % window) // window


# ---- modules -----------------------------------------------------------------------------------------------


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

    def __init__(
        self,
        dim: int,
        *,
        heads: int,
        dim_head: int,
        window_one_sided: int,
        attn_dropout: float = 0.0,
        rel_pos_bias: bool = True,
    ):
        super().__init__()
        self.heads, self.dim_head, self.window_one_sided = heads, dim_head, window_one_sided
        self.attn_dropout = attn_dropout
        inner = heads * dim_head
        self.qkv = nn.Linear(dim, 3 * inner)
        self.out_proj = nn.Linear(inner, dim)
        self.rel_bias = nn.Parameter(torch.zeros(heads, 2 * window_one_sided + 1)) if rel_pos_bias else None

    def no_weight_decay(self) -> set[str]:
        """Parameters (names within this module) the optimizer leaves undecayed: the relative-position bias table,
        as Swin does (``swarmlab.engine.make_optimizer`` reads this)."""
        return {"rel_bias"} if self.rel_bias is not None else set()

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, L, _ = x.shape
        qkv = self.qkv(x).view(B, L, 3, self.heads, self.dim_head)  # (B, L, 3, H, Dh)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, L, Dh) each
        return q, k, v

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, _ = x.shape
        q, k, v = self._split(x)
        out = banded_window_attention(
            q,
            k,
            v,
            mask,
            window_one_sided=self.window_one_sided,
            rel_bias=self.rel_bias,
            dropout_p=self.attn_dropout if self.training else 0.0,
        )  # (B, H, L, Dh)
        return self.out_proj(out.transpose(1, 2).reshape(B, L, -1))  # (B, L, D)


class ShiftedWindowAttention(nn.Module):
    """Swin's W-MSA / SW-MSA in 1-D: multi-head attention inside windows of ``window`` tokens, the sequence
    rolled left by ``shift`` first (0 = plain windows), PAD keys and the wrap-around masked, a learned
    relative-position bias per head (Swin's table of 2W - 1 offsets, truncated-normal init, std 0.02).

    Any length works: the projections run on the L tokens only; the attention pads q, k, v to a multiple of the
    window (masked) and cuts the padding off again (:func:`shifted_window_attention`).

    Args:
        dim: model width D.
        heads: H; head width Dh = D / H, scale Dh ** -0.5.
        window: W tokens per window (total).
        shift: tokens to roll by, in [0, W); Swin uses W // 2 in every other block.
        attn_dropout: dropout on the attention weights.
        proj_dropout: dropout on the output projection.
    """

    def __init__(
        self, dim: int, *, heads: int, window: int, shift: int = 0, attn_dropout: float = 0.0, proj_dropout: float = 0.0
    ):
        super().__init__()
        if dim % heads:
            raise ValueError(f"width {dim} is not divisible by heads={heads}")
        if not 0 <= shift < window:
            raise ValueError(f"shift must be in [0, window={window}), got {shift}")
        self.heads, self.window, self.shift, self.attn_dropout = heads, window, shift, attn_dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = Dropout(proj_dropout)
        self.rel_bias = nn.Parameter(nn.init.trunc_normal_(torch.zeros(heads, 2 * window - 1), std=0.02))

    def no_weight_decay(self) -> set[str]:
        """Parameters (names within this module) the optimizer leaves undecayed: the relative-position bias table,
        as Swin does (``swarmlab.engine.make_optimizer`` reads this)."""
        return {"rel_bias"} if self.rel_bias is not None else set()

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, L, D = x.shape
        qkv = self.qkv(x).view(B, L, 3, self.heads, D // self.heads)  # (B, L, 3, H, Dh)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, L, Dh) each
        return q, k, v

    def _out(self, out: torch.Tensor) -> torch.Tensor:
        B, H, L, Dh = out.shape
        return self.proj_drop(self.proj(out.transpose(1, 2).reshape(B, L, H * Dh)))  # (B, L, D)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, D); mask: (B, L) bool, True = real token. Returns (B, L, D)."""
        q, k, v = self._qkv(x)
        out = shifted_window_attention(
            q,
            k,
            v,
            mask,
            window=self.window,
            shift=self.shift,
            rel_bias=self.rel_bias,
            dropout_p=self.attn_dropout if self.training else 0.0,
        )  # (B, H, L, Dh)
        return self._out(out)
