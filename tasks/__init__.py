"""What is learned and how it is scored: datasets, loss, metrics; a task registry."""
from tasks.registry import get_task, list_tasks, register_task
from tasks import imdb  # noqa: F401  (registers "imdb")

__all__ = ["get_task", "list_tasks", "register_task"]
