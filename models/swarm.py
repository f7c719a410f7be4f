"""SWARM mappings (Vollgraf, 2019; paper 003): a set-equivariant layer built from an LSTM-style cell that runs
``n_iter`` times over all entities at once and, at every iteration, sees a pooled summary of the population.

    x (B, N, D_in) -> SwarmLayer -> [ReLU -> SwarmLayer]* -> y (B, N, D_out)   [-> masked mean (B, D_out)]

One iteration of the cell (§3, Fig. 1; gate order i, f, o, g as in the authors' swarmlayer.py):

    z   = W_ih x + b + W_hh h + W_hp P(h)        (B, N, 4H); W_ih x + b is computed once per forward
    c   = sigmoid(z_f) * c + sigmoid(z_i) * tanh(z_g)
    h   = sigmoid(z_o) * tanh(c)                  h = c = 0 before the first iteration
    y   = W_out [h; c] + b_out                    after the last iteration

P is the population summary, one of
  * ``mean``: the masked mean over the real entities, (B, H) (the authors' 'MEAN');
  * ``max``: the masked max over the real entities, (B, H) (not in the authors' code);
  * ``causal``: the inclusive cumulative mean in entity order, p_i = sum_{j<=i} h_j / i, (B, N, H) (the
    authors' 'CAUSAL', used by the SWARM Transformer). It divides by the position i, not by a count of
    real entities, so padding is only allowed at the END of a sequence (there it cannot reach a real
    position); a mask with a real entity after a padded one is rejected.

It computes what the authors' ``SwarmLayer(n_dim=1, pooling='MEAN', cache=True)`` computes (tested against a
transcription in swarmlab/testing/reference_swarm.py through :func:`convert_reference_state_dict`), with one change of
formulation: W_hp multiplies the pooled vector (B, H) once, where their 1x1 convolution multiplies N
broadcast copies of it (the same function with N times less work). Differences that only show outside
their domain: a set with no real entity pools to 0 (theirs divides 0 by 0), and a causal mask is validated.

Dropout (optional, off in the paper's best models, §5) follows the authors: after every iteration, whole
hidden units of one set are zeroed (their ``Dropout2d`` on (B, H, N)), so it keeps the layer
permutation-equivariant even in training mode. Outputs at padded positions are computed like those of
a real entity that the pool does not see; they are not zeroed.

Initialisation: nn.Linear's default, U(+-1/sqrt(fan_in)), which is also what their kernel-1 Conv1d gets.

Two paths compute the same function (``fast`` in the config; the state dict is the same):
  * ``fast=False``: the plain equations above through autograd; the oracle of the tests.
  * ``fast=True``: ``models/layers/swarm_recurrence.py``, all iterations with a hand-written forward and backward
    (less memory traffic on a CPU; blocks of whole sets kept in cache). Same state dict.

The authors' key names map to ours with :func:`convert_reference_state_dict` (their published weights load).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.layers.params import NumParamsMixin
from models.layers.set_blocks import SetPoolingHead
from models.layers.swarm_recurrence import (
    SwarmRecurrence,
    block_info,
    effective_block_rows,
    fused_forward,
    mean_weights,
    set_blocks,
)
from models.layers.transformer import masked_mean
from models.registry import build_config, register_model
from swarmlab.settings import check_config, setting

POOLINGS = ("mean", "max", "causal")
HEADS = ("none", "mean", "pma")


@dataclass
class SwarmConfig:
    dim_input: int = setting(2, ge=1)  # §4.1: entities are points in R^2
    dim_output: int = setting(10, ge=1)  # §4.1: up to 10 clusters -> per-entity cluster logits
    dim_hidden: int = setting(192, ge=1)  # §4.1.4 / Table 2: the best model is SWARM(192-10-1): 192 memory cells, ...
    n_iter: int = setting(10, ge=1)  # ... 10 iterations ...
    # ... 1 layer ("top performing SWARM models have just one layer"); ReLU between layers
    num_layers: int = setting(1, ge=1)
    # authors' models.py builds the set models with 'MEAN'; "max"; "causal" for §4.3
    pooling: str = setting("mean", choices=POOLINGS)
    dropout: float = setting(0.0, ge=0, lt=1)  # §4.1.3 "no dropout"; §5 best models "don't require dropout"
    # Permutation-invariant output for the MoG task (§4.2): "mean" = masked mean of the per-entity outputs ->
    # (B, dim_output) (approach (i)); "pma" = the last layer outputs head_width per entity, then PMA (1 seed) and a
    # Linear to dim_output (approach (ii): "a SWARM layer of output size 128 feeds into a PMA block").
    head: str = setting("none", choices=HEADS)
    head_width: int = setting(128, ge=1)  # §4.2 (ii): the SWARM layer's output size before the PMA; unused otherwise
    head_heads: int = setting(4, ge=1)  # PMA heads (head_width must divide by it)
    fast: bool = setting(True)  # fused hand-written backward computing the same function; False = plain reference
    # fast path only: run whole sets through all iterations in blocks of about this many (B*N) rows, so that a
    # block's gates (rows x 4H floats: 3 MB at 1024 x 768) stay in cache across the ~20 elementwise passes of
    # an iteration (1.05-1.25x per train step at B=50, N=100, H=192 on one thread, 1.2-1.45x at N=550); 0 = the
    # whole batch at once (the path before issue 19). Same function: pooling never crosses sets. Used with one
    # intra-op thread only (see effective_block_rows: with 2 threads the blocks measured 0.4-0.6x).
    block_rows: int = setting(1024, ge=0)

    def __post_init__(self):
        check_config(self)
        if self.head == "pma" and self.head_width % self.head_heads:
            raise ValueError(
                f"SwarmConfig.head_width={self.head_width} must be a positive multiple of "
                f"head_heads={self.head_heads} for the PMA head"
            )


# ---- pooling ----------------------------------------------------------------------------------------------


def check_mask(mask: torch.Tensor | None, x: torch.Tensor, pooling: str) -> None:
    """Raise a ValueError that says what to change when ``mask`` does not fit ``x`` (B, N, D) or ``pooling``."""
    if mask is None:
        return
    if mask.dtype != torch.bool or mask.shape != x.shape[:2]:
        raise ValueError(
            f"mask must be a bool tensor of shape {tuple(x.shape[:2])} (True = real entity), "
            f"got {mask.dtype} {tuple(mask.shape)}"
        )
    if pooling == "causal" and bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError(
            "causal pooling divides by the position, so padding is only allowed at the end of a "
            "sequence: a mask has a real entity after a padded one"
        )


def pool_reference(h: torch.Tensor, mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """Population summary of ``h`` (B, N, H): (B, H) for mean / max, (B, N, H) for causal. Plain ops."""
    B, N, H = h.shape
    if pooling == "causal":  # the mask is ignored: padding sits after every real position (see check_mask)
        steps = torch.arange(1, N + 1, device=h.device, dtype=h.dtype)  # (N,)
        return torch.cumsum(h, dim=1) / steps[:, None]  # (B, N, H)
    if pooling == "mean":
        return masked_mean(h, mask)  # (B, H); a set with no real entity gives 0
    if mask is None:
        return h.amax(dim=1)  # (B, H)
    filled = h.masked_fill(~mask[..., None], float("-inf"))  # (B, N, H)
    return torch.where(mask.any(dim=1, keepdim=True), filled.amax(dim=1), 0.0)  # (B, H); empty set -> 0


def dropout_masks(n_iter: int, B: int, H: int, p: float, like: torch.Tensor) -> torch.Tensor:
    """(n_iter, B, 1, H) keep masks in {0, 1/(1-p)}: one per iteration, shared by all entities of a set.

    Both paths draw them with this function, in this order, so that the same seed gives the same masks.
    """
    keep = torch.rand(n_iter, B, 1, H, device=like.device, dtype=like.dtype) >= p
    return keep.to(like.dtype) / (1.0 - p)


# ---- modules ----------------------------------------------------------------------------------------------


class SwarmCell(nn.Module):
    """The SWARM LSTM cell's weights (gate rows in the order i, f, o, g) and one plain iteration.

    Args:
        dim_input: entity input width D_in.
        dim_hidden: memory cells H.
        pooling: "mean" | "max" | "causal" (see the module docstring).
    """

    def __init__(self, dim_input: int, dim_hidden: int, pooling: str):
        super().__init__()
        self.dim_hidden, self.pooling = dim_hidden, pooling
        self.w_ih = nn.Linear(dim_input, 4 * dim_hidden)  # W_ih and the gate bias b
        self.w_hh = nn.Linear(dim_hidden, 4 * dim_hidden, bias=False)
        self.w_hp = nn.Linear(dim_hidden, 4 * dim_hidden, bias=False)  # acts on the pooled vector

    def step(self, xw, h, c, mask):
        """One iteration, plain autograd: ``xw`` = W_ih x + b (B, N, 4H); h, c (B, N, H) -> new h, c."""
        p = pool_reference(h, mask, self.pooling)  # (B, H) or (B, N, H)
        pt = self.w_hp(p)  # (B, 4H) or (B, N, 4H)
        z = xw + self.w_hh(h) + (pt if pt.dim() == 3 else pt.unsqueeze(1))  # (B, N, 4H)
        zi, zf, zo, zg = z.chunk(4, dim=-1)
        c = torch.sigmoid(zf) * c + torch.sigmoid(zi) * torch.tanh(zg)
        h = torch.sigmoid(zo) * torch.tanh(c)
        return h, c


class SwarmLayer(nn.Module):
    """``n_iter`` iterations of a shared :class:`SwarmCell` over all entities, then Linear([h; c]).

    Args:
        dim_input, dim_output: entity widths in and out.
        dim_hidden: memory cells H.
        n_iter: iterations of the cell.
        pooling: "mean" | "max" | "causal".
        dropout: channel dropout on h after every iteration (training only).
        fast: use :class:`SwarmRecurrence` (same function, hand-written backward).
        block_rows: fast path: rows of (B*N) per block of whole sets (0 = all sets at once); one thread only.
    """

    def __init__(
        self,
        dim_input: int,
        dim_output: int,
        *,
        dim_hidden: int,
        n_iter: int,
        pooling: str,
        dropout: float = 0.0,
        fast: bool = True,
        block_rows: int = 1024,
    ):
        super().__init__()
        self.n_iter, self.pooling, self.dropout, self.fast = n_iter, pooling, dropout, fast
        self.block_rows = block_rows
        self.cell = SwarmCell(dim_input, dim_hidden, pooling)
        self.out = nn.Linear(2 * dim_hidden, dim_output)

    def _drop_masks(self, B: int, like: torch.Tensor) -> torch.Tensor | None:
        if not self.training or self.dropout == 0.0:
            return None
        return dropout_masks(self.n_iter, B, self.cell.dim_hidden, self.dropout, like)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        check_mask(mask, x, self.pooling)
        xw = self.cell.w_ih(x)  # (B, N, 4H): W_ih x + b, once for all iterations
        drop = self._drop_masks(x.shape[0], xw)
        hc = self._recurrence_fast(xw, mask, drop) if self.fast else self._recurrence_reference(xw, mask, drop)
        return self.out(hc)  # (B, N, D_out)

    def _recurrence_reference(self, xw, mask, drop):
        B, N, _ = xw.shape
        h = c = xw.new_zeros(B, N, self.cell.dim_hidden)  # (B, N, H)
        for t in range(self.n_iter):
            h, c = self.cell.step(xw, h, c, mask)
            if drop is not None:
                h = h * drop[t]
        return torch.cat([h, c], dim=-1)  # (B, N, 2H)

    def _recurrence_fast(self, xw, mask, drop):
        B, N, _ = xw.shape
        if self.pooling == "mean":
            info = mean_weights(mask, B, N, xw)  # (B, 1, N)
        elif self.pooling == "max":
            info = mask  # (B, N) or None
        else:
            info = 1.0 / torch.arange(1, N + 1, device=xw.device, dtype=xw.dtype)[:, None]  # (N, 1)
        # the fused kernels write into preallocated buffers of ONE dtype: under autocast (bf16 / fp16 xw) the
        # recurrence runs in fp32 (the c state accumulates over the iterations), the output Linear autocasts
        dtype = xw.dtype if xw.dtype in (torch.float32, torch.float64) else torch.float32
        w_hh, w_hp = self.cell.w_hh.weight.to(dtype), self.cell.w_hp.weight.to(dtype)
        info = info.to(dtype) if info is not None and info.is_floating_point() else info
        drop = drop.to(dtype) if drop is not None else None
        xw = xw.to(dtype).contiguous()
        rows = effective_block_rows(self.block_rows, torch.get_num_threads())
        with torch.autocast(xw.device.type, enabled=False):
            if torch.is_grad_enabled() and any(t.requires_grad for t in (xw, w_hh, w_hp)):
                return SwarmRecurrence.apply(xw, w_hh, w_hp, info, drop, self.pooling, self.n_iter, rows)
            hc = xw.new_empty((B, N, 2 * self.cell.dim_hidden))  # (B, N, 2H)
            for b0, b1 in set_blocks(B, N, rows):  # inference: one gate buffer per block, nothing kept
                b_info, b_drop = block_info(info, drop, self.pooling, b0, b1)
                fused_forward(
                    xw[b0:b1], w_hh, w_hp, b_info, b_drop, self.pooling, self.n_iter, save=False, out=hc[b0:b1]
                )
            return hc

    # -- incremental causal evaluation (used by the SWARM Transformer's sampler) --

    def init_causal_state(self, batch: int, *, device=None, dtype=torch.float32) -> dict:
        """Empty state for :meth:`causal_step`: no position seen yet."""
        return {
            "sums": torch.zeros(max(self.n_iter - 1, 0), batch, self.cell.dim_hidden, device=device, dtype=dtype),
            "count": 0,
        }

    def causal_step(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        """Output at the next position i (1-based) of a causal layer from its input ``x`` (B, D_in) alone.

        Recurrence (iterations k = 1..T, h^(0) = c^(0) = 0; S^(k) = sum over the positions j < i of
        h_j^(k), kept in ``state['sums'][k - 1]`` for k = 1..T-1):

            k = 1:  z = W_ih x_i + b
            k > 1:  S^(k-1) <- S^(k-1) + h_i^(k-1)        (the pool is inclusive: i sees itself)
                    z = W_ih x_i + b + W_hh h_i^(k-1) + W_hp S^(k-1) / i
            c_i^(k) = sigmoid(z_f) c_i^(k-1) + sigmoid(z_i) tanh(z_g);  h_i^(k) = sigmoid(z_o) tanh(c_i^(k))
            y_i = W_out [h_i^(T); c_i^(T)] + b_out

        This is the full causal forward restricted to position i: p_i^(k-1) = sum_{j<=i} h_j^(k-1) / i and
        h_j^(k-1) for j < i do not depend on position i, so the state updated here is all that position
        i + 1 needs. Cost per position: T matmuls of (B, H) x (H, 4H), independent of i. Inference only
        (no dropout). ``state`` is updated in place.
        """
        if self.pooling != "causal":
            raise ValueError(f"causal_step needs pooling='causal', this layer pools with {self.pooling!r}")
        cell = self.cell
        state["count"] += 1
        i = state["count"]
        xw = cell.w_ih(x)  # (B, 4H)
        h = c = None
        for k in range(1, self.n_iter + 1):
            if k == 1:
                z = xw
            else:
                s = state["sums"][k - 2].add_(h)  # (B, H): sum_{j<=i} h_j^(k-1)
                z = xw + cell.w_hh(h) + cell.w_hp(s / i)
            zi, zf, zo, zg = z.chunk(4, dim=-1)
            c_in = torch.sigmoid(zi) * torch.tanh(zg)
            c = c_in if c is None else torch.sigmoid(zf) * c + c_in
            h = torch.sigmoid(zo) * torch.tanh(c)
        return self.out(torch.cat([h, c], dim=-1))  # (B, D_out)


class Swarm(NumParamsMixin, nn.Module):
    """SWARM set model: ``num_layers`` SwarmLayers with a ReLU between them, optional masked-mean head.

    ``forward(x (B, N, dim_input), mask (B, N) bool | None, True = real entity)`` returns (B, N, dim_output),
    or (B, dim_output) with ``head="mean"`` or ``"pma"``.
    """

    def __init__(self, cfg: SwarmConfig):
        super().__init__()
        self.cfg = cfg
        last = cfg.head_width if cfg.head == "pma" else cfg.dim_output
        dims = [cfg.dim_input] + [cfg.dim_hidden] * (cfg.num_layers - 1) + [last]
        self.layers = nn.ModuleList(
            SwarmLayer(
                d_in,
                d_out,
                dim_hidden=cfg.dim_hidden,
                n_iter=cfg.n_iter,
                pooling=cfg.pooling,
                dropout=cfg.dropout,
                fast=cfg.fast,
                block_rows=cfg.block_rows,
            )
            for d_in, d_out in zip(dims[:-1], dims[1:])
        )
        self.head = (
            SetPoolingHead(cfg.head_width, cfg.dim_output, pooling="pma", heads=cfg.head_heads)
            if cfg.head == "pma"
            else None
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.cfg.dim_input:
            raise ValueError(f"x must be (B, N, dim_input={self.cfg.dim_input}), got {tuple(x.shape)}")
        for k, layer in enumerate(self.layers):
            x = layer(F.relu(x) if k else x, mask)  # (B, N, D)
        if self.cfg.head == "mean":
            return masked_mean(x, mask)  # (B, dim_output)
        if self.head is not None:
            return self.head(x, mask)  # (B, dim_output)
        return x

    def init_causal_state(self, batch: int, *, device=None, dtype=torch.float32) -> list[dict]:
        return [layer.init_causal_state(batch, device=device, dtype=dtype) for layer in self.layers]

    def causal_step(self, x: torch.Tensor, states: list[dict]) -> torch.Tensor:
        """Per-entity output at the next position from its input ``x`` (B, dim_input); see SwarmLayer.causal_step."""
        for k, (layer, state) in enumerate(zip(self.layers, states)):
            x = layer.causal_step(F.relu(x) if k else x, state)  # (B, D)
        return x

    @staticmethod
    def expected_num_params(cfg: SwarmConfig) -> int:
        """Per layer 4H*D_in + 4H (W_ih, b) + 2 * 4H*H (W_hh, W_hp) + 2H*D_out + D_out (output Linear); head none/mean."""
        if cfg.head == "pma":
            raise ValueError("expected_num_params counts the SWARM layers only: use get_num_params() with a PMA head")
        H = cfg.dim_hidden
        dims = [cfg.dim_input] + [H] * (cfg.num_layers - 1) + [cfg.dim_output]
        return sum(4 * H * a + 4 * H + 8 * H * H + 2 * H * b + b for a, b in zip(dims[:-1], dims[1:]))


# mean pooling (the default) keeps the layer's permutation equivariance: tests/models/test_set_models.py checks it
@register_model(kind="set", tags=("swarm", "permutation_equivariant"))
def swarm(**overrides) -> Swarm:
    """Paper 003 §4.1 best: SWARM(192-10-1), mean pooling (301,066 parameters for 2-D points, 10 outputs)."""
    return Swarm(build_config(SwarmConfig, {}, overrides))


# ---- the authors' key names <-> ours ----------------------------------------------------------------------
# Their SwarmLayer: cell.Wih (Conv1d, weight (4H, D_in, 1) + bias), cell.Whh / cell.Whp (no bias), ffwd
# (Conv1d (D_out, 2H, 1) + bias). Stacked layers live in MaskedSequential.mods.{0, 2, 4, ...} with a
# parameter-free non-linearity at the odd indices.
_LAYER_KEYS = {
    "cell.Wih.weight": "cell.w_ih.weight",
    "cell.Wih.bias": "cell.w_ih.bias",
    "cell.Whh.weight": "cell.w_hh.weight",
    "cell.Whp.weight": "cell.w_hp.weight",
    "ffwd.weight": "out.weight",
    "ffwd.bias": "out.bias",
}


def convert_reference_state_dict(sd: dict) -> dict:
    """The authors' SwarmLayer / MaskedSequential state dict -> a :class:`Swarm` state dict.

    Conv1d weights (out, in, 1) lose their kernel dimension. Unknown, missing or misshapen keys raise
    KeyError / ValueError naming the key.
    """
    by_layer: dict[int, dict] = {}
    for key, value in sd.items():
        prefix, _, rest = key.partition(".") if key.startswith("mods.") else ("", "", key)
        index = 0
        if prefix:
            pos, _, rest = rest.partition(".")
            if not pos.isdigit() or int(pos) % 2:
                raise KeyError(
                    f"convert_reference_state_dict: unexpected key {key!r}: SWARM layers sit at even "
                    f"indices of MaskedSequential.mods"
                )
            index = int(pos) // 2
        if rest not in _LAYER_KEYS:
            raise KeyError(f"convert_reference_state_dict: unexpected key {key!r}; it matches no SwarmLayer tensor")
        if rest.endswith("weight"):
            if value.dim() != 3 or value.shape[-1] != 1:
                raise ValueError(
                    f"convert_reference_state_dict: {key!r} should be a kernel-1 Conv1d weight "
                    f"(out, in, 1), got shape {tuple(value.shape)}"
                )
            value = value[..., 0]
        by_layer.setdefault(index, {})[f"layers.{index}.{_LAYER_KEYS[rest]}"] = value
    if sorted(by_layer) != list(range(len(by_layer))):
        raise KeyError(f"convert_reference_state_dict: layer indices {sorted(by_layer)} are not 0..{len(by_layer) - 1}")
    out: dict = {}
    for index, tensors in sorted(by_layer.items()):
        missing = [f"layers.{index}.{k}" for k in _LAYER_KEYS.values() if f"layers.{index}.{k}" not in tensors]
        if missing:
            raise KeyError(f"convert_reference_state_dict: missing key(s) {missing}")
        out.update(tensors)
    return out
