"""DVC tells the truth: every stage declares exactly the code it imports (generated: swarmlab/drive/dvcdeps.py) and the
override sections it reads.

(The end-to-end test in test_pipeline_e2e.py edits each documented override and checks that `dvc status`
marks exactly the stages that read it.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from swarmlab.drive import dvcdeps
from swarmlab.drive.params import OVERRIDE_SECTIONS
from tests.conftest import REPO_ROOT
from tests.e2e.test_pipeline_e2e import GIT_IDENTITY

PIPELINES = [REPO_ROOT / p for p in dvcdeps.PIPELINES]
CLAIMS = "claims/dvc.yaml"  # the claims profile's pieces: they read profiles.claims, whatever `profile` is active


def expand(dvc_file: Path) -> dict[str, dict]:
    """The stages of ``dvc_file`` with ``foreach`` expanded (``${key}``, ``${item.x}``); ``${paths...}`` kept."""
    stages = {}
    for name, stage in yaml.safe_load(dvc_file.read_text())["stages"].items():
        if "foreach" not in stage:
            stages[name] = stage
            continue
        items = stage["foreach"]
        pairs = items.items() if isinstance(items, dict) else ((i, i) for i in items)
        template = yaml.safe_dump(stage["do"])
        for key, item in pairs:
            text = template.replace("${key}", str(key))
            if isinstance(item, dict):
                for k, v in item.items():
                    text = text.replace(f"${{item.{k}}}", str(v))
            else:
                text = text.replace("${item}", str(item))
            stages[f"{name}@{key}"] = yaml.safe_load(text)
    return stages


STAGES = [(f.relative_to(REPO_ROOT).as_posix(), name, stage) for f in PIPELINES for name, stage in expand(f).items()]


TEMPLATES = [  # each stage as written (a foreach stage once, its `${item.x}` deps unexpanded: they are data)
    (f"{p}:{name}", stage.get("do", stage))
    for p in dvcdeps.PIPELINES
    for name, stage in yaml.safe_load((REPO_ROOT / p).read_text())["stages"].items()
]


@pytest.mark.parametrize(("name", "stage"), TEMPLATES, ids=[n for n, _ in TEMPLATES])
def test_stage_declares_exactly_the_code_it_imports(name, stage):
    """The code deps are generated (swarmlab/drive/dvcdeps.py): what the command imports, no more and no less, so that DVC
    reruns a stage when its code changed and only then. After a code change: python -m swarmlab.drive.dvcdeps."""
    declared = [d for d in stage.get("deps", []) if dvcdeps.is_code(d)]
    assert declared == dvcdeps.code_deps(stage["cmd"]), f"{name}: run python -m swarmlab.drive.dvcdeps"


def test_the_generated_deps_cover_every_file_a_stage_imports():
    """The generator's own check: every file the train stage's command imports lies under one of its code deps,
    including lazy imports inside functions, the modules a registry loads and the stages a stage runs."""
    for cmd in ("python -m pipelines.train --task imdb", "python -m pipelines.claims grid enhanced_ends"):
        deps = [REPO_ROOT / d for d in dvcdeps.code_deps(cmd)]
        files = dvcdeps.imported_files(dvcdeps.entry_file(cmd), kind=dvcdeps.command_kind(cmd))
        assert all(any(f == d or d in f.parents for d in deps) for f in files)
    claims = {d for d in dvcdeps.code_deps("python -m pipelines.claims grid enhanced_ends")}
    assert {"pipelines/ablate.py", "pipelines/train.py", "pipelines/evaluate.py"} <= claims  # run as subprocesses
    # a claims piece runs its kind's stages only: a change to the sweep's code leaves the grid and task pieces current
    assert not {"pipelines/sweep.py", "swarmlab/drive/sweep"} & claims
    sweep = set(dvcdeps.code_deps("python -m pipelines.claims sweep imdb"))
    assert {"pipelines/sweep.py", "swarmlab/drive/sweep"} <= sweep and "pipelines/ablate.py" not in sweep
    assert dvcdeps.command_kind("python -m pipelines.train --task imdb") is None
    assert "tasks" in dvcdeps.code_deps("python -m pipelines.data --task listops")  # the registry loads every task


@pytest.mark.parametrize(("pipeline", "name", "stage"), STAGES, ids=[f"{p}:{n}" for p, n, _ in STAGES])
def test_every_code_dep_a_stage_declares_exists(pipeline, name, stage):
    """A dep that is gone fails ``dvc repro`` on a missing dependency (a module moved and its old path left behind).
    Outputs of other stages (data/, outputs/, reports/) need not exist before the run; code and params files must."""
    wdir = (REPO_ROOT / pipeline).parent / stage.get("wdir", ".")
    generated = ("data", "outputs", "reports", "mlruns.db")
    gone = sorted(
        d
        for d in stage.get("deps", [])
        if not d.startswith("${")
        and (wdir / d).resolve().relative_to(REPO_ROOT).parts[0] not in generated
        and not (wdir / d).exists()
    )
    assert not gone, f"{pipeline}:{name} declares deps that do not exist: {gone}"


@pytest.mark.parametrize(("pipeline", "name", "stage"), STAGES, ids=[f"{p}:{n}" for p, n, _ in STAGES])
def test_stage_declares_the_override_sections_of_what_it_reads(pipeline, name, stage):
    params = stage.get("params", [])
    for section in OVERRIDE_SECTIONS:  # reading defaults.train means reading the top-level train: {} override too
        if f"defaults.{section}" in params:
            assert section in params, (
                f"{pipeline}:{name} reads defaults.{section} but not the override section {section}"
            )
    if pipeline == CLAIMS:  # the claims profile only: switching the active profile leaves the pieces up to date
        assert "profile" not in params and "profiles.${profile}" not in params, f"{pipeline}:{name}"
        assert "profiles.claims.train" in params and any(p.startswith("profiles.claims.tasks.") for p in params), (
            f"{pipeline}:{name} must declare the claims profile's sections it reads"
        )
        return
    assert {"profile", "profiles.${profile}"} <= set(params), (
        f"{pipeline}:{name}: every stage resolves the active profile (declare `profile` and `profiles.${{profile}}`)"
    )
    assert "profiles" not in params, (
        f"{pipeline}:{name} declares every profile: declare `profiles.${{profile}}`, the active one (dvc.yaml's header)"
    )


def test_the_import_walk_sees_imports_inside_functions(tmp_path):
    """The generator must see lazy imports (the stages import MLflow, tasks, plots inside functions)."""
    files = dvcdeps.imported_files(REPO_ROOT / "pipelines" / "train.py")
    assert REPO_ROOT / "swarmlab" / "plots.py" in files  # imported inside swarmlab/drive/training/run.py:train_one only
    assert REPO_ROOT / "tasks" / "registry.py" in files  # through tasks/__init__.py
    assert REPO_ROOT / "tasks" / "long_data.py" in files  # the registry imports every module of tasks/


def test_no_stage_declares_the_schedule():
    """The top-level `schedule:` (how many runs at once, CPUs/GPUs per run, the Ray address) does not change results:
    no stage may declare it, and it must not sit under `defaults` or `profiles`, which every stage declares."""
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    assert "schedule" in raw and "schedule" not in raw["defaults"]
    assert not any("schedule" in (profile or {}) for profile in raw["profiles"].values())
    for pipeline, name, stage in STAGES:
        declared = [p for p in stage.get("params", []) if not isinstance(p, dict)]
        assert not any(p == "schedule" or p.startswith("schedule.") for p in declared), f"{pipeline}:{name}"


def _tiny_repo_with(tmp_path, stage_name: str):
    """A git + DVC repo in ``tmp_path`` with the repo's params.yaml and one stage declaring what ``stage_name``
    declares, reproduced once; returns ``edit(change) -> dvc status output`` (``change`` edits the parsed params; the file is
    restored afterwards)."""
    import os
    import shutil
    import subprocess
    import sys

    dvc = str(Path(sys.executable).with_name("dvc"))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", **GIT_IDENTITY}
    sh = lambda *cmd: subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    shutil.copy(REPO_ROOT / "params.yaml", tmp_path / "params.yaml")
    declared = next(stage for _, name, stage in STAGES if name == stage_name)
    stage = {"cmd": "echo done > out.txt", "params": declared["params"], "outs": ["out.txt"]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"stage": stage}}))
    sh("git", "init", "-q")
    sh(dvc, "init", "-q")
    sh(dvc, "repro", "-q")
    assert "up to date" in sh(dvc, "status")

    def edit(change) -> str:
        original = (tmp_path / "params.yaml").read_text()
        raw = yaml.safe_load(original)
        change(raw)
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        try:
            return sh(dvc, "status")
        finally:
            (tmp_path / "params.yaml").write_text(original)  # each edit alone, against the reproduced state

    return edit


@pytest.mark.slow
def test_changing_the_schedule_leaves_dvc_status_clean(tmp_path):
    """`dvc status` in a tiny repo whose stage declares what train@<task> declares: an edit of `schedule` (parallel, a
    profile's entry, a task's CPUs) leaves it up to date; an edit of a declared setting does not (the check can fail)."""
    edit = _tiny_repo_with(tmp_path, "train@imdb")
    assert "up to date" in edit(lambda raw: raw["schedule"].update(parallel=4, address="10.0.0.1:6379"))
    assert "up to date" in edit(lambda raw: raw["schedule"]["profiles"]["cpu"].update(cpus_per_run=2, gpus_per_run=0.5))
    assert "up to date" in edit(
        lambda raw: raw["schedule"].update(tasks={"imdb": {"swarmformer*": {"cpus_per_run": 2}}})
    )
    assert "changed" in edit(lambda raw: raw["defaults"]["train"].update(lr=1.0e-3))


@pytest.mark.slow
def test_a_stage_reruns_for_its_active_profile_only(tmp_path):
    """Stages declare `profiles.${profile}`, not every profile: `dvc status` in a tiny repo whose stage declares what
    train@imdb declares marks it for an edit of the active profile, of a section it reads and for a switch of profile,
    and leaves it up to date for an edit of another profile or of a section it does not read."""
    edit = _tiny_repo_with(tmp_path, "train@imdb")
    active = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["profile"]
    other = next(p for p in ("smoke", "paper", "claims") if p != active)
    assert "up to date" in edit(lambda raw: raw["profiles"][other]["train"].update(max_epochs=7))
    assert "up to date" in edit(lambda raw: raw["defaults"]["tasks"]["mnist"]["options"].update(val_size=4000))
    assert "up to date" in edit(lambda raw: raw["defaults"]["sample"].update(num_samples=7))
    assert "changed" in edit(
        lambda raw: (
            raw["profiles"][active].setdefault("tasks", {}).setdefault("imdb", {}).update(train={"eval_every": 7})
        )
    )
    assert "changed" in edit(lambda raw: raw["defaults"]["tasks"]["imdb"]["train"].update(lr=1.0e-3))
    assert "changed" in edit(lambda raw: raw["train"].update(lr=1.0e-3))
    assert "changed" in edit(lambda raw: raw.update(profile=other))
