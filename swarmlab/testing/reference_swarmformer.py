"""The authors' SwarmFormer module layout, written down from the issue's specification with their key
names (nn.Sequential indices and all): the oracle that models.swarmformer must reproduce exactly."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d)

    def forward(self, x):
        return self.embed(x)


class LocalSwarmAggregator(nn.Module):
    def __init__(self, d, p):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Dropout(p), nn.Linear(d, d))
        self.gate_net = nn.Sequential(nn.Linear(2 * d, d), nn.GELU(), nn.Linear(d, d))
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        x = self.dropout(x)
        n = (torch.roll(x, shifts=1, dims=1) + x + torch.roll(x, shifts=-1, dims=1)) / 3.0
        u = self.dropout(self.mlp(n))
        g = torch.sigmoid(self.gate_net(torch.cat([x, u], dim=-1)))
        return x + g * (u - x)


class GlobalClusterAttention(nn.Module):
    def __init__(self, d, p):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.dropout = nn.Dropout(p)
        self.d = d

    def forward(self, r):
        q, k, v = self.query(r), self.key(r), self.value(r)
        a = F.softmax(torch.matmul(q, k.transpose(-2, -1)) / self.d**0.5, dim=-1)
        return self.dropout(torch.matmul(self.dropout(a), v))


class BroadcastUpdater(nn.Module):
    def __init__(self, d, p):
        super().__init__()
        self.linear = nn.Linear(d, d)
        self.gate_net = nn.Sequential(nn.Linear(2 * d, d), nn.GELU(), nn.Linear(d, d))
        self.dropout = nn.Dropout(p)

    def forward(self, x, r):
        s = x.shape[1] // r.shape[1]
        u = self.dropout(self.linear(r)).repeat_interleave(s, dim=1)
        g = torch.sigmoid(self.gate_net(torch.cat([x, u], dim=-1)))
        return x + g * u


class SwarmLayer(nn.Module):
    def __init__(self, d, cluster_size, t_local, p):
        super().__init__()
        self.local_agg = LocalSwarmAggregator(d, p)
        self.global_attn = GlobalClusterAttention(d, p)
        self.broadcast = BroadcastUpdater(d, p)
        self.cluster_size, self.t_local = cluster_size, t_local

    def forward(self, x):
        for _ in range(self.t_local):
            x = self.local_agg(x)
        b, n, d = x.shape
        r = x.view(b, n // self.cluster_size, self.cluster_size, d).mean(dim=2)
        return self.broadcast(x, self.global_attn(r))


class AuthorsSwarmFormer(nn.Module):
    def __init__(self, vocab_size, d, num_layers, t_local, cluster_size, p, num_classes=2):
        super().__init__()
        self.embedding = TokenEmbedding(vocab_size, d)
        self.dropout_embedding = nn.Dropout(p)
        self.layers = nn.ModuleList(SwarmLayer(d, cluster_size, t_local, p) for _ in range(num_layers))
        self.dropout_final = nn.Dropout(p)
        self.classifier = nn.Linear(d, num_classes)

    def forward(self, ids):
        x = self.dropout_embedding(self.embedding(ids))
        for layer in self.layers:
            x = layer(x)
        return self.classifier(self.dropout_final(x.mean(dim=1)))
