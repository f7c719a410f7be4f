"""The authors' SWARM layer (zalandoresearch/SWARM, swarmlayer.py), transcribed from its structure for 1-D
entity layouts: the oracle that models.swarm must reproduce, and the "authors' layer" row of
benchmarks/set_speed.py.

Kept as they have it, on purpose (these are what make it slow, and what makes it a faithful oracle):
  * channels-first tensors (B, D, N); with ``channel_first=False`` the layer transposes in and out;
  * every weight is a Conv1d with a kernel of size 1 (weights (out, in, 1));
  * the pooled vector is expanded back to all N entities and THEN multiplied by Whp (N copies of the
    same product);
  * masked mean = sum(h * mask) / sum(mask) (a set with no real entity divides by zero);
  * 'CAUSAL' pooling divides the cumulative sum by the position (1, 2, 3, ...) and ignores the mask;
  * the first iteration uses only Wih(x) (h = c = 0); with ``cache=True`` Wih(x) is computed once;
  * dropout is Dropout2d on h (B, H, N): whole hidden units of one set, after every iteration;
  * output = ffwd(cat[h, c]) along the channel dimension; gates are split in the order i, f, o, g.

Key names are theirs: ``cell.Wih``, ``cell.Whh``, ``cell.Whp``, ``ffwd``; stacked layers sit in
``mods`` of a MaskedSequential with a parameter-free non-linearity at the odd indices.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class SwarmConvLSTMCell(nn.Module):
    def __init__(self, n_in, n_out, pooling="MEAN", cache=True):
        super().__init__()
        assert pooling in ("MEAN", "CAUSAL")
        self.n_in, self.n_out = n_in, n_out
        self.pooling, self.cache = pooling, cache
        self.Wih = nn.Conv1d(n_in, 4 * n_out, 1, bias=True)
        self.Whh = nn.Conv1d(n_out, 4 * n_out, 1, bias=False)
        self.Whp = nn.Conv1d(n_out, 4 * n_out, 1, bias=False)
        self.x_cache = None

    def pool_function(self, h, mask):
        # h: (B, H, N) -> a (B, H, N) tensor whose every column is the population summary of that entity
        B, H, N = h.shape
        if self.pooling == "CAUSAL":
            steps = torch.arange(N, device=h.device).float() + 1.0  # (N,)
            return torch.cumsum(h, dim=2) / steps.view(1, 1, N)
        if mask is None:
            return h.mean(dim=2, keepdim=True).expand(B, H, N)
        m = mask.view(B, 1, N).float()
        total = (h * m).sum(dim=2, keepdim=True).expand(B, H, N)
        return total / m.sum(dim=2, keepdim=True).expand(B, H, N)

    def forward(self, x, mask=None, hc=None):
        # x: (B, n_in, N); returns h, c of shape (B, H, N)
        B, _, N = x.shape
        if hc is None:
            c = x.new_zeros(B, self.n_out, N)
            z = self.Wih(x)  # (B, 4H, N)
            self.x_cache = z
        else:
            h, c = hc
            pooled = self.Whp(self.pool_function(h, mask))  # (B, 4H, N): Whp applied to N copies
            wx = self.x_cache if self.cache else self.Wih(x)
            z = wx + self.Whh(h) + pooled
        z = z.view(B, 4, self.n_out, N)
        i, f, o, g = torch.sigmoid(z[:, 0]), torch.sigmoid(z[:, 1]), torch.sigmoid(z[:, 2]), torch.tanh(z[:, 3])
        c = c * f + g * i
        h = o * torch.tanh(c)
        return h, c


class SwarmLayer(nn.Module):
    def __init__(self, n_in, n_out, n_hidden, n_iter, dropout=0.0, pooling="MEAN", channel_first=True, cache=True):
        super().__init__()
        self.n_iter = n_iter
        self.cell = SwarmConvLSTMCell(n_in, n_hidden, pooling=pooling, cache=cache)
        self.ffwd = nn.Conv1d(2 * n_hidden, n_out, 1, bias=True)
        self.drop = nn.Dropout2d(dropout) if dropout > 0 else None
        self.channel_first = channel_first

    def forward(self, x, mask=None):
        if not self.channel_first:
            x = x.transpose(1, 2)  # (B, N, D) -> (B, D, N)
        hc = None
        for _ in range(self.n_iter):
            hc = self.cell(x, mask, hc)
            if self.drop is not None:
                hc = (self.drop(hc[0]), hc[1])
        y = self.ffwd(torch.cat(hc, dim=1))  # (B, n_out, N)
        return y if self.channel_first else y.transpose(1, 2)


class MaskedSequential(nn.Module):
    """Their container for stacked layers: modules that take a mask get it, non-linearities do not."""

    def __init__(self, *mods):
        super().__init__()
        self.mods = nn.ModuleList(mods)

    def forward(self, x, mask=None):
        for m in self.mods:
            x = m(x, mask) if isinstance(m, SwarmLayer) else m(x)
        return x


def authors_swarm(n_in, n_out, n_hidden, n_iter, n_layers=1, dropout=0.0, pooling="MEAN", cache=True):
    """What their models.create_model builds for ``-type Swarm`` (channels last, ReLU between layers)."""
    kw = dict(n_hidden=n_hidden, n_iter=n_iter, dropout=dropout, pooling=pooling, channel_first=False, cache=cache)
    if n_layers == 1:
        return SwarmLayer(n_in, n_out, **kw)
    mods, last = [], n_in
    for _ in range(n_layers - 1):
        mods += [SwarmLayer(last, n_hidden, **kw), nn.ReLU()]
        last = n_hidden
    mods.append(SwarmLayer(last, n_out, **kw))
    return MaskedSequential(*mods)
