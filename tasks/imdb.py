"""IMDB sentiment (Maas et al. 2011): binary, positive = 1; accuracy, precision, recall, F1, confusion matrix."""

from __future__ import annotations

from tasks.registry import register_task
from tasks.text_classification import TextClassificationTask


@register_task
class ImdbTask(TextClassificationTask):
    name = "imdb"
    num_classes = 2
    positive_class = 1
    class_names = ("negative", "positive")
