"""The commands a report names for a result it lacks, in one place so that the ledger, the ablation section and
their tests say the same thing. ``{stage}``, ``{task}`` and ``{grid}`` are filled in where they are shown."""

# the pipeline's own results (reports/, at params.yaml's profile)
STAGE = "dvc repro {stage}@{task}"
GRID = "python -m pipelines.ablate --grid {grid} --resume"
# the claims profile's pieces (reports/claims), each run by scripts/claims.sh in a work folder of its own
CLAIMS_TASK = "bash scripts/claims.sh task {task}"
CLAIMS_GRID = "bash scripts/claims.sh grid {grid}"
