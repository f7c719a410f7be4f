"""nn.Module code and the model registry. Importing this package registers every architecture.

Tags with a meaning for every model: ``ignores_mask`` = the model's output depends on padded positions
(it does not honour ``attention_mask``); the padding-invariance test skips such models explicitly.
"""
from models.registry import add_tags, create_model, list_models, model_entry, register_model
from models import swarmformer  # noqa: F401  (registers swarmformer_*)
from models import swarmformer_enhanced  # noqa: F401  (registers swarmformer_enhanced_*)
from models import linear_transformer, longformer, sparse_transformer, transformer  # noqa: F401  (baselines)
from models import hsw  # noqa: F401  (registers hsw, hsw_small)

# The reference SwarmFormer mean-pools over PAD tokens, as the authors' code does (by design; see
# models/swarmformer.py). Stated here so that swarmformer.py stays untouched by the baselines branch.
for _name in ("swarmformer_small", "swarmformer_base"):
    add_tags(_name, "ignores_mask")

__all__ = ["add_tags", "create_model", "list_models", "model_entry", "register_model"]
