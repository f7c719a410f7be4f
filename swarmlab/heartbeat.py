"""A progress line every few seconds for long loops whose output goes to a log (DVC, CI), where a tqdm bar is off."""

from __future__ import annotations

import time

from swarmlab.log import get_logger

logger = get_logger(__name__)


class Heartbeat:
    """``beat(done)`` prints ``<label>: <done> of <total> <unit> (<extra>), <s> s`` at most every ``every_s`` seconds
    (nothing for loops that finish sooner), flushed, so a long data build never looks like a hang."""

    def __init__(self, label: str, total: int, unit: str = "", every_s: float = 10.0):
        self.label, self.total, self.unit, self.every_s = label, total, unit, every_s
        self.start = self.last = time.monotonic()

    def beat(self, done: int, extra: str = "") -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last = now
        of = f" of {self.total:,}" if self.total else ""  # 0: no known total (a run bounded by time alone)
        logger.info(
            f"{self.label}: {done:,}{of}{' ' + self.unit if self.unit else ''}"
            f"{f' ({extra})' if extra else ''}, {now - self.start:.0f} s"
        )
