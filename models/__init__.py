"""nn.Module code and the model registry. Every module here registers its variants (``@register_model``); the
registry imports them all on the first lookup (swarmlab/registry.py), so a new model is one new file.

Tags with a meaning for every model: ``ignores_mask`` = the model's output depends on padded positions
(it does not honour ``attention_mask``); the padding-invariance test skips such models explicitly.
``permutation_equivariant`` (kind "set") = permuting the real entities of a set permutes the per-entity
outputs the same way (in eval mode; for ``lstm_sorted`` when the points are distinct); tests/models/test_set_models.py
checks every model so tagged.
"""

from models.registry import config_fields, create_model, list_models, model_entry, register_model

__all__ = ["config_fields", "create_model", "list_models", "model_entry", "register_model"]
