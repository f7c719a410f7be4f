"""`swarmlab`: one command for every stage, key=value overrides checked by params.yaml's own loader (#38 item 4)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest
import yaml

from pipelines.cli import COMMANDS, main, outside_checkout, split_words, with_overrides
from swarmlab.errors import SwarmlabError
from swarmlab.paths import PARAMS_FILE
from tests.conftest import REPO_ROOT


def test_every_command_is_a_stage_module():
    for name, (module, _) in COMMANDS.items():
        assert (REPO_ROOT / (module.replace(".", "/") + ".py")).is_file(), name


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_is_whole_with_examples_and_task_choices(command, capsys):
    """`--help` shows the docstring's whole first paragraph, its command lines as examples, and the task sections."""
    module = importlib.import_module(COMMANDS[command][0])
    with pytest.raises(SystemExit) as stop:
        module.main(["--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0
    description = out.split("\n\n")[1]
    first_paragraph = " ".join(module.__doc__.strip().split("\n\n")[0].split())
    assert " ".join(description.split()) == first_paragraph, command  # whole, never cut mid-sentence
    example = "swarmlab ui" if command == "ui" else f"python -m {COMMANDS[command][0]}"  # ui is no stage
    assert f"examples:\n  {example}" in out, command
    if COMMANDS[command][1] == "--task":
        assert "one of imdb," in " ".join(out.split()) and "listops" in out, command


def test_words_are_task_overrides_and_flags_in_order():
    task, overrides, flags = split_words(
        ["imdb", "model=hsw_small", "--parallel", "2", "train.lr=3e-4", "--models=a b=c", "--resume"], takes_task=True
    )
    assert task == "imdb" and overrides == {"model": "hsw_small", "train.lr": "3e-4"}
    assert flags == ["--parallel", "2", "--models=a b=c", "--resume"]
    assert split_words(["--no-tracking"], takes_task=True) == (None, {}, ["--no-tracking"])
    assert split_words(["task", "imdb"], takes_task=True) == ("task", {}, ["imdb"])  # claims: its words, in order
    with pytest.raises(SwarmlabError, match="train.lr is set twice"):
        split_words(["train.lr=1", "train.lr=2"], takes_task=False)


def test_overrides_land_where_the_loader_reads_them():
    raw = yaml.safe_load(PARAMS_FILE.read_text())
    out = with_overrides(
        raw, "smoke", {"train.lr": "3e-4", "tasks.imdb.train.max_steps": "7", "sweep.num_samples": "2"}
    )
    assert out["train"]["lr"] == 3e-4  # the top-level override section, as `dvc exp run -S +train.lr=`
    assert out["profiles"]["smoke"]["tasks"]["imdb"]["train"]["max_steps"] == 7
    assert out["profiles"]["smoke"]["sweep"]["num_samples"] == 2
    assert raw == yaml.safe_load(PARAMS_FILE.read_text())  # the file as read is not touched


def test_unknown_commands_and_keys_are_one_line(capsys):
    assert main(["trian", "imdb"]) == 2
    assert "unknown command 'trian'; did you mean train?" in capsys.readouterr().err
    before = PARAMS_FILE.read_bytes()
    assert main(["train", "imdb", "tasks.imdb.trian.lr=1e-3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: params.yaml + overrides"), err
    assert "unknown key 'tasks.imdb.trian'" in err[0] and "swarmlab-overrides" not in err[0]
    assert main(["train", "imdb", "profile=smok"]) == 2
    assert "unknown profile 'smok'" in capsys.readouterr().err
    assert main(["report", "model=x"]) == 2
    assert "model= is for train" in capsys.readouterr().err
    assert PARAMS_FILE.read_bytes() == before


@pytest.mark.slow
def test_a_stage_runs_with_overrides_and_params_yaml_untouched(tmp_path):
    """`swarmlab train toy_counting profile=smoke tasks...max_steps=20 --no-tracking`, as a user types it: the run
    trains the overridden budget, in the work folder, and params.yaml is byte for byte what it was."""
    before = PARAMS_FILE.read_bytes()
    env = {**os.environ, "SWARMLAB_WORKDIR": str(tmp_path), "SWARMLAB_PROGRESS": "0"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "train",
            "toy_counting",
            "profile=smoke",
            "tasks.toy_counting.train.max_steps=20",
            "tasks.toy_counting.train.eval_every=10",
            "--no-tracking",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    metrics = json.loads((tmp_path / "reports" / "train" / "toy_counting" / "metrics.json").read_text())
    (entry,) = metrics.values()
    assert entry["steps"] == 20 and entry["evaluations"] == 2
    assert PARAMS_FILE.read_bytes() == before


def test_a_command_run_outside_its_checkout_refuses_rather_than_read_that_checkouts_files(
    tmp_path, monkeypatch, capsys
):
    """#38: the console script is bound to the checkout it was installed from; from another folder (another clone) it
    would have trained on that checkout's data and written its reports. Inside the checkout, any folder will do."""
    other = tmp_path / "other-clone"
    (other / "data").mkdir(parents=True)
    monkeypatch.chdir(other)
    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: this command runs the checkout at ") and err.count("\n") == 1, err
    assert str(REPO_ROOT.resolve()) in err and str(other.resolve()) in err
    assert not (other / "reports").exists()  # nothing written where the user stood
    assert main(["--help"]) == 0  # help reads nothing: it works anywhere
    assert outside_checkout(REPO_ROOT) is None and outside_checkout(REPO_ROOT / "docs") is None
    assert outside_checkout(REPO_ROOT.parent) is not None
