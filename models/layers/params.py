"""``get_num_params()`` for every registered model, written once."""

from __future__ import annotations

import torch.nn as nn


class NumParamsMixin:
    """Gives a model ``get_num_params()``: the number of its parameters (trainable or not, shared ones once).

    What train, evaluate and the sweeps log as ``num_params``. Mix it in before ``nn.Module``
    (``class Model(NumParamsMixin, nn.Module)``); it adds no parameter, buffer or ``__init__``, so state
    dicts and initial weights are those of the model without it.
    """

    def get_num_params(self: nn.Module) -> int:
        return sum(p.numel() for p in self.parameters())
