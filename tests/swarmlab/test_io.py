"""swarmlab.io: an output is replaced whole or not at all, and what a kill in the swap leaves is cleaned next time."""

from __future__ import annotations

import pytest

import swarmlab.io
from swarmlab.io import atomic_dir, swap_into_place


def test_swap_into_place_replaces_a_folder_or_a_file_and_leaves_nothing_aside(tmp_path):
    final, new = tmp_path / "out", tmp_path / ".out.tmp-1"
    final.mkdir()
    (final / "a").write_text("old")
    new.mkdir()
    (new / "b").write_text("new")
    swap_into_place(new, final)
    assert [p.name for p in final.iterdir()] == ["b"] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    (tmp_path / "f.tmp").write_text("2")
    (tmp_path / "f").write_text("1")
    swap_into_place(tmp_path / "f.tmp", tmp_path / "f")
    assert (tmp_path / "f").read_text() == "2" and not (tmp_path / ".f.old").exists()


def test_a_kill_in_the_swap_keeps_the_previous_output_and_the_next_write_cleans_up(tmp_path, monkeypatch):
    final = tmp_path / "out"
    with atomic_dir(final) as tmp:
        (tmp / "x").write_text("1")

    def killed(new, final):  # what tests/conftest.py's held_before_swap lets a kill -9 do: stop before the swap
        raise KeyboardInterrupt

    monkeypatch.setattr(swarmlab.io, "swap_into_place", killed)
    with pytest.raises(KeyboardInterrupt), atomic_dir(final) as tmp:
        (tmp / "x").write_text("2")
    assert (final / "x").read_text() == "1"
    monkeypatch.undo()
    (tmp_path / ".out.old").mkdir()  # as a kill between the swap's two renames leaves it
    with atomic_dir(final) as tmp:
        (tmp / "x").write_text("3")
    assert (final / "x").read_text() == "3" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_held_before_swap_runs_the_module_with_its_arguments_and_waits_in_the_swap(tmp_path):
    """The kill -9 tests' launcher (tests/conftest.py): the stage sees its own argv, and its swap waits."""
    import os
    import subprocess
    import time

    from tests.conftest import held_before_swap

    (tmp_path / "fake_stage.py").write_text(
        "import sys\nfrom pathlib import Path\nfrom swarmlab.io import swap_into_place\n"
        "out = Path(sys.argv[1])\n(out.parent / 'new').write_text(' '.join(sys.argv[1:]))\n"
        "swap_into_place(out.parent / 'new', out)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    proc = subprocess.run(
        held_before_swap("fake_stage", str(tmp_path / "out"), "--flag", hold_s=1.0),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.perf_counter() - t0 >= 1.0
    assert (tmp_path / "out").read_text() == f"{tmp_path / 'out'} --flag"
