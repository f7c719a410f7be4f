"""What is learned and how it is scored: datasets, loss, metrics; a task registry (contract: tasks/base.py).

Importing this package loads no task: ``get_task`` and ``list_tasks`` import the built-in task modules
on first use, so a data stage that needs ``tasks.imdb_sources`` does not depend on every task's code.
"""

from tasks.registry import get_task, list_tasks, register_task, task_class

__all__ = ["get_task", "list_tasks", "register_task", "task_class"]
