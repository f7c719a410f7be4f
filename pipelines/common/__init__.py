"""Shared plumbing for every stage: params, paths, errors, seeds, tracking, progress, the training engine."""
