"""Full-attention transformer baseline (Vaswani et al., 2017), pre-LN, sized like SwarmFormer-Small.

Two paths compute the same function (``attn_impl``; the state dict is the same):
  * ``"sdpa"``: ``F.scaled_dot_product_attention``, a fused kernel (flash on CPU where one applies): O(L^2) time
    but no (L, L) matrix ever kept, so memory is linear in L;
  * ``"dense"``: softmax(Q K^T / sqrt(Dh)) V written out, the (B, H, L, L) scores and their softmax live at once:
    the textbook O(L^2)-memory path, the full-attention baseline as paper 000 Fig. 3 measures it (its 37.37 GB at
    100k tokens is about one 100k x 100k float32 matrix, 37.25 GiB), and the oracle for the SDPA path.

Registered: ``transformer`` (SDPA) and ``transformer_dense`` (the same model, scores materialised), so the memory
benchmark reports both baselines against SwarmFormer (issue 19).

Parameters of ``transformer`` (D=128, 2 layers, H=4, r=4, L=256, learned positions): 4,336,642.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.encoder import EncoderClassifier, EncoderConfig
from models.layers import PatternSelfAttention
from models.registry import build_config, register_model
from swarmlab.settings import setting

ATTN_IMPLS = ("sdpa", "dense")
FLOAT32_BYTES = 4  # scores and probabilities are float32 (the dense path soft-maxes in float32)


@dataclass
class TransformerConfig(EncoderConfig):
    # "sdpa" (fused kernel) or "dense" (explicit (B, H, L, L) scores; memory reference)
    attn_impl: str = setting("sdpa", choices=ATTN_IMPLS)


class Transformer(EncoderClassifier):
    def __init__(self, cfg: TransformerConfig):
        super().__init__(
            cfg,
            lambda c: PatternSelfAttention(
                c.d_model, num_heads=c.num_heads, pattern="full", dropout=c.attention_dropout, impl=c.attn_impl
            ),
        )

    def predicted_attention_bytes(self, batch_size: int, seq_len: int) -> int | None:
        """Bytes of the L^2-sized tensors alive at once in an inference forward; None for SDPA (it keeps none).

        Dense: one layer at a time holds its (B, H, L, L) float32 scores and their softmax, 2 * B*H*L^2 * 4 bytes
        (the next layer's are built after these are freed). Training keeps more (the probabilities of every layer).
        """
        if self.cfg.attn_impl != "dense":
            return None
        return 2 * batch_size * self.cfg.num_heads * seq_len**2 * FLOAT32_BYTES


@register_model(tags=("baseline", "full_attention"))
def transformer(**overrides) -> Transformer:
    """Full attention, D=128, 2 layers, 4 heads, L=256 (4,336,642 parameters); SDPA, no (L, L) matrix kept."""
    return Transformer(build_config(TransformerConfig, {}, overrides))


@register_model(tags=("baseline", "full_attention"))
def transformer_dense(**overrides) -> Transformer:
    """``transformer`` with the (B, H, L, L) score matrix materialised (``attn_impl="dense"``): paper 000's baseline."""
    return Transformer(build_config(TransformerConfig, {"attn_impl": "dense"}, overrides))
