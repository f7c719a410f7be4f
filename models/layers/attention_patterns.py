"""Multi-head self-attention with four patterns: full, sliding window + global, fixed sparse, linear.

Every module maps ``x (B, L, D)`` and a key mask ``(B, L)`` (bool, True = real token; None = all real)
to ``(B, L, D)``. The patterns are written as functions of per-head ``q, k, v (B, H, L, Dh)`` so the
tests can compare each against the dense oracles in ``swarmlab/testing/reference_attention_patterns.py``.

Conventions shared by the fast kernels (after allenai/longformer ``sliding_chunks.py``): scores are
computed in the input dtype, then masked with ``-finfo(float32).max`` and soft-maxed in float32; a
query that may attend to no key at all (a fully padded sequence) gets an all-zero output, not NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.attention import masked_sdpa
from models.layers.drop import fast_dropout
from models.layers.window_attention import banded_window_attention, masked_softmax


def full_attention(q, k, v, key_mask=None, *, dropout_p: float = 0.0, training: bool = False, impl: str = "sdpa"):
    """Softmax attention of every query over every (real) key.

    ``impl="sdpa"``: ``F.scaled_dot_product_attention`` (a fused / flash kernel where one applies: no
    (L, L) matrix kept). ``impl="dense"``: the (B, H, L, L) score matrix is materialized explicitly.
    """
    B, H, L, Dh = q.shape
    if impl == "dense":
        scores = torch.einsum("bhqd,bhkd->bhqk", q * Dh**-0.5, k)  # (B, H, L, L): query x key
        if key_mask is None:  # at peak: the scores and their softmax, 2 * B*H*L^2 floats
            probs = torch.softmax(scores.float(), dim=-1)
        else:
            probs = masked_softmax(scores, key_mask[:, None, None, :].expand(-1, 1, L, L))
        probs = fast_dropout(probs, dropout_p, training)
        return torch.einsum("bhqk,bhkd->bhqd", probs.to(v.dtype), v)  # (B, H, L, Dh)
    if impl != "sdpa":
        raise ValueError(f"full_attention impl must be 'sdpa' or 'dense', got {impl!r}")
    # masked_sdpa guards fully padded sequences (SDPA alone gives NaN there): their output is 0.
    return masked_sdpa(q, k, v, key_mask=key_mask, dropout_p=dropout_p if training else 0.0)  # (B, H, L, Dh)


def sliding_chunks_attention(
    q,
    k,
    v,
    key_mask=None,
    *,
    window_one_sided: int,
    global_first: bool = True,
    dropout_p: float = 0.0,
    training: bool = False,
):
    """Longformer attention (Beltagy et al., 2020): query i sees keys i-w..i+w (w = ``window_one_sided``,
    2w+1 keys); with ``global_first`` the first token attends to every key and every query attends to it.

    The kernel is :func:`models.layers.window_attention.banded_window_attention` (chunks of w queries
    against the 3w keys around them, memory O(L * w)), shared with the enhanced SwarmFormer and HSW's module.
    """
    return banded_window_attention(
        q,
        k,
        v,
        key_mask,
        window_one_sided=window_one_sided,
        global_first=global_first,
        dropout_p=dropout_p if training else 0.0,
    )


def fixed_sparse_attention(
    q,
    k,
    v,
    key_mask=None,
    *,
    block: int,
    summary: int,
    dropout_p: float = 0.0,
    training: bool = False,
    max_chunk_elems: int = 2**20,
):
    """Sparse Transformer 'fixed' pattern (Child et al., 2019), bidirectional: query i sees every key of
    its block (``block`` = l consecutive positions) and the summary keys, the last ``summary`` (= c)
    positions of every block (j mod l >= l - c).

    Computed as block-local attention (B, H, n, l, l) joined, inside one softmax, with attention to the
    M = n*c gathered summary keys; the summary keys of a query's own block are masked in the second
    part (they are already in the first). Queries are processed a few blocks at a time so that the
    scores never exceed ``max_chunk_elems`` elements: memory O(L*l + chunk), time O(L*(l + L*c/l)).
    """
    B, H, L, Dh = q.shape
    S, c = block, summary
    n = math.ceil(L / S)  # blocks
    pad = n * S - L
    q = q * Dh**-0.5
    valid = key_mask if key_mask is not None else torch.ones(B, L, dtype=torch.bool, device=q.device)
    valid_b = F.pad(valid, (0, pad), value=False).view(B, n, S)  # (B, n, S)
    qb, kb, vb = (F.pad(t, (0, 0, 0, pad)).view(B, H, n, S, Dh) for t in (q, k, v))  # (B, H, n, S, Dh)
    M = n * c
    ks = kb[:, :, :, S - c :].reshape(B, H, M, Dh)  # (B, H, M, Dh): the summary keys, block by block
    vs = vb[:, :, :, S - c :].reshape(B, H, M, Dh)  # (B, H, M, Dh)
    s_valid = valid_b[:, :, S - c :].reshape(B, M)  # (B, M)
    s_block = torch.arange(n, device=q.device).repeat_interleave(c)  # (M,): block of each summary key

    step = max(1, max_chunk_elems // max(1, B * H * S * (S + M)))  # query blocks per chunk
    # Written in place: small per-chunk outputs kept between the large freed score buffers fragment the
    # glibc heap (measured: 4.7 GB peak RSS instead of 0.2 GB at L = 65536).
    out = q.new_empty(B, H, n, S, Dh)
    for s in range(0, n, step):
        e = min(n, s + step)
        local = torch.einsum("bhnqd,bhnkd->bhnqk", qb[:, :, s:e], kb[:, :, s:e])  # (B, H, n', S, S): in-block
        summ = torch.einsum("bhnqd,bhmd->bhnqm", qb[:, :, s:e], ks)  # (B, H, n', S, M): query x summary key
        local_ok = valid_b[:, None, s:e, None, :].expand(B, 1, e - s, 1, S)  # (B, 1, n', 1, S)
        other = s_block[None, :] != torch.arange(s, e, device=q.device)[:, None]  # (n', M): not own block
        summ_ok = s_valid[:, None, None, None, :] & other[None, None, :, None, :]  # (B, 1, n', 1, M)
        probs = masked_softmax(torch.cat([local, summ], dim=-1), torch.cat([local_ok, summ_ok], dim=-1))
        probs = fast_dropout(probs, dropout_p, training).to(v.dtype)  # (B, H, n', S, S + M)
        out[:, :, s:e] = (
            torch.einsum("bhnqk,bhnkd->bhnqd", probs[..., :S], vb[:, :, s:e])  # (B, H, n', S, Dh)
            + torch.einsum("bhnqm,bhmd->bhnqd", probs[..., S:], vs)
        )
    return out.view(B, H, n * S, Dh)[:, :, :L]  # (B, H, L, Dh)


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1 > 0 (Katharopoulos et al., 2020)."""
    return F.elu(x) + 1


def linear_attention(q, k, v, key_mask=None, *, eps: float = 1e-6):
    """Non-causal kernelized attention: out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j)).

    O(L * Dh^2) time and memory; padded keys get phi(k) = 0, so they add nothing to either sum. The sums
    run in float32. A fully padded sequence has both sums zero: its output is 0.
    """
    dtype = v.dtype
    fq, fk, v = elu_feature_map(q.float()), elu_feature_map(k.float()), v.float()  # (B, H, L, Dh)
    if key_mask is not None:
        fk = fk * key_mask[:, None, :, None]
    kv = torch.einsum("bhld,bhle->bhde", fk, v)  # (B, H, Dh, Dh): sum over keys of phi(k) v^T
    z = fk.sum(dim=2)  # (B, H, Dh): sum over keys of phi(k)
    num = torch.einsum("bhld,bhde->bhle", fq, kv)  # (B, H, L, Dh)
    den = torch.einsum("bhld,bhd->bhl", fq, z)  # (B, H, L)
    return (num / (den[..., None] + eps)).to(dtype)


class PatternSelfAttention(nn.Module):
    """Projections around one of the patterns above: ``qkv`` (D -> 3D), the pattern per head, ``proj`` (D -> D).

    Args:
        dim: model width D.
        num_heads: H; the head width Dh = D / H, scores scaled by Dh ** -0.5.
        pattern: "full", "sliding_chunks", "fixed_sparse" or "linear".
        dropout: dropout on the attention probabilities (not used by "linear", which has none).
        **pattern_kwargs: passed to the pattern function (``impl``, ``window_one_sided``, ``block``, ...).
    """

    PATTERNS = {
        "full": full_attention,
        "sliding_chunks": sliding_chunks_attention,
        "fixed_sparse": fixed_sparse_attention,
        "linear": linear_attention,
    }

    def __init__(self, dim: int, *, num_heads: int, pattern: str, dropout: float = 0.0, **pattern_kwargs):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"d_model={dim} is not divisible by num_heads={num_heads}")
        if pattern not in self.PATTERNS:
            raise ValueError(f"unknown attention pattern {pattern!r}; choose one of {sorted(self.PATTERNS)}")
        self.num_heads = num_heads
        self.pattern = pattern
        self.pattern_kwargs = pattern_kwargs
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, D = x.shape
        H = self.num_heads
        q, k, v = self.qkv(x).view(B, L, 3, H, D // H).permute(2, 0, 3, 1, 4)  # 3 x (B, H, L, Dh)
        fn = self.PATTERNS[self.pattern]
        if self.pattern == "linear":
            out = fn(q, k, v, key_mask, **self.pattern_kwargs)
        else:
            out = fn(q, k, v, key_mask, dropout_p=self.dropout, training=self.training, **self.pattern_kwargs)
        return self.proj(out.transpose(1, 2).reshape(B, L, D))  # (B, L, D)
