"""The library under the stages: errors and atomic I/O at the bottom, params, runs, the engine and the scheduler above.

``models/``, ``tasks/`` and ``pipelines/`` may all import from here. The base modules (errors, io, settings, paths,
seeds, progress, tracking, batches) and ``swarmlab.engine`` import none of them; the modules that turn params into
runs and run them (params, sections, runs, run_config, guard, training, evaluation, schedule, sweep, text,
memory_scaling, ablation_runs) sit above ``tasks`` and ``models`` and import them; nothing here imports
``pipelines``, which holds only the stage entry points (tests/swarmlab/test_layers.py). Importing ``swarmlab``
does not load the engine.
"""

from swarmlab.errors import SwarmlabError, cli

__all__ = ["SwarmlabError", "cli"]
