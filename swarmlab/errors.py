"""User-facing errors: one line naming the culprit and what to do, exit status 2, no traceback."""

from __future__ import annotations

import errno
import functools
import os
import sys

USER_OS_ERRORS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT)


class SwarmlabError(Exception):
    """An error caused by input or configuration; the message says what is wrong and what to do."""


def fail(message: str) -> None:
    """Print ``error: <message>`` (one line) and exit 2. Called inside an ``except`` block: with
    SWARMLAB_TRACEBACK=1 it re-raises the exception being handled instead."""
    if os.environ.get("SWARMLAB_TRACEBACK") == "1":
        raise
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(2)


def cli(main):
    """Wrap a stage's ``main`` so that a SwarmlabError prints ``error: <msg>`` and exits 2 without a traceback.

    Set ``SWARMLAB_TRACEBACK=1`` to see the traceback anyway.
    """

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            from swarmlab.log import configure  # the log level is a setting too: a bad one is this one line

            configure()
            return main(*args, **kwargs)
        except SwarmlabError as exc:
            fail(str(exc))
        except OSError as exc:  # a folder that cannot be written, a full disk: the user's to fix
            if exc.errno not in USER_OS_ERRORS:
                raise
            hint = (
                "check its folder's permissions, or set SWARMLAB_WORKDIR to a writable folder"
                if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
                else "free some space"
            )
            fail(f"cannot write {exc.filename or 'an output'}: {os.strerror(exc.errno).lower()}: {hint}")

    return wrapper
