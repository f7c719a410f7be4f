"""The bottom of the import graph: user-facing errors and atomic file output.

``models/``, ``tasks/`` and ``pipelines/`` may all import from here; this package imports none of them, save
``swarmlab.engine`` (the training engine, above the task contract ``tasks.base`` that it drives), which still takes
its seeds, progress bars and null tracker from ``pipelines.common``. Importing ``swarmlab`` does not load the engine.
"""

from swarmlab.errors import SwarmlabError, cli

__all__ = ["SwarmlabError", "cli"]
