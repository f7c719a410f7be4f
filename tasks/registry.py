"""Task registry: a task says what is learned (data, loss) and how it is scored (metrics, monitor).

Every module of tasks/ that defines a task registers it (``@register_task``); the registry imports them all on the
first lookup (swarmlab/registry.py, as the model registry does), so a new task is one new file and its params.yaml
section. An unknown name is one line with the nearest names (``swarmlab.registry.UnknownNameError``).
"""

from __future__ import annotations

from swarmlab.registry import Registry

_TASKS: Registry[type] = Registry("task", "tasks")


def register_task(cls):
    _TASKS.add(cls.name, cls)
    return cls


def task_class(name: str) -> type:
    """The registered task class ``name``; an unknown name is a one-line error with the nearest names."""
    return _TASKS.get(name)


def get_task(name: str, options: dict | None = None, **kwargs):
    """Instantiate the registered task ``name`` with its ``options`` (checked against ``Task.Options``)."""
    return task_class(name)(options, **kwargs)


def list_tasks() -> list[str]:
    return _TASKS.names()
