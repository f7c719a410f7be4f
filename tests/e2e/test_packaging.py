"""What the install puts on sys.path (#38 item 4): the four packages, never the repository root, whose other folders
(tests, benchmarks, scripts, data...) would otherwise be importable names in every program of the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

from tests.conftest import REPO_ROOT

PACKAGES = ["models", "pipelines", "swarmlab", "tasks"]  # swarmlab, and what the required layout puts at the top


def test_the_distribution_holds_the_four_packages_alone():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert sorted(p.rstrip("*") for p in config["tool"]["setuptools"]["packages"]["find"]["include"]) == PACKAGES
    assert (
        "editable_mode=compat" not in (REPO_ROOT / "scripts" / "setup.sh").read_text()
    )  # compat = the root on sys.path


def test_outside_the_repository_only_the_packages_import(tmp_path):
    """Run from a folder outside the checkout with no PYTHONPATH, as any program of the environment would be."""
    probe = (
        "import importlib.util, json; "
        "print(json.dumps({n: importlib.util.find_spec(n) is not None for n in "
        "['swarmlab', 'models', 'tasks', 'pipelines', 'tests', 'benchmarks', 'scripts', 'data', 'docs', 'sweeps']}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert sorted(n for n, ok in found.items() if ok) == PACKAGES, found
