"""How much of the MNIST test bits/dim comes from pixel values that never occur in the approximate training images.

Run after run.sh (it reads that run's data and best checkpoint):
    SWARMLAB_WORKDIR=/tmp/image_cpu python reports/side/image_cpu/unseen_values.py
"""
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import models  # noqa: E402

torch.set_num_threads(1)
root = Path(os.environ.get("SWARMLAB_WORKDIR", "/tmp/image_cpu"))
meta = json.loads((root / "data" / "mnist" / "meta.json").read_text())
unseen = torch.tensor(meta["test_values_unseen_in_train"])
model = models.create_model("swarm_transformer_small", image_size=(1, 28, 28), num_classes=10, dim=32, dim_hidden=32,
                            n_iter=3)  # the cpu profile's model
ckpt = root / "outputs" / "train" / "mnist" / "swarm_transformer_small" / "best.pt"
model.load_state_dict(torch.load(ckpt, weights_only=True))
model.eval()
with np.load(root / "data" / "mnist" / "test.npz") as f:
    x, y = torch.from_numpy(f["images"][:2000]).long(), torch.from_numpy(f["labels"][:2000]).long()
bits, mask = [], []
with torch.no_grad():
    for i in range(0, len(x), 250):
        logits = model(x[i:i + 250], y[i:i + 250])  # (B, 256, 1, 28, 28)
        b = F.cross_entropy(logits, x[i:i + 250], reduction="none") / math.log(2)  # (B, 1, 28, 28) bits per sub-pixel
        bits.append(b.flatten())
        mask.append(torch.isin(x[i:i + 250], unseen).flatten())
bits, mask = torch.cat(bits), torch.cat(mask)
print(f"first 2000 test images: {bits.mean():.4f} bits/dim; pixels with a value unseen in train: {mask.float().mean():.4%}, "
      f"{bits[mask].mean():.2f} bits each on average (others {bits[~mask].mean():.3f}); their contribution "
      f"{(bits * mask).sum() / bits.numel():.4f} bits/dim")
