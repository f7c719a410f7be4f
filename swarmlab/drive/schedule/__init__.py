"""Where the runs of a stage go: one after another here, or over a local Ray or a cluster (docs/ray.md)."""
