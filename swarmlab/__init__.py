"""The bottom of the import graph: user-facing errors and atomic file output.

``models/``, ``tasks/`` and ``pipelines/`` may all import from here; this package imports none of them.
"""

from swarmlab.errors import SwarmlabError, cli

__all__ = ["SwarmlabError", "cli"]
