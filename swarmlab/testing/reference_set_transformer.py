"""The public Set Transformer blocks (juho-lee/set_transformer, modules.py), rewritten from their structure: the
"public ISAB" rows of benchmarks/set_speed.py, beside models/set_transformer.py.

What the public MAB(Q, K) does, kept as it is (these differ from models/layers/set_blocks.py on purpose):
  * Q, K, V projections (Linear with bias) to width dim_V; no output projection mixing the heads;
  * heads are formed by splitting the width into num_heads slices and stacking them along the batch
    dimension, (B, N, D) -> (H*B, N, D/H);
  * the logits are divided by sqrt(dim_V), the FULL width, not by sqrt(D/H);
  * no key mask: every entity of K is attended (padding cannot be excluded);
  * the residual adds the PROJECTED queries: O = Q' + softmax(Q'K'^T / sqrt(dim_V)) V', heads put back
    side by side along the width; then optionally LayerNorm (ln0), O = O + relu(fc_o(O)) (a one-layer rFF
    with the ReLU on the branch), optionally LayerNorm (ln1).
ISAB(X) = MAB1(X, MAB0(I, X)) with m learned inducing points I (Xavier-uniform); the first ISAB of an encoder
takes the raw input width (no embedding layer before it).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn


class PublicMAB(nn.Module):
    def __init__(self, dim_q: int, dim_k: int, dim_v: int, num_heads: int, ln: bool = False):
        super().__init__()
        self.dim_v, self.num_heads = dim_v, num_heads
        self.fc_q, self.fc_k, self.fc_v = nn.Linear(dim_q, dim_v), nn.Linear(dim_k, dim_v), nn.Linear(dim_k, dim_v)
        self.fc_o = nn.Linear(dim_v, dim_v)
        self.ln0 = nn.LayerNorm(dim_v) if ln else None
        self.ln1 = nn.LayerNorm(dim_v) if ln else None

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        B = q.shape[0]
        qp, kp, vp = self.fc_q(q), self.fc_k(k), self.fc_v(k)  # (B, M, D), (B, N, D), (B, N, D)
        width = self.dim_v // self.num_heads

        def stack_heads(t: torch.Tensor) -> torch.Tensor:  # (B, n, D) -> (H*B, n, D/H), head-major
            return torch.cat(torch.split(t, width, dim=2), dim=0)

        qh, kh, vh = stack_heads(qp), stack_heads(kp), stack_heads(vp)
        attn = torch.softmax(torch.bmm(qh, kh.transpose(1, 2)) / math.sqrt(self.dim_v), dim=2)  # (H*B, M, N)
        out = qh + torch.bmm(attn, vh)  # (H*B, M, D/H): residual on the projected queries
        out = torch.cat(torch.split(out, B, dim=0), dim=2)  # (B, M, D): heads side by side again
        out = out if self.ln0 is None else self.ln0(out)
        out = out + torch.relu(self.fc_o(out))
        return out if self.ln1 is None else self.ln1(out)


class PublicISAB(nn.Module):
    def __init__(self, dim_in: int, dim_out: int, num_heads: int, num_inds: int, ln: bool = False):
        super().__init__()
        self.inducing = nn.Parameter(torch.empty(1, num_inds, dim_out))
        nn.init.xavier_uniform_(self.inducing)
        self.mab0 = PublicMAB(dim_out, dim_in, dim_out, num_heads, ln=ln)  # H = MAB(I, X)
        self.mab1 = PublicMAB(dim_in, dim_out, dim_out, num_heads, ln=ln)  # MAB(X, H)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.mab0(self.inducing.repeat(x.shape[0], 1, 1), x)  # (B, m, D): a copy per set, as theirs
        return self.mab1(x, h)  # (B, N, D)


class PublicISABEncoder(nn.Module):
    """``num_layers`` public ISABs (the first from the input width) and a per-entity Linear to ``dim_output``:
    the encoder part paper 003 §4.1.2 compares, called as the set models are, ``model(x, mask)`` (the mask is
    ignored: the public blocks cannot exclude padding)."""

    def __init__(
        self,
        dim_input: int,
        dim_output: int,
        dim_hidden: int = 32,
        num_heads: int = 4,
        num_inds: int = 60,
        num_layers: int = 3,
        ln: bool = True,
    ):
        super().__init__()
        widths = [dim_input] + [dim_hidden] * num_layers
        self.blocks = nn.ModuleList(
            PublicISAB(a, b, num_heads, num_inds, ln=ln) for a, b in zip(widths[:-1], widths[1:])
        )
        self.out = nn.Linear(dim_hidden, dim_output)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)  # (B, N, D)
        return self.out(x)  # (B, N, dim_output)
