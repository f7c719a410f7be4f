"""The hyperparameter sweep: search spaces, the Ray Tune trial and its MLflow runs (docs/sweeps.md)."""
