"""Sparse Transformer baseline (Child et al., 2019), 'fixed' pattern, bidirectional.

Positions are cut into blocks of ``block`` = l; the last ``summary`` = c positions of each block are its
summary. Query i attends to every key of its own block and to every summary key of every block
(``j // l == i // l or j mod l >= l - c``). Computed as block-local attention joined with attention to
the gathered summary keys inside one softmax (see ``models.layers.attention_patterns.fixed_sparse_attention``):
memory O(L * l) plus a fixed chunk of scores, time O(L * (l + c * L / l)). With l = 32, c = 4 the
second term is L/8 keys per query: 8x fewer than full attention, still quadratic for very long inputs
(Child et al. take l ~ sqrt(L)).

Parameters of ``sparse_transformer`` (D=128, 2 layers, H=4, r=4, L=256, learned positions): 4,336,642.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.encoder import EncoderClassifier, EncoderConfig
from models.layers import PatternSelfAttention
from models.registry import build_config, register_model
from swarmlab.settings import setting


@dataclass
class SparseTransformerConfig(EncoderConfig):
    block: int = setting(32, ge=1)  # l: block length; 256-token inputs have 8 blocks
    summary: int = setting(4, ge=1)  # c: summary positions per block (the paper uses c in {8, 16, 32} with l = 128)

    def __post_init__(self):
        super().__post_init__()
        if self.summary > self.block:
            raise ValueError(f"summary={self.summary} must be <= block={self.block}")


class SparseTransformer(EncoderClassifier):
    def __init__(self, cfg: SparseTransformerConfig):
        super().__init__(
            cfg,
            lambda c: PatternSelfAttention(
                c.d_model,
                num_heads=c.num_heads,
                pattern="fixed_sparse",
                dropout=c.attention_dropout,
                block=c.block,
                summary=c.summary,
            ),
        )


@register_model(tags=("baseline", "efficient_attention"))
def sparse_transformer(**overrides) -> SparseTransformer:
    """Fixed pattern l=32, c=4, D=128, 2 layers, 4 heads, L=256 (4,336,642 parameters)."""
    return SparseTransformer(build_config(SparseTransformerConfig, {}, overrides))
