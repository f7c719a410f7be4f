"""Training a task: one run (run.py) and every run of a task with its metrics.json (task.py)."""
