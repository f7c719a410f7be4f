"""Dense oracles of the window attention kernels in ``models/layers/window_attention.py``: one full (L, L) score
matrix under an explicit mask. O(L^2): for tests only.

* :func:`dense_window_attention`: the banded (sliding) window, ``|i - j| <= window_one_sided``;
* :func:`dense_shifted_window_attention`: Swin's partitioned windows, shifted or not, as blocks of the unrolled
  sequence (no roll, hence no wrap-around by construction);
* :func:`dense_local_forward`, :func:`dense_shifted_forward`: a module's forward (without dropout) through them,
  reusing the module's own projections, so that a test compares the kernels inside the modules.
"""

from __future__ import annotations

import torch


def dense_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    window_one_sided: int,
    key_mask: torch.Tensor | None = None,
    rel_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """The banded function with a full (L, L) score matrix: the oracle of ``sliding_window_attention``."""
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


def dense_shifted_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_mask: torch.Tensor | None = None,
    *,
    window: int,
    shift: int = 0,
    rel_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """The oracle of ``shifted_window_attention``: one (L, L) float64 softmax under the block mask "i and j in the
    same block", the blocks cut at ``shift + k * window`` (``[0, shift), [shift, shift + W), ...``)."""
    B, H, L, Dh = q.shape
    block = (torch.arange(L, device=q.device) + (window - shift) % window) // window  # (L,)
    allowed = (block[:, None] == block[None, :])[None, None]  # (1, 1, L, L)
    if key_mask is not None:
        allowed = allowed & key_mask[:, None, None, :]  # (B, 1, L, L)
    scores = (q.double() @ k.double().transpose(-2, -1)) * Dh**-0.5  # (B, H, L, L)
    if rel_bias is not None:
        pos = torch.arange(L, device=q.device)
        offsets = (pos[None, :] - pos[:, None]).clamp(-(window - 1), window - 1)  # (L, L); outside blocks: masked
        scores = scores + rel_bias.double()[:, offsets + window - 1][None]  # (1, H, L, L)
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row of -inf is NaN after softmax: zero it
    return (probs @ v.double()).to(v.dtype)  # (B, H, L, Dh)


def dense_local_forward(attn, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``LocalWindowAttention.forward`` (without dropout) through :func:`dense_window_attention`."""
    B, L, _ = x.shape
    q, k, v = attn._split(x)
    out = dense_window_attention(q, k, v, window_one_sided=attn.window_one_sided, key_mask=mask, rel_bias=attn.rel_bias)
    return attn.out_proj(out.transpose(1, 2).reshape(B, L, -1))  # (B, L, D)


def dense_shifted_forward(attn, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``ShiftedWindowAttention.forward`` (without dropout) through :func:`dense_shifted_window_attention`."""
    q, k, v = attn._qkv(x)
    out = dense_shifted_window_attention(q, k, v, mask, window=attn.window, shift=attn.shift, rel_bias=attn.rel_bias)
    return attn._out(out)
