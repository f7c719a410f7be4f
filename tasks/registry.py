"""Task registry: a task says what is learned (data, loss) and how it is scored (metrics, monitor)."""

from __future__ import annotations

import difflib
import importlib

from swarmlab.errors import SwarmlabError

BUILTIN = ("imdb", "toy", "clustering", "image_generation", "long_documents")  # modules of tasks/ that register
# tasks, imported on the first lookup
_TASKS: dict[str, type] = {}
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN:
            importlib.import_module(f"tasks.{module}")


def register_task(cls):
    if cls.name in _TASKS:
        raise ValueError(f"task {cls.name!r} is registered twice")
    _TASKS[cls.name] = cls
    return cls


def task_class(name: str) -> type:
    """The registered task class ``name``; an unknown name is a one-line error with the nearest names."""
    _load_builtin()
    if name not in _TASKS:
        close = difflib.get_close_matches(str(name), _TASKS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(_TASKS))}"
        raise SwarmlabError(f"unknown task {name!r}{hint}")
    return _TASKS[name]


def get_task(name: str, options: dict | None = None, **kwargs):
    """Instantiate the registered task ``name`` with its ``options`` (checked against ``Task.Options``)."""
    return task_class(name)(options, **kwargs)


def list_tasks() -> list[str]:
    _load_builtin()
    return sorted(_TASKS)
