"""User-facing errors: one line naming the culprit and what to do, exit status 2, no traceback."""
from __future__ import annotations

import functools
import os
import sys


class SwarmlabError(Exception):
    """An error caused by input or configuration; the message says what is wrong and what to do."""


def cli(main):
    """Wrap a stage's ``main`` so that a SwarmlabError prints ``error: <msg>`` and exits 2 without a traceback.

    Set ``SWARMLAB_TRACEBACK=1`` to see the traceback anyway.
    """

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except SwarmlabError as exc:
            if os.environ.get("SWARMLAB_TRACEBACK") == "1":
                raise
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)

    return wrapper
