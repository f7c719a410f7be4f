"""nn.Module code and the model registry. Importing this package registers every architecture."""
from models.registry import create_model, list_models, model_entry, register_model
from models import swarmformer  # noqa: F401  (registers swarmformer_*)
from models import swarmformer_enhanced  # noqa: F401  (registers swarmformer_enhanced_*)

__all__ = ["create_model", "list_models", "model_entry", "register_model"]
