"""Progress bars that stay out of logs: on only when stdout is a TTY (``SWARMLAB_PROGRESS=0/1`` forces it)."""

from __future__ import annotations

import os
import sys


def progress_enabled() -> bool:
    forced = os.environ.get("SWARMLAB_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    return sys.stdout.isatty()


def progress(iterable=None, **kwargs):
    from tqdm.auto import tqdm  # tqdm: only when a bar is shown

    kwargs.setdefault("disable", not progress_enabled())
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("leave", False)
    return tqdm(iterable, **kwargs)
