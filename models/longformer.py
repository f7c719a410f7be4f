"""Longformer baseline (Beltagy et al., 2020): sliding-window attention plus global attention on token 0.

Each token attends to the ``window_one_sided`` = w tokens on each side (2w+1 keys); with
``global_first`` the first token attends to every token and every token attends to it (the [CLS]
pattern of the paper's classification setup). Memory and time O(L * w) (chunked, see
``models.layers.attention_patterns.sliding_chunks_attention``). One set of projections serves the local and the
global attention (the paper adds a second set Qg, Kg, Vg for global attention; left out so that every
baseline has the same parameter count at equal width and depth).

Parameters of ``longformer`` (D=128, 2 layers, H=4, r=4, L=256, learned positions): 4,336,642.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.encoder import EncoderClassifier, EncoderConfig
from models.layers import PatternSelfAttention
from models.registry import build_config, register_model
from swarmlab.settings import setting


@dataclass
class LongformerConfig(EncoderConfig):
    window_one_sided: int = setting(32, ge=1)  # w: keys i-w..i+w (65 of them), a quarter of a 256-token review
    global_first: bool = True  # token 0 attends to all and all attend to it


class Longformer(EncoderClassifier):
    def __init__(self, cfg: LongformerConfig):
        super().__init__(
            cfg,
            lambda c: PatternSelfAttention(
                c.d_model,
                num_heads=c.num_heads,
                pattern="sliding_chunks",
                dropout=c.attention_dropout,
                window_one_sided=c.window_one_sided,
                global_first=c.global_first,
            ),
        )


@register_model(tags=("baseline", "efficient_attention"))
def longformer(**overrides) -> Longformer:
    """Sliding window w=32 (one-sided) + global first token, D=128, 2 layers, 4 heads, L=256 (4,336,642 parameters)."""
    return Longformer(build_config(LongformerConfig, {}, overrides))
