"""Reusable blocks shared by architectures (attention, masks, windows, clustering, set blocks)."""
from models.layers.gates import GateNet

__all__ = ["GateNet"]
