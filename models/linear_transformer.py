"""Linear Transformer baseline (Katharopoulos et al., 2020): non-causal kernelized attention.

softmax(q k^T) is replaced by phi(q) phi(k)^T with phi(x) = elu(x) + 1, so attention is computed as
phi(Q) (phi(K)^T V) in O(L * Dh^2) time and memory; padded keys get phi(k) = 0. There is no attention
matrix, hence no attention dropout (dropout still acts on residual branches, FFN, embeddings, head).

Parameters of ``linear_transformer`` (D=128, 2 layers, H=4, r=4, L=256, learned positions): 4,336,642.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.encoder import EncoderClassifier, EncoderConfig
from models.layers import PatternSelfAttention
from models.registry import build_config, register_model
from swarmlab.settings import setting


@dataclass
class LinearTransformerConfig(EncoderConfig):
    eps: float = setting(1e-6, gt=0)  # added to the normaliser phi(q)^T sum_j phi(k_j)


class LinearTransformer(EncoderClassifier):
    def __init__(self, cfg: LinearTransformerConfig):
        super().__init__(
            cfg, lambda c: PatternSelfAttention(c.d_model, num_heads=c.num_heads, pattern="linear", eps=c.eps)
        )


@register_model(tags=("baseline", "efficient_attention"))
def linear_transformer(**overrides) -> LinearTransformer:
    """elu+1 linear attention, D=128, 2 layers, 4 heads, L=256 (4,336,642 parameters)."""
    return LinearTransformer(build_config(LinearTransformerConfig, {}, overrides))
