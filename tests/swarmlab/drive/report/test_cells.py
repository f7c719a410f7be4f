"""The report's one number formatter (swarmlab/drive/report/cells.py): every section prints a metric the same way."""

import pytest

from swarmlab.drive.report.cells import fmt


@pytest.mark.parametrize(
    ("value", "metric", "text"),
    [
        (0.86237, "test_accuracy", "0.8624"),
        (66048, "num_params", "66,048"),
        (988.04, "peak_memory_mb", "988"),  # whole megabytes, as its neighbour below
        (1085.4, "peak_memory_mb", "1,085"),
        (8.43, "peak_memory_mb", "8.43"),  # a small model's memory keeps its digits
        (988.04, "latency_ms_p50", "988.0"),
        (None, "peak_memory_mb", "—"),
        (float("nan"), "peak_memory_mb", "nan"),
    ],
)
def test_fmt(value, metric, text):
    assert fmt(value, metric) == text
