"""Hierarchical Shifted Window attention (HSW; Yang & Feng, paper 002): a 1-D Swin Transformer for long text.

    tokens (B, L) -> Embedding(V, E) -> Linear(E, C)                                     (B, L, C)
    stage 1: depth[0] pre-LN blocks, windows of W tokens, every other block shifted by W/2   (B, L, C)
    merge 4 contiguous tokens: LayerNorm(4C) -> Linear(4C, 2C)                           (B, L/4, 2C)
    stage 2 ... stage S (no merge after the last)                                        (B, L/4^(S-1), C*2^(S-1))
    LayerNorm -> mean over the real positions -> Linear(num_classes)                     (B, num_classes)

With the paper's sizes (C = 96, depths 2/2/6/2, heads 3/6/12/24, W = 128) 4096 tokens become 64 tokens of
width 768. Each merge quarters the length and doubles the width, so every block costs about the same in its
linear layers (L * C^2 is unchanged); the attention per block shrinks with the length.

Following the authors' code (fengling0410/Long-Sequences-Processing-with-Hierarchical-Shifted-Window-Attention,
``src/model.py``) and Swin Transformer (Liu et al., 2021): the shift is a cyclic roll by W/2 with Swin's mask,
so tokens rolled around the end never attend across the sequence boundary; a learned relative-position bias
(2W - 1 offsets per head) and no absolute positions; the merge is bias-free; MLP ratio 4; stochastic depth
rising linearly to 0.1; truncated-normal (0.02) init. Where this differs from their code:

  * the token embedding is trainable and randomly initialised: the authors froze pretrained Longformer
    embeddings (768 wide, kept as ``embed_dim``), which are not available offline;
  * padding is masked everywhere (their code attends to and pools over PAD): padded keys are masked in every
    window, padded tokens enter a merge as zeros, a merged token is real iff any of its 4 tokens is, and the
    pooling averages the real positions only. Appending PAD therefore leaves the logits unchanged (eval);
  * any length works, padded at the end so that a token's windows and merge groups do not depend on how much
    padding follows: the attention pads q, k, v to a multiple of the window (masked keys), a stage pads its
    input to a multiple of 4 before a merge (masked), and nothing else is padded, so the linear layers run on
    at most 3 tokens per stage of HSW's own padding. A stage of at most W/2 tokens attends over the whole stage in its plain
    and its shifted blocks, which is what the authors' code computes there (it shrinks the window to the stage
    and turns the shift off; at L = 4096 that is stage 4, 64 tokens); between W/2 and W tokens the shifted block
    still cuts at W/2 where theirs would not shift;
  * the window is the same W at every stage (the authors' too); the paper's text says 64, their code 128.

A stage of depth 1 has only a plain block (no shifted one): ``hsw_small`` (depths 1/1/2/1) shifts in stage 3 only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.drop import DropPath, Dropout
from models.layers.mlp import Mlp
from models.layers.params import NumParamsMixin
from models.layers.transformer import masked_mean
from models.layers.window_attention import ShiftedWindowAttention
from models.registry import build_config, register_model
from swarmlab.settings import check_config, setting

MERGE = 4  # tokens merged into one between stages (Swin merges 2 x 2 patches; the authors 4 contiguous tokens)


@dataclass
class HSWConfig:
    vocab_size: int = setting(259, ge=1)  # byte-level text: 256 bytes + PAD, CLS, SEP (tasks/long_data.py)
    num_classes: int = setting(11, ge=1)  # arXiv-11 (He et al., 2019), the paper's task
    # L the data is padded / truncated to (the paper's 4096); other lengths are padded inside
    seq_len: int = setting(4096, ge=1)
    # E, token-embedding width before the Linear to d_model: the authors' Longformer table
    embed_dim: int = setting(768, ge=1)
    # C, stage-1 width; stage s has C * 2**s: 96/192/384/768 (Swin-T, the authors' embed_dim)
    d_model: int = setting(96, ge=1)
    depths: tuple[int, ...] = (2, 2, 6, 2)  # blocks per stage (Swin-T; the authors' code)
    heads: tuple[int, ...] = (3, 6, 12, 24)  # per stage: head width 32 throughout (Swin-T; the authors' code)
    # W tokens per window, total, at every stage (the authors' code; the paper's text says 64)
    window: int = setting(128, ge=2)
    mlp_ratio: int = setting(4, ge=1)  # MLP hidden width = mlp_ratio * stage width (Swin; the authors)
    dropout: float = setting(0.0, ge=0, lt=1)  # embeddings, attention output, MLP (the authors' drop_rate 0)
    attn_dropout: float = setting(0.0, ge=0, lt=1)  # attention weights (the authors' attn_drop_rate 0)
    # stochastic depth, rising linearly from 0 to this over all blocks (the authors' rate)
    drop_path: float = setting(0.1, ge=0, lt=1)

    def __post_init__(self):
        for name in ("depths", "heads"):  # params.yaml gives lists
            if isinstance(getattr(self, name), list):
                setattr(self, name, tuple(getattr(self, name)))
        check_config(self)
        for name in ("depths", "heads"):
            value = getattr(self, name)
            if not value or any(v < 1 for v in value):
                raise ValueError(f"HSWConfig.{name} must be a non-empty tuple of positive ints, got {value!r}")
        if len(self.depths) != len(self.heads):
            raise ValueError(f"HSWConfig: depths {self.depths} and heads {self.heads} must have one entry per stage")
        for s, (dim, h) in enumerate(zip(self.stage_dims, self.heads)):
            if dim % h:
                raise ValueError(
                    f"HSWConfig: stage {s + 1} has width d_model * 2**{s} = {dim}, not divisible by "
                    f"heads[{s}] = {h}: change d_model or heads"
                )
        if self.window % 2:
            raise ValueError(
                f"HSWConfig.window={self.window} must be even and >= 2: shifted blocks move by exactly "
                f"half a window (e.g. window={max(2, self.window + 1)})"
            )
        shortest = MERGE ** (self.num_stages - 1)
        if self.seq_len < shortest:
            raise ValueError(
                f"HSWConfig: seq_len={self.seq_len} gives stage {self.num_stages} less than one token "
                f"({shortest} tokens merge into one there): raise seq_len to >= {shortest} or use "
                f"fewer stages"
            )

    @property
    def num_stages(self) -> int:
        return len(self.depths)

    @property
    def stage_dims(self) -> list[int]:
        """Width of each stage: d_model doubled by every merge."""
        return [self.d_model * 2**s for s in range(self.num_stages)]

    def stage_multiple(self, stage: int) -> int:
        """Each stage's input is padded to a multiple of this: MERGE when a merge follows, else 1 (the attention
        pads to whole windows by itself)."""
        return 1 if stage == self.num_stages - 1 else MERGE

    def stage_lengths(self, length: int | None = None) -> list[int]:
        """Token count of each stage (padding included) for an input of ``length`` tokens (default seq_len)."""
        n = self.seq_len if length is None else length
        out = []
        for s in range(self.num_stages):
            m = self.stage_multiple(s)
            n = -(-n // m) * m
            out.append(n)
            n //= MERGE
        return out


class HSWBlock(nn.Module):
    """Pre-LN 1-D Swin block: ``x + DropPath(SW-MSA(LN(x)))``, then ``x + DropPath(MLP(LN(x)))``.

    Args:
        dim: stage width.
        heads: attention heads (head width dim / heads).
        window: W tokens per window.
        shift: 0 (plain windows) or W // 2 (shifted).
        mlp_ratio: MLP hidden width = mlp_ratio * dim.
        dropout: on the attention output and in / after the MLP.
        attn_dropout: on the attention weights.
        drop_path: stochastic-depth probability of this block.
    """

    def __init__(
        self,
        dim: int,
        *,
        heads: int,
        window: int,
        shift: int,
        mlp_ratio: int,
        dropout: float,
        attn_dropout: float,
        drop_path: float,
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ShiftedWindowAttention(
            dim, heads=heads, window=window, shift=shift, attn_dropout=attn_dropout, proj_dropout=dropout
        )
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, mlp_ratio * dim, dropout)
        self.mlp_drop = Dropout(dropout)
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), mask))  # (B, L, C)
        return x + self.drop_path(self.mlp_drop(self.mlp(self.norm2(x))))  # (B, L, C)


class PatchMerging(nn.Module):
    """Merge 4 contiguous tokens into one: ``LayerNorm(4C) -> Linear(4C, 2C)`` (bias-free, as Swin and the authors).

    Padded tokens enter as zeros; a merged token is real iff any of its 4 tokens is.

    Args:
        dim: C, the width before merging.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(MERGE * dim)
        self.reduction = nn.Linear(MERGE * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x: (B, L, C), L a multiple of 4; mask: (B, L) bool | None. Returns (B, L/4, 2C) and (B, L/4) | None."""
        B, L, C = x.shape
        if L % MERGE:
            raise ValueError(f"PatchMerging needs a length divisible by {MERGE}, got {L}: pad it first")
        if mask is not None:
            x = x.masked_fill(~mask[..., None], 0.0)  # (B, L, C): whatever a PAD position holds, it merges as 0
            mask = mask.view(B, L // MERGE, MERGE).any(dim=-1)  # (B, L/4)
        x = x.reshape(B, L // MERGE, MERGE * C)  # (B, L/4, 4C): token i = [x_4i, x_4i+1, x_4i+2, x_4i+3]
        return self.reduction(self.norm(x)), mask  # (B, L/4, 2C)


class HSWStage(nn.Module):
    """``depth`` blocks alternating plain and shifted windows, then (except the last stage) a patch merge."""

    def __init__(self, cfg: HSWConfig, stage: int, drop_paths: list[float]):
        super().__init__()
        dim = cfg.stage_dims[stage]
        self.multiple = cfg.stage_multiple(stage)
        self.blocks = nn.ModuleList(
            HSWBlock(
                dim,
                heads=cfg.heads[stage],
                window=cfg.window,
                shift=0 if i % 2 == 0 else cfg.window // 2,
                mlp_ratio=cfg.mlp_ratio,
                dropout=cfg.dropout,
                attn_dropout=cfg.attn_dropout,
                drop_path=p,
            )
            for i, p in enumerate(drop_paths)
        )
        self.merge = PatchMerging(dim) if stage < cfg.num_stages - 1 else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, L, _ = x.shape
        pad = (-L) % self.multiple
        if pad:  # masked padding at the end for the merge: merge groups of the real tokens stay where they are
            x = F.pad(x, (0, 0, 0, pad))  # (B, L + pad, C)
            mask = torch.ones(B, L, dtype=torch.bool, device=x.device) if mask is None else mask
            mask = F.pad(mask, (0, pad), value=False)  # (B, L + pad)
        for block in self.blocks:
            x = block(x, mask)  # (B, Ls, C)
        if self.merge is not None:
            x, mask = self.merge(x, mask)  # (B, Ls/4, 2C)
        return x, mask


class HSW(NumParamsMixin, nn.Module):
    """Text classifier: ``model(input_ids (B, L), attention_mask (B, L) bool | None) -> logits (B, num_classes)``.

    ``attention_mask`` True = real token; PAD is masked in every window, merge and the pooling.
    """

    def __init__(self, cfg: HSWConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.embed_dim)
        self.patch_embed = nn.Linear(cfg.embed_dim, cfg.d_model)
        self.emb_drop = Dropout(cfg.dropout)
        rates = torch.linspace(0, cfg.drop_path, sum(cfg.depths)).tolist()  # stochastic depth per block
        starts = [sum(cfg.depths[:s]) for s in range(cfg.num_stages)]
        self.stages = nn.ModuleList(
            HSWStage(cfg, s, rates[starts[s] : starts[s] + cfg.depths[s]]) for s in range(cfg.num_stages)
        )
        self.norm = nn.LayerNorm(cfg.stage_dims[-1])
        self.head = nn.Linear(cfg.stage_dims[-1], cfg.num_classes)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # Swin / the authors: truncated-normal (std 0.02) Linear weights, zero biases; LayerNorm (1, 0). The
        # embedding keeps PyTorch's N(0, 1) (the authors' was pretrained); the relative-position tables are
        # initialised in ShiftedWindowAttention (truncated normal, 0.02).
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = None if attention_mask is None else attention_mask.to(torch.bool)  # (B, L) True = real
        x = self.emb_drop(self.patch_embed(self.tok_emb(input_ids)))  # (B, L, C)
        if mask is not None:
            x = x.masked_fill(~mask[..., None], 0.0)  # PAD positions carry nothing, whatever their ids
        for stage in self.stages:
            x, mask = stage(x, mask)  # (B, L / 4^s, C * 2^s)
        return self.head(masked_mean(self.norm(x), mask))  # (B, num_classes)


# ---- registered variants ----------------------------------------------------------------------------------


@register_model(tags=("hsw", "hierarchical", "efficient_attention"))
def hsw_base(**overrides) -> HSW:
    """The paper's sizes: C=96 (widths 96/192/384/768), depths 2/2/6/2, heads 3/6/12/24, W=128, L=4096,
    byte vocabulary, 11 classes (27,807,521 parameters)."""
    return HSW(build_config(HSWConfig, {}, overrides))


@register_model(tags=("hsw", "hierarchical", "efficient_attention"))
def hsw_small(**overrides) -> HSW:
    """For CPU budgets: C=64 (widths 64/128/256/512), depths 1/1/2/1, heads 2/4/8/16 (head width 32), W=128,
    L=4096, a 64-wide embedding (the 768-wide one only mirrors the authors' frozen table); 5,708,965 parameters."""
    return HSW(
        build_config(HSWConfig, dict(d_model=64, depths=(1, 1, 2, 1), heads=(2, 4, 8, 16), embed_dim=64), overrides)
    )
