"""The commands a report names for a result it lacks, in one place so that the ledger, the ablation section and
their tests say the same thing. ``{stage}``, ``{task}`` and ``{grid}`` are filled in where they are shown."""

# the pipeline's own results (reports/, at params.yaml's profile)
STAGE = "dvc repro {stage}@{task}"
SWEEP = "dvc repro sweeps/dvc.yaml:sweep@{task}"
GRID = "python -m pipelines.ablate --grid {grid} --resume"
# the claims profile's pieces (reports/claims): stages of claims/dvc.yaml (task@, sample@, grid@), each run in a work
# folder of its own; scripts/claims.sh is their wrapper (it checks the names, then runs dvc repro)
CLAIMS_TASK = "bash scripts/claims.sh task {task}"
CLAIMS_GRID = "bash scripts/claims.sh grid {grid}"
CLAIMS_SWEEP = "bash scripts/claims.sh sweep {task}"
CLAIMS_PIECE = "dvc repro claims/dvc.yaml:{piece}"
