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


def test_one_writer_refuses_a_second_holder_and_a_killed_holder_leaves_no_stuck_lock(tmp_path):
    import signal
    import subprocess
    import sys

    from swarmlab.errors import SwarmlabError
    from swarmlab.io import one_writer

    with one_writer(tmp_path, "train-x", "train@x"):
        with pytest.raises(SwarmlabError, match=r"train@x is already running on these outputs \(pid \d+ on .*, since"):
            with one_writer(tmp_path, "train-x", "train@x"):
                pass
        with one_writer(tmp_path, "evaluate-x", "evaluate@x"):  # another name: another lock
            pass
    with one_writer(tmp_path, "train-x", "train@x"):  # released on exit
        pass
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from swarmlab.io import one_writer\n"
            f"with one_writer({str(tmp_path)!r}, 'train-x', 'train@x'):\n"
            "    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SwarmlabError, match=rf"already running on these outputs \(pid {holder.pid} "):
            with one_writer(tmp_path, "train-x", "train@x"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with one_writer(tmp_path, "train-x", "train@x"):  # the kernel released the killed holder's lock (else: refused)
        pass


@pytest.mark.slow
def test_a_second_train_of_the_same_task_is_refused_in_one_line(tmp_path):
    """Two `train --task clustering_direct --restart` in one folder both exited 0 and lost 7 files of the runs."""
    import os
    import subprocess
    import sys

    from swarmlab.drive.runs import lock_dir
    from swarmlab.io import one_writer
    from tests.conftest import REPO_ROOT

    env = {**os.environ, "SWARMLAB_WORKDIR": str(tmp_path), "SWARMLAB_PROGRESS": "0"}
    with one_writer(lock_dir(tmp_path), "train-toy_counting", "train@toy_counting"):
        proc = subprocess.run(
            [sys.executable, "-m", "pipelines.train", "--profile", "smoke", "--task", "toy_counting", "--no-tracking"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: train@toy_counting is already running on these outputs")
    assert not (tmp_path / "outputs").exists()  # the lock lives outside the work folder
