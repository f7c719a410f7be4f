"""Status lines through Python's ``logging``: one logger tree, ``swarmlab``, whose console handler writes each line
as its message alone (what the hand-written prints wrote before), INFO and below to standard output and warnings and
errors to standard error, looked up when the line is written (pytest's capture and a redirected stream see it) and
flushed at once.

``SWARMLAB_LOG_LEVEL`` (DEBUG, INFO, WARNING, ERROR; default INFO) sets how much is shown: WARNING keeps a stage to
its problems. Every stage reads it at its start (``swarmlab.errors.cli``), so a bad value is the stage's one-line
error. A program that configures logging itself can attach its own handlers to ``swarmlab`` (or set
``propagate``). Modules outside the package (``tasks``, ``pipelines``) log under ``swarmlab.<their name>``.

Outputs that are a command's result (a table, a summary, a machine-read line) stay ``print``.
"""

from __future__ import annotations

import logging
import os
import sys

from swarmlab.errors import SwarmlabError

ROOT = "swarmlab"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class ConsoleHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging's own contract: a failing handler reports, never raises
            self.handleError(record)


def level() -> str:
    value = os.environ.get("SWARMLAB_LOG_LEVEL", "INFO").upper()
    if value not in LEVELS:
        raise SwarmlabError(f"SWARMLAB_LOG_LEVEL={value!r} is not one of {', '.join(LEVELS)}")
    return value


def configure() -> logging.Logger:
    """Attach the console handler to ``swarmlab`` (once) and set its level from ``SWARMLAB_LOG_LEVEL`` (each call)."""
    root = logging.getLogger(ROOT)
    if not any(isinstance(h, ConsoleHandler) for h in root.handlers):
        handler = ConsoleHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
        root.propagate = False
    root.setLevel(level())
    return root


def get_logger(name: str) -> logging.Logger:
    """The logger of module ``name`` under ``swarmlab`` (the tree configured on first use)."""
    root = logging.getLogger(ROOT)
    if not any(isinstance(h, ConsoleHandler) for h in root.handlers):
        try:
            configure()
        except SwarmlabError:  # at import: INFO for now; a stage's ``cli`` wrapper reports the bad value as its error
            root.setLevel(logging.INFO)
    return logging.getLogger(name if name == ROOT or name.startswith(ROOT + ".") else f"{ROOT}.{name}")
