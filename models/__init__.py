"""nn.Module code and the model registry. Importing this package registers every architecture.

Tags with a meaning for every model: ``ignores_mask`` = the model's output depends on padded positions
(it does not honour ``attention_mask``); the padding-invariance test skips such models explicitly.
``permutation_equivariant`` (kind "set") = permuting the real entities of a set permutes the per-entity
outputs the same way (in eval mode; for ``lstm_sorted`` when the points are distinct); tests/models/test_set_models.py
checks every model so tagged.
"""

from models import (  # noqa: F401  (baselines)  # noqa: F401  (kind="set" baselines of seed 003)
    hsw,  # noqa: F401  (registers hsw_base, hsw_small)
    linear_transformer,
    longformer,
    set_linear,
    set_lstm,
    set_transformer,
    sparse_transformer,
    swarm,  # noqa: F401  (registers the SWARM set model, kind="set")
    swarm_transformer,  # noqa: F401  (registers swarm_transformer*, kind="image")
    swarmformer,  # noqa: F401  (registers swarmformer_*)
    swarmformer_enhanced,  # noqa: F401  (registers swarmformer_enhanced_*)
    transformer,
)
from models.registry import add_tags, create_model, list_models, model_entry, register_model

# The reference SwarmFormer mean-pools over PAD tokens, as the authors' code does (by design; see
# models/swarmformer.py). Stated here so that swarmformer.py stays untouched by the baselines branch.
for _name in ("swarmformer_small", "swarmformer_base"):
    add_tags(_name, "ignores_mask")
add_tags("swarm", "permutation_equivariant")  # mean pooling (the default); tests/models/test_set_models.py checks it

__all__ = ["add_tags", "create_model", "list_models", "model_entry", "register_model"]
