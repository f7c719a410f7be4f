"""SWARM Transformer (Vollgraf, 2019, paper 003 §4.3): an autoregressive 256-way pixel model whose only
mixing layer is a causal SWARM layer (models/swarm.py with ``pooling="causal"``).

    pixels (B, C, H, W) -> sub-pixel sequence (B, L), L = H*W*C, in raster order over (H, W) with the C
    channels of a pixel one after the other: position l = (h * W + w) * C + c
    -> input (B, L, D) = E_in[pixel_{l-1}] (shifted right: position 0 gets zeros, as the authors' code)
                         + P[h, w] (fixed 2-D sinusoids) + E_ch[c] (C > 1 only) + E_cls[label] (if labels)
    -> Swarm(pooling="causal") -> (B, L, 256) -> logits (B, 256, C, H, W)

So the logits at sub-pixel l see only sub-pixels < l (the causal pool is an inclusive cumulative mean, but
position l's own input carries pixel l - 1). Where §4.3 is vague, the authors' swarm_transformer.py and
README decide:
  * widths: §4.3 names 256-dim positional features and embeddings; their script ties the embedding width
    to the hidden width (n_in = n_hidden), and the README trains MNIST / Fashion-MNIST with
    ``-n_layers 1 -n_hidden 256 -n_iter 10``: the ``swarm_transformer_base`` defaults;
  * the fixed position features are theirs (``tools.create_location_features_2d``), not Vaswani's:
    dim/4 frequencies f log-spaced from 1 to max(H, W)/2, and per frequency
    [sin(2 pi f x / W), sin(2 pi f y / W), cos(2 pi f x / W), cos(2 pi f y / W)] at pixel (y, x) (both
    axes divided by W, as theirs). That is why models.layers.sinusoidal_positions (1-D, 1/10000^(2k/D)
    frequencies) is not reused;
  * embeddings are summed, not concatenated (§4.3); input and class embeddings start U(-0.1, 0.1) and the
    channel embedding at 0, as theirs; the first position's shifted input is zeros, as theirs;
  * the class term is optional here (their script asserts a label when conditional): ``labels=None`` means
    no class term, i.e. the unconditional model that shares all other weights.
Their position features are a frozen Parameter in their state dict; here they are a non-persistent buffer.

Sampling: :meth:`SwarmTransformer.sample` is incremental (see SwarmLayer.causal_step for the recurrence):
per sub-pixel and per layer it runs the T iterations of ONE position against running sums of h over the
earlier positions, so a whole image costs what one full forward costs. :meth:`sample_naive` re-runs the
full model per sub-pixel (the oracle); with the same ``torch.Generator`` both draw identical samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.params import NumParamsMixin
from models.registry import build_config, register_model
from models.swarm import Swarm, SwarmConfig
from swarmlab.settings import check_config, setting

N_VALUES = 256  # 8-bit pixel values, one categorical per sub-pixel


@dataclass
class SwarmTransformerConfig:
    image_size: tuple[int, int, int] = (1, 28, 28)  # (C, H, W): MNIST / Fashion-MNIST (§4.3)
    num_classes: int = setting(10, ge=0)  # class-conditional samples (Fig. 6); 0 = no class embedding at all
    dim: int = setting(256, ge=4)  # §4.3: 256-dim position features and input / channel embeddings; a multiple of 4
    dim_hidden: int = setting(256, ge=1)  # README MNIST / Fashion-MNIST command: -n_hidden 256 (their n_emb = n_hidden)
    n_iter: int = setting(10, ge=1)  # README MNIST / Fashion-MNIST command: -n_iter 10 (the paper does not say)
    # §4.3 / Fig. 6 "1-layer SWARM Transformer"; README -n_layers 1; ReLU between layers
    num_layers: int = setting(1, ge=1)
    dropout: float = setting(0.0, ge=0, lt=1)  # their script builds its SwarmLayers without dropout
    fast: bool = setting(True)  # models/swarm.py fused path; False = its plain reference path

    def __post_init__(self):
        self.image_size = tuple(self.image_size)
        if len(self.image_size) != 3 or any(not isinstance(s, int) or s < 1 for s in self.image_size):
            raise ValueError(f"image_size must be (C, H, W) positive ints, got {self.image_size!r}")
        check_config(self)
        if self.dim % 4:
            raise ValueError(f"dim must be a positive multiple of 4 (sin/cos x vertical/horizontal), got {self.dim!r}")

    @property
    def seq_len(self) -> int:
        C, H, W = self.image_size
        return C * H * W


def location_features_2d(H: int, W: int, dim: int) -> torch.Tensor:
    """(H, W, dim) fixed features: per frequency [sin x, sin y, cos x, cos y] (see the module docstring)."""
    n = dim // 4
    freqs = torch.logspace(0.0, math.log10(0.5 * max(H, W)), n, dtype=torch.float64)  # (n,) cycles per W pixels
    x = torch.arange(W, dtype=torch.float64)[None, :, None] / W  # (1, W, 1)
    y = torch.arange(H, dtype=torch.float64)[:, None, None] / W  # (H, 1, 1): divided by W as theirs
    ax, ay = 2 * math.pi * freqs * x, 2 * math.pi * freqs * y  # (1, W, n), (H, 1, n)
    shape = (H, W, n)
    feats = torch.stack(
        [ax.sin().expand(shape), ay.sin().expand(shape), ax.cos().expand(shape), ay.cos().expand(shape)], dim=-1
    )  # (H, W, n, 4)
    return feats.reshape(H, W, dim).float()


class SwarmTransformer(NumParamsMixin, nn.Module):
    """``forward(pixels (B, C, H, W) long in [0, 255], labels (B,) long | None) -> logits (B, 256, C, H, W)``."""

    def __init__(self, cfg: SwarmTransformerConfig):
        super().__init__()
        self.cfg = cfg
        C, H, W = cfg.image_size
        self.input_embedding = nn.Embedding(N_VALUES, cfg.dim)
        nn.init.uniform_(self.input_embedding.weight, -0.1, 0.1)
        self.class_embedding = None
        if cfg.num_classes:
            self.class_embedding = nn.Embedding(cfg.num_classes, cfg.dim)
            nn.init.uniform_(self.class_embedding.weight, -0.1, 0.1)
        self.channel_embedding = nn.Parameter(torch.zeros(C, cfg.dim)) if C > 1 else None
        self.register_buffer("positions", location_features_2d(H, W, cfg.dim), persistent=False)  # (H, W, D)
        self.body = Swarm(
            SwarmConfig(
                dim_input=cfg.dim,
                dim_output=N_VALUES,
                dim_hidden=cfg.dim_hidden,
                n_iter=cfg.n_iter,
                num_layers=cfg.num_layers,
                pooling="causal",
                dropout=cfg.dropout,
                fast=cfg.fast,
            )
        )

    # -- inputs --

    def position_terms(self) -> torch.Tensor:
        """(L, D): the 2-D position features of each sub-pixel's pixel plus its channel embedding."""
        C, H, W = self.cfg.image_size
        terms = self.positions[:, :, None, :]  # (H, W, 1, D)
        if self.channel_embedding is not None:
            terms = terms + self.channel_embedding  # (H, W, C, D)
        return terms.expand(H, W, C, self.cfg.dim).reshape(H * W * C, self.cfg.dim)

    def class_term(self, labels: torch.Tensor | None) -> torch.Tensor | None:
        """(B, D) class embedding, or None (no class term) for ``labels=None``."""
        if labels is None:
            return None
        if self.class_embedding is None:
            raise ValueError("this model has num_classes=0 (unconditional): call it with labels=None")
        return self.class_embedding(labels)

    def to_sequence(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, L) in sub-pixel order (h, w, c)."""
        if pixels.dim() != 4 or tuple(pixels.shape[1:]) != self.cfg.image_size:
            raise ValueError(
                f"pixels must be (B, {', '.join(map(str, self.cfg.image_size))}), got {tuple(pixels.shape)}"
            )
        return pixels.permute(0, 2, 3, 1).reshape(pixels.shape[0], -1)  # (B, H*W*C)

    def from_sequence(self, seq: torch.Tensor) -> torch.Tensor:
        """(B, L, ...) in sub-pixel order -> (B, ..., C, H, W)."""
        C, H, W = self.cfg.image_size
        B, extra = seq.shape[0], seq.shape[2:]
        out = seq.reshape(B, H, W, C, *extra)  # (B, H, W, C, ...)
        return out.permute(0, *range(4, 4 + len(extra)), 3, 1, 2)  # (B, ..., C, H, W)

    def embed(self, pixels: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        """(B, L, D) SWARM input: shifted-right value embeddings + position, channel and class terms."""
        tokens = self.to_sequence(pixels)  # (B, L)
        e = self.input_embedding(tokens)  # (B, L, D)
        x = F.pad(e[:, :-1], (0, 0, 1, 0))  # (B, L, D): position l holds sub-pixel l - 1; position 0 zeros
        x = x + self.position_terms()
        cls = self.class_term(labels)
        return x if cls is None else x + cls[:, None, :]

    def forward(self, pixels: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        logits = self.body(self.embed(pixels, labels))  # (B, L, 256)
        return self.from_sequence(logits)  # (B, 256, C, H, W)

    # -- sampling --

    def _incremental(self, batch: int, labels: torch.Tensor | None, choose) -> torch.Tensor:
        """Run the causal model one sub-pixel at a time; ``choose(l, logits (B, 256)) -> values (B,)`` picks the
        value of sub-pixel l (sampled, or teacher-forced). Returns the (B, L, 256) logits."""
        device, dtype = self.positions.device, self.positions.dtype
        terms = self.position_terms()  # (L, D)
        cls = self.class_term(labels)  # (B, D) or None
        states = self.body.init_causal_state(batch, device=device, dtype=dtype)
        prev = torch.zeros(batch, self.cfg.dim, device=device, dtype=dtype)  # shifted input of position 0
        out = []
        for l in range(self.cfg.seq_len):
            x = prev + terms[l] if cls is None else prev + terms[l] + cls  # (B, D)
            logits = self.body.causal_step(x, states)  # (B, 256)
            out.append(logits)
            prev = self.input_embedding(choose(l, logits))  # (B, D)
        return torch.stack(out, dim=1)  # (B, L, 256)

    @torch.no_grad()
    def incremental_logits(self, pixels: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """The forward's logits (B, 256, C, H, W) computed the incremental way (teacher-forced on ``pixels``)."""
        seq = self.to_sequence(pixels)
        with _eval_mode(self):
            return self.from_sequence(self._incremental(pixels.shape[0], labels, lambda l, _: seq[:, l]))

    @torch.no_grad()
    def sample(
        self,
        labels: torch.Tensor | None,
        *,
        generator: torch.Generator | None = None,
        temperature: float = 1.0,
        num_samples: int | None = None,
    ) -> torch.Tensor:
        """Draw images (B, C, H, W) long, sub-pixel by sub-pixel, reusing the causal state (O(L) total).

        One ``torch.multinomial(softmax(logits / temperature), 1, generator=generator)`` per sub-pixel, in
        sub-pixel order: :meth:`sample_naive` makes the same calls and so draws the same images.
        ``labels=None`` samples without a class term (give ``num_samples``). Runs in eval mode (no dropout).
        """
        B = _batch_size(labels, num_samples)
        values = []

        def choose(l, logits):
            values.append(_draw(logits, temperature, generator))
            return values[-1]

        with _eval_mode(self):
            self._incremental(B, labels, choose)
        return self.from_sequence(torch.stack(values, dim=1))  # (B, C, H, W)

    @torch.no_grad()
    def sample_naive(
        self,
        labels: torch.Tensor | None,
        *,
        generator: torch.Generator | None = None,
        temperature: float = 1.0,
        num_samples: int | None = None,
        max_positions: int | None = None,
    ) -> torch.Tensor:
        """The oracle of :meth:`sample`: one full forward per sub-pixel (O(L^2)); unsampled sub-pixels are 0.

        ``max_positions`` stops after that many sub-pixels (the rest stay 0), for timing.
        """
        B = _batch_size(labels, num_samples)
        device = self.positions.device
        seq = torch.zeros(B, self.cfg.seq_len, dtype=torch.long, device=device)  # (B, L)
        with _eval_mode(self):
            for l in range(self.cfg.seq_len if max_positions is None else max_positions):
                logits = self(self.from_sequence(seq), labels)  # (B, 256, C, H, W)
                flat = logits.permute(0, 3, 4, 2, 1).reshape(B, -1, N_VALUES)  # (B, L, 256) in sub-pixel order
                seq[:, l] = _draw(flat[:, l], temperature, generator)
        return self.from_sequence(seq)


def _draw(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    probs = torch.softmax(logits.float() / temperature, dim=-1)  # (B, 256)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (B,)


def _batch_size(labels: torch.Tensor | None, num_samples: int | None) -> int:
    if labels is not None:
        if num_samples is not None and num_samples != labels.shape[0]:
            raise ValueError(f"num_samples={num_samples} but {labels.shape[0]} labels")
        return labels.shape[0]
    if num_samples is None:
        raise ValueError("without labels, say how many images to draw with num_samples=")
    return num_samples


class _eval_mode:
    """Context: the module in eval mode (no dropout), its previous mode restored on exit."""

    def __init__(self, module: nn.Module):
        self.module, self.was_training = module, module.training

    def __enter__(self):
        self.module.eval()

    def __exit__(self, *exc):
        self.module.train(self.was_training)


@register_model(kind="image", tags=("swarm",))
def swarm_transformer_base(**overrides) -> SwarmTransformer:
    """Paper 003 §4.3 / README MNIST: embeddings 256, 1 causal SWARM layer, 256 hidden, 10 iterations."""
    return SwarmTransformer(build_config(SwarmTransformerConfig, {}, overrides))


@register_model(kind="image", tags=("swarm",))
def swarm_transformer_small(**overrides) -> SwarmTransformer:
    """CPU budget: embeddings 64, 64 hidden, 4 iterations, 1 layer (~16x fewer FLOPs per pixel)."""
    return SwarmTransformer(build_config(SwarmTransformerConfig, dict(dim=64, dim_hidden=64, n_iter=4), overrides))
