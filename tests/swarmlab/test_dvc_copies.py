"""Where DVC's experiment copies find what lies outside the repository (swarmlab/dvc_copies.py, swarmlab.paths)."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmlab.dvc_copies import copy_links, make_links
from swarmlab.errors import SwarmlabError
from swarmlab.paths import home_root


@pytest.mark.parametrize(
    "copy", ["/r/.dvc/tmp/exps/tmpab12", "/r/.dvc/tmp/exps/standalone/tmpab12"], ids=["queue", "temp"]
)
def test_a_copy_resolves_against_the_repository_it_came_from(copy):
    assert home_root(Path(copy)) == Path("/r")
    assert home_root(Path("/r")) == Path("/r") and home_root(Path("/r/.dvc/tmp/tmpab")) == Path("/r/.dvc/tmp/tmpab")


def test_links_reach_from_each_copy_what_the_workspace_reaches(tmp_path):
    root = tmp_path / "repo"
    links = copy_links("../shared/datasets", root)
    assert links == [
        (root / ".dvc/tmp/exps/shared", tmp_path / "shared"),
        (root / ".dvc/tmp/exps/standalone/shared", tmp_path / "shared"),
    ]
    copy = root / ".dvc/tmp/exps/standalone/tmpx"  # what DVC resolves ../shared/datasets to from a copy
    assert (copy / "../shared").resolve() == links[1][0].resolve()
    assert copy_links("../../up/d", root) == [
        (root / ".dvc/tmp/up", tmp_path.parent / "up"),
        (root / ".dvc/tmp/exps/up", tmp_path.parent / "up"),
    ]
    assert copy_links(str(tmp_path / "abs"), root) == [] and copy_links("inside/data", root) == []
    for bad in ("../a/../b", "../../../../x", ".."):
        with pytest.raises(SwarmlabError, match="absolute path"):
            copy_links(bad, root)


def test_make_links_is_idempotent_and_never_replaces_a_folder(tmp_path):
    root, shared = tmp_path / "repo", tmp_path / "shared"
    root.mkdir()
    params = root / "params.yaml"
    params.write_text("paths: {datasets: ../shared/datasets}\n")
    with pytest.raises(SwarmlabError, match=f"{shared} does not exist"):
        make_links(params, root)
    (shared / "datasets").mkdir(parents=True)
    assert make_links(params, root) == [
        f".dvc/tmp/exps/shared -> {shared}",
        f".dvc/tmp/exps/standalone/shared -> {shared}",
    ]
    assert all("already there" in line for line in make_links(params, root))
    assert (root / ".dvc/tmp/exps/standalone/shared/datasets").is_dir()
    (root / ".dvc/tmp/exps/shared").unlink()
    (root / ".dvc/tmp/exps/shared").mkdir()
    with pytest.raises(SwarmlabError, match="exists and is no link"):
        make_links(params, root)
    params.write_text(f"paths: {{datasets: {shared}}}\n")
    assert make_links(params, root) == [f"paths.datasets {shared} reads the same from DVC's copies: no link needed"]
