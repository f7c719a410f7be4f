"""The floor that drives models and tasks: what turns params into runs and runs into results.

``swarmlab/`` itself (its top-level modules and ``engine/``) is the ground: errors, settings, io, integrity, paths,
tracking, the engine; models and tasks may import it, and it imports neither. ``swarmlab/drive/`` sits above the
task contract and the model registry: the resolver (``spec``, ``runs``, ``run_config``, ``sections``, ``params``),
the guard and run records, the scheduler, training, evaluation, the sweep, ablations, the frontier, memory scaling
and the report. ``tests/swarmlab/test_layers.py`` reads these floors from the folders.
"""
