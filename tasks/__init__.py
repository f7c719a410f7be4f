"""What is learned and how it is scored: datasets, loss, metrics; a task registry (contract: tasks/base.py).

Importing this package loads no task: ``get_task`` and ``list_tasks`` import the package's modules on first use
(``tasks.registry``), so a data stage that needs ``tasks.imdb_sources`` alone does not load every task.
"""

from tasks.registry import get_task, list_tasks, register_task, task_class

__all__ = ["get_task", "list_tasks", "register_task", "task_class"]
