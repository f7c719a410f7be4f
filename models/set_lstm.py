"""Bidirectional LSTM over a set read as a sequence: the order-dependent baseline of paper 003 (§4.1.2).

Two ways to pick the order of the real entities before the LSTM (outputs are put back in the input order):

  * ``lstm`` (``order="shuffle"``): in ``model.train()`` every forward draws a fresh random order per set from
    torch's RNG ("we had the entities explicitly shuffled randomly to avoid that the model learns from any
    spurious ordering"); in eval the given order is kept. Not permutation-equivariant (Fig. 3 of the paper
    measures how much its loss varies with the order).
  * ``lstm_sorted`` (``order="sorted"``): entities sorted lexicographically by their coordinates, first, then
    second, ... (stable), in train and eval. Equivariant whenever the points are distinct. The authors' code
    (``LSTMS`` in zalandoresearch/SWARM ``models.py``) sorts by the first coordinate only and also sorts the
    zero padding in among the points; here padding never enters the LSTM.

Padding: the real entities of each set are gathered to the front in the chosen order and packed with
``pack_padded_sequence``, so padded entities never reach the LSTM state of real ones; padded output rows are 0.

Defaults: Table 2's best codes, LSTM (128-3) and LSTM (sorted) (64-3), code (a-d) = hidden units - layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from models.layers.params import NumParamsMixin
from models.layers.set_blocks import check_set_inputs
from models.registry import build_config, register_model
from swarmlab.settings import check_config, setting

ORDERS = ("shuffle", "sorted")


def entity_order(x: torch.Tensor, mask: torch.Tensor, order: str, shuffle: bool) -> torch.Tensor:
    """Per set, the entity indices with the real ones first, in the order the LSTM should read them.

    Args:
        x: (B, N, D) entities.
        mask: (B, N) bool, True = real.
        order: "sorted" = lexicographic by coordinates 0, 1, ..., D-1 (stable: exact ties keep input order);
            "shuffle" = random order if ``shuffle`` else the input order.
        shuffle: draw a random order (torch's global RNG) for ``order="shuffle"``.
    Returns:
        perm (B, N) long: ``x.gather(1, perm)`` has each set's real entities in reading order, then padding.
    """
    B, N, D = x.shape
    perm = torch.arange(N, device=x.device).expand(B, N)  # (B, N)
    if order == "sorted":
        # Lexicographic sort = stable sorts by the least significant key first (radix style).
        for d in reversed(range(D)):
            key = x[..., d].gather(1, perm)  # (B, N): coordinate d in the current order
            perm = perm.gather(1, torch.sort(key, dim=1, stable=True).indices)
    elif shuffle:
        perm = torch.rand(B, N, device=x.device).argsort(dim=1)  # (B, N): a uniform random order per set
    # Real entities first, keeping the order chosen above among them (stable sort on "is padding").
    pad = (~mask).gather(1, perm).to(torch.int8)  # (B, N)
    return perm.gather(1, torch.sort(pad, dim=1, stable=True).indices)  # (B, N)


@dataclass
class SetLSTMConfig:
    dim_input: int = setting(2, ge=1)  # points in R^2 (paper 003 §4.1.1)
    dim_output: int = setting(10, ge=1)  # S = 10 cluster slots (the authors' n_out = 10)
    dim_hidden: int = setting(128, ge=1)  # per direction: Table 2 best LSTM (128-3); lstm_sorted uses 64 (64-3)
    num_layers: int = setting(3, ge=1)  # stacked bidirectional layers: Table 2 (128-3) and (64-3)
    # "shuffle" (random order per training step) or "sorted"; set by the variant
    order: str = setting("shuffle", choices=ORDERS)
    # nn.LSTM's dropout between layers; the paper trains with "no dropout" (§4.1.3)
    dropout: float = setting(0.0, ge=0, lt=1)

    def __post_init__(self):
        check_config(self)


class SetLSTM(NumParamsMixin, nn.Module):
    """``model(x (B, N, dim_input), mask (B, N) bool | None) -> (B, N, dim_output)``.

    bi-LSTM(dim_hidden per direction, num_layers) -> Linear(2 * dim_hidden, dim_output), per entity.
    """

    def __init__(self, cfg: SetLSTMConfig):
        super().__init__()
        self.cfg = cfg
        self.lstm = nn.LSTM(
            cfg.dim_input,
            cfg.dim_hidden,
            cfg.num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=cfg.dropout if cfg.num_layers > 1 else 0.0,
        )
        self.out = nn.Linear(2 * cfg.dim_hidden, cfg.dim_output)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = check_set_inputs(x, mask, self.cfg.dim_input, type(self).__name__)
        B, N, _ = x.shape
        if mask is None:
            mask = torch.ones(B, N, dtype=torch.bool, device=x.device)
        perm = entity_order(x, mask, self.cfg.order, shuffle=self.training)  # (B, N)
        xs = x.gather(1, perm[..., None].expand_as(x))  # (B, N, dim_input): real entities first
        # An all-padded set is run on one padded entity (packing needs length >= 1); its output is zeroed.
        lengths = mask.sum(dim=1).clamp(min=1).cpu()  # (B,)
        packed = pack_padded_sequence(xs, lengths, batch_first=True, enforce_sorted=False)
        hs, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=N)  # (B, N, 2*dim_hidden)
        ys = self.out(hs)  # (B, N, dim_output), in reading order
        inverse = perm.argsort(dim=1)  # (B, N): where each input entity sits in reading order
        y = ys.gather(1, inverse[..., None].expand_as(ys))  # (B, N, dim_output): back in input order
        return y.masked_fill(~mask[..., None], 0.0)


@register_model(kind="set", tags=("baseline",))
def lstm(**overrides) -> SetLSTM:
    """LSTM (128-3): bidirectional, 3 layers of 128 units per direction; entities shuffled in training."""
    return SetLSTM(build_config(SetLSTMConfig, {"order": "shuffle"}, overrides))


@register_model(kind="set", tags=("permutation_equivariant", "baseline"))
def lstm_sorted(**overrides) -> SetLSTM:
    """LSTM (sorted) (64-3): bidirectional, 3 layers of 64 units; entities sorted by x, then y."""
    return SetLSTM(build_config(SetLSTMConfig, {"order": "sorted", "dim_hidden": 64}, overrides))
