"""Full-attention transformer baseline (Vaswani et al., 2017), pre-LN, sized like SwarmFormer-Small.

``attn_impl="sdpa"`` runs ``F.scaled_dot_product_attention`` (a fused kernel: no (L, L) matrix kept, but
O(L^2) time); ``attn_impl="dense"`` materializes softmax(QK^T) explicitly, the textbook O(L^2)-memory
path and the oracle for the SDPA path.

Parameters of ``transformer`` (D=128, 2 layers, H=4, r=4, L=256, learned positions): 4,336,642.
"""
from __future__ import annotations

from dataclasses import dataclass

from models.encoder import EncoderClassifier, EncoderConfig, build_config
from models.layers import PatternSelfAttention
from models.registry import register_model


@dataclass
class TransformerConfig(EncoderConfig):
    attn_impl: str = "sdpa"  # "sdpa" (fused kernel) or "dense" (explicit (B, H, L, L) scores; memory reference)

    def __post_init__(self):
        super().__post_init__()
        if self.attn_impl not in ("sdpa", "dense"):
            raise ValueError(f"attn_impl must be 'sdpa' or 'dense', got {self.attn_impl!r}")


class Transformer(EncoderClassifier):
    def __init__(self, cfg: TransformerConfig):
        super().__init__(cfg, lambda c: PatternSelfAttention(
            c.d_model, num_heads=c.num_heads, pattern="full", dropout=c.attention_dropout, impl=c.attn_impl))


@register_model(tags=("baseline", "full_attention"))
def transformer(**overrides) -> Transformer:
    """Full attention, D=128, 2 layers, 4 heads, L=256 (4,336,642 parameters)."""
    return Transformer(build_config(TransformerConfig, {}, overrides))
