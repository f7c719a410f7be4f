"""The report's library: the seeds' claims as data (claims), intervals and paired tests (stats), per-item test scores
and the test-split record (testsplit), our runs as read from the metrics files (results), the verdicts (ledger), their
layout (render), one provenance and dvc.lock staleness (provenance), and the papers' rows (baselines). The `report`
stage (pipelines/report.py) lays these out; docs/reports.md describes the rules."""
