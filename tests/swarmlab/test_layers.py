"""The import floors, read from the source with ``ast`` (imports inside functions count):

* ``models`` imports nothing from ``tasks`` or ``pipelines``, and from ``swarmlab`` only ``MODELS_MAY_IMPORT`` (the
  one way to declare and check a setting, which imports nothing else of the project): nn.Module code and configs;
* ``swarmlab`` never imports ``pipelines``, which holds only the stage entry points; nor does it name a stage
  module for the scheduler to import (``"pipelines.train:train_run"``);
* the floors are folders: ``swarmlab/drive/`` (the resolver, runs, scheduler, training, evaluation, sweep, report)
  drives models and tasks; the rest of ``swarmlab/`` (the ground: top-level modules and ``engine/``) imports nothing
  from ``tasks``, ``models`` or ``swarmlab/drive/``, so neither does anything it imports; models and tasks never
  import the drive; the oracles (``swarmlab/testing/``) import no product code;
* nothing outside ``pipelines/`` (and the tests) imports ``pipelines``;
* no module under ``pipelines/`` imports another ``pipelines`` module: a stage is a ``main()`` over the library.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# The floors are folders: swarmlab/drive/ turns params into runs and sits above the task contract and the model
# registry; the rest of swarmlab/ (its top-level modules and engine/) is the ground models and tasks stand on;
# swarmlab/testing/ holds the oracles, which import nothing of the project's product code.
DRIVE = "swarmlab.drive"
TESTING = "swarmlab.testing"


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__")


def modules(folder: str) -> list[Path]:
    return sorted((REPO_ROOT / folder).rglob("*.py"))


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute, with each ``from a import b`` also as ``a.b``."""
    inside = REPO_ROOT in path.parents
    package = (
        "" if not inside else module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(p for p in [*parent, base] if p)
            names |= {base} | {f"{base}.{a.name}" for a in node.names}
    return names


def under(name: str, *tops: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in tops)


def above_tasks(name: str) -> bool:
    return under(name, DRIVE)


def bad_imports(paths: list[Path], forbidden) -> list[str]:
    return sorted(f"{p.relative_to(REPO_ROOT)} imports {name}" for p in paths for name in imports(p) if forbidden(name))


MODELS_MAY_IMPORT = {
    "swarmlab.settings",
    "swarmlab.errors",
    "swarmlab.log",  # status lines; a stage's cli wrapper (errors) checks the log level
    "swarmlab.registry",
}  # the registry: models and tasks alike


def test_models_import_nothing_above_them():
    def forbidden(name: str) -> bool:
        return under(name, "tasks", "pipelines") or (under(name, "swarmlab") and not under(name, *MODELS_MAY_IMPORT))

    assert not bad_imports(modules("models"), forbidden)
    for allowed in MODELS_MAY_IMPORT:  # and what models may import stays at the bottom
        path = REPO_ROOT / (allowed.replace(".", "/") + ".py")
        assert not bad_imports([path], lambda n: under(n, "swarmlab") and not under(n, *MODELS_MAY_IMPORT)), allowed
        assert not bad_imports([path], lambda n: under(n, "models", "tasks", "pipelines")), allowed


def test_swarmlab_never_imports_the_stages():
    assert not bad_imports(modules("swarmlab"), lambda n: under(n, "pipelines"))
    named = sorted(
        f"{p.relative_to(REPO_ROOT)}: {node.value!r}"
        for p in modules("swarmlab")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"pipelines\.\w+:\w+", node.value)
    )
    assert not named, f"swarmlab names stage functions for the scheduler to import: {named}"


def test_the_ground_stays_below_tasks_and_models():
    ground = [p for p in modules("swarmlab") if not under(module_name(p), DRIVE, TESTING)]
    assert any(module_name(p) == "swarmlab.engine.loop" for p in ground)
    found = bad_imports(ground, lambda n: under(n, "tasks", "models", "pipelines") or above_tasks(n))
    assert not found, f"ground modules import above their floor (or the module belongs in swarmlab/drive/): {found}"


@pytest.mark.parametrize("folder", ["models", "tasks"])
def test_models_and_tasks_never_import_the_drive(folder):
    assert not bad_imports(modules(folder), above_tasks)


def test_the_oracles_import_no_product_code():
    """An oracle that shared code with what it checks would share its bugs (swarmlab/testing/__init__.py)."""
    found = bad_imports(
        modules("swarmlab/testing"), lambda n: under(n, "models", "tasks", "pipelines", DRIVE, "swarmlab.engine")
    )
    assert not found, found


@pytest.mark.parametrize("folder", ["models", "tasks", "swarmlab", "benchmarks", "scripts"])
def test_nothing_outside_pipelines_imports_them(folder):
    assert not bad_imports(modules(folder), lambda n: under(n, "pipelines"))


def test_no_stage_imports_another():
    assert not bad_imports(modules("pipelines"), lambda n: under(n, "pipelines"))


def test_the_check_sees_a_bad_import(tmp_path):
    """The walk above is able to fail: an import inside a function, and a relative one, are both seen."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from pipelines.train import main\n")
    assert imports(bad) == {"pipelines.train", "pipelines.train.main"}
