"""The report's library: the papers' claims as data (claims), intervals and paired tests (stats), per-item test scores
and the test-split record (testsplit), our runs as read from the metrics files (results), the verdicts (ledger), their
layout (render), one provenance and dvc.lock staleness (provenance), and the papers' rows (baselines); the rest of the
document is assembled by ``assemble`` from one module per section (papers, memory, tables, figures, ablations, side),
reading ``inputs`` and ``mlflow_index`` and drawing with ``plots``. The `report` stage (pipelines/report.py) is a thin
CLI over ``assemble``; docs/reports.md maps every module and describes the rules."""
