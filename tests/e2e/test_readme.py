"""The README is the newcomer's map: every path its layout table and its links name exists, and it stays short."""

import re

from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def _section(title: str) -> str:
    match = re.search(rf"^## {title}\n(.*?)(?=^## |\Z)", README, flags=re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def test_every_path_of_the_layout_map_exists():
    rows = [line for line in _section("Layout").splitlines() if line.startswith("| `")]
    assert len(rows) >= 10
    for row in rows:
        folder, _, start = [cell.strip() for cell in row.strip("|").split("|")]
        for cell in (folder, start):
            for path in re.findall(r"`([^`]+)`", cell):
                assert (REPO_ROOT / path).exists(), f"README layout names {path}, which does not exist"


def test_every_link_resolves_and_the_readme_stays_short():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links
    for link in links:
        assert (REPO_ROOT / link).exists(), f"README links {link}, which does not exist"
    assert len(README.splitlines()) <= 200


def test_the_two_commands_exist():
    for script in ("scripts/repro.sh", ".ci/run"):
        assert f"bash {script}" in README and (REPO_ROOT / script).is_file()


def test_the_style_check_stops_the_test_command(tmp_path):
    """.ci/run's ruff lines, run as the script runs them (bash, set -euo pipefail) with a ruff whose format check
    fails: the script stops there with ruff's status (a `format && check` line let the failure through)."""
    import subprocess

    lines = [line for line in (REPO_ROOT / ".ci/run").read_text().splitlines() if "ruff " in line]
    assert any("ruff format --check" in line for line in lines) and any("ruff check" in line for line in lines)
    (tmp_path / ".venv/bin").mkdir(parents=True)
    fake = tmp_path / ".venv/bin/ruff"
    fake.write_text('#!/bin/sh\nif [ "$1" = format ]; then echo "would reformat" >&2; exit 1; fi\nexit 0\n')
    fake.chmod(0o755)
    script = "set -euo pipefail\n" + "\n".join(lines) + "\necho reached the tests\n"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and "reached the tests" not in done.stdout, (done.returncode, done.stdout)
