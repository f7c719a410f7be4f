"""The encoder classifier shared by the attention baselines; each baseline file only picks the attention.

``tokens -> embedding (+ positions) -> num_layers pre-LN blocks -> LayerNorm -> mean over real tokens
-> Linear``. Parameters (learned positions, mlp_ratio r):
``V*D + L*D + layers*((4 + 2r)*D^2 + (9 + r)*D) + 2*D + D*K + K`` (sinusoidal: no ``L*D`` term).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn

from models.layers import PreLNBlock, masked_mean, sinusoidal_positions
from models.layers.drop import Dropout
from models.layers.params import NumParamsMixin
from swarmlab.settings import check_config, setting


@dataclass
class EncoderConfig:
    vocab_size: int = setting(30522, ge=1)  # bert-base-uncased WordPiece, the tokenizer every IMDB model shares
    num_classes: int = setting(2, ge=1)  # IMDB: negative / positive
    seq_len: int = setting(256, ge=1)  # longest input L; rows of the learned position table (as SwarmFormer-Small)
    d_model: int = setting(128, ge=1)  # width D, equal to SwarmFormer-Small so comparisons are at equal width
    num_layers: int = setting(2, ge=1)  # depth, equal to SwarmFormer-Small
    num_heads: int = setting(4, ge=1)  # H; head width Dh = D / H = 32
    mlp_ratio: int = setting(4, ge=1)  # FFN inner width r*D, the usual transformer ratio
    # on attention probabilities, residual branches, FFN, embeddings and head input
    dropout: float = setting(0.1, ge=0, lt=1)
    # on the attention probabilities when set (None = `dropout`); 0 keeps SDPA's flash kernel on CPU (memory linear
    # in L): dropout there forces the math path, which keeps (B, H, L, L) probabilities, ~2 GB per layer at 16 x 4096
    attn_dropout: float | None = setting(None, ge=0, lt=1)
    # "learned" (seq_len x D table) or "sinusoidal" (fixed, any length, no parameters)
    pos_emb: str = setting("learned", choices=("learned", "sinusoidal"))

    def __post_init__(self):
        check_config(self)
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")

    @property
    def attention_dropout(self) -> float:
        """Dropout on the attention probabilities: ``attn_dropout``, or ``dropout`` when that is None."""
        return self.dropout if self.attn_dropout is None else self.attn_dropout


class EncoderClassifier(NumParamsMixin, nn.Module):
    """Text classifier: ``model(input_ids (B, L), attention_mask (B, L) | None) -> logits (B, num_classes)``.

    ``attention_mask`` (True / 1 = real token) removes padded keys from every attention and from the
    mean pooling, so appending padding does not change the logits.
    """

    def __init__(self, cfg: EncoderConfig, make_attention: Callable[[EncoderConfig], nn.Module]):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model) if cfg.pos_emb == "learned" else None
        self.emb_drop = Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(
            PreLNBlock(cfg.d_model, make_attention(cfg), mlp_ratio=cfg.mlp_ratio, dropout=cfg.dropout)
            for _ in range(cfg.num_layers)
        )
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head_drop = Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, cfg.num_classes)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # BERT / GPT-2 style: N(0, 0.02) weights, zero biases; LayerNorm keeps (1, 0).
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L = input_ids.shape
        key_mask = attention_mask.bool() if attention_mask is not None else None  # (B, L)
        x = self.tok_emb(input_ids)  # (B, L, D)
        if self.pos_emb is not None:
            if L > self.cfg.seq_len:
                raise ValueError(
                    f"input length {L} exceeds seq_len={self.cfg.seq_len} (learned positions): "
                    f"build the model with seq_len >= {L} or pos_emb='sinusoidal'"
                )
            x = x + self.pos_emb.weight[:L]  # (B, L, D)
        else:
            x = x + sinusoidal_positions(L, self.cfg.d_model, device=x.device, dtype=x.dtype)
        x = self.emb_drop(x)
        for block in self.blocks:
            x = block(x, key_mask)  # (B, L, D)
        pooled = masked_mean(self.ln_f(x), key_mask)  # (B, D)
        return self.head(self.head_drop(pooled))  # (B, num_classes)

    @staticmethod
    def expected_num_params(cfg: EncoderConfig) -> int:
        d, r, k = cfg.d_model, cfg.mlp_ratio, cfg.num_classes
        positions = cfg.seq_len * d if cfg.pos_emb == "learned" else 0
        per_layer = (4 + 2 * r) * d * d + (9 + r) * d  # qkv + proj, two FFN linears, two LayerNorms
        return cfg.vocab_size * d + positions + cfg.num_layers * per_layer + 2 * d + d * k + k
