"""Shared plumbing for every stage: params, paths, errors, seeds, tracking, progress.

The training engine is ``swarmlab.engine``."""
