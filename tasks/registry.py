"""Task registry: a task says what is learned (data, loss) and how it is scored (metrics, monitor)."""
from __future__ import annotations

import difflib

_TASKS: dict[str, type] = {}


def register_task(cls):
    if cls.name in _TASKS:
        raise ValueError(f"task {cls.name!r} is registered twice")
    _TASKS[cls.name] = cls
    return cls


def get_task(name: str, **kwargs):
    """Instantiate the registered task ``name``."""
    if name not in _TASKS:
        close = difflib.get_close_matches(name, _TASKS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(_TASKS))}"
        raise KeyError(f"unknown task {name!r}{hint}")
    return _TASKS[name](**kwargs)


def list_tasks() -> list[str]:
    return sorted(_TASKS)
