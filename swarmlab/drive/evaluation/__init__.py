"""Testing a trained run: its speed and memory (measure.py) and one run on the test split (run.py)."""
