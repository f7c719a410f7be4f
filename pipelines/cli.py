"""``swarmlab``: one command for every stage, with ``key=value`` overrides checked as params.yaml is.

(The console script of pyproject.toml. It sits above the stages: it runs a stage module's ``main`` by its name, the
one module under pipelines/ that reaches another, and it is no stage itself.)

    swarmlab train imdb                                   # = python -m pipelines.train --task imdb
    swarmlab train imdb model=hsw_small train.lr=3e-4     # one model, another learning rate
    swarmlab train listops profile=smoke tasks.listops.train.max_steps=50 --no-tracking
    swarmlab sweep imdb --search                          # look at a sweep under pinned tuning
    swarmlab evaluate imdb
    swarmlab report
    swarmlab claims task imdb                             # = python -m pipelines.claims task imdb
    swarmlab ui                                           # the MLflow UI on mlruns.db, its artifacts re-rooted

Each command runs the stage module of the same name (``pipelines/<stage>.py``, the code ``dvc repro`` runs); its
flags (``--resume``, ``--no-tracking``, ``--parallel N``...) pass through, and ``swarmlab <command> --help`` shows them.
The first bare word is the task (the grid for ``ablate``; ``claims`` takes its own words). Words with ``=`` are
overrides:

- ``profile=<name>`` picks the profile (``--profile``); ``model=a,b`` (or ``models=``) the models (``--models``);
- ``train.<key>=`` and ``augment.<key>=`` set the top-level override sections, as ``dvc exp run -S +train.lr=...``;
- any other dotted key sets the active profile's value (``tasks.imdb.train.lr=3e-4``, ``sweep.num_samples=8``).

The console script runs the checkout it was installed from (``scripts/setup.sh`` installs the one it sits in), with
that checkout's params.yaml, ``data/`` and ``reports/``: run from a folder outside it, it refuses (one line) rather
than read another checkout's files. In another checkout, ``python -m pipelines.cli ...`` runs that checkout's own code.

Values are YAML (``3e-4``, ``true``, ``[a, b]``). The overrides go into a copy of params.yaml, which is read by the
same loader and checks as the file itself (an unknown key is one line with the keys known there), and the stage reads
that copy; params.yaml is never written. Run names in MLflow carry the overrides, as they carry ``-S``'s.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import re
import sys
import tempfile
import textwrap
from pathlib import Path

import yaml

from swarmlab.errors import SwarmlabError
from swarmlab.paths import PARAMS_FILE, REPO_ROOT

# command -> (stage module, how its first bare word is passed: "--task", "--grid", "" = passed as is, None = takes none)
COMMANDS = {
    "data": ("pipelines.data", "--task"),
    "train": ("pipelines.train", "--task"),
    "evaluate": ("pipelines.evaluate", "--task"),
    "sample": ("pipelines.sample", "--task"),
    "frontier": ("pipelines.frontier", "--task"),
    "sweep": ("pipelines.sweep", "--task"),
    "ablate": ("pipelines.ablate", "--grid"),
    "claims": ("pipelines.claims", ""),
    "memory-scaling": ("pipelines.memory_scaling", None),
    "paper-baselines": ("pipelines.paper_baselines", None),
    "summary": ("pipelines.summary", None),
    "report": ("pipelines.report", None),
    "ui": ("swarmlab.mlflow_ui", None),  # no stage: serves the MLflow UI on the store the stages write
}
TOP_LEVEL = ("train", "augment")  # params.yaml's top-level override sections (swarmlab.drive.params.OVERRIDE_SECTIONS)
SHOWN = "params.yaml + overrides"  # how the copy is named in messages


def usage() -> str:
    lines = [__doc__.strip(), "", "commands:"]
    for name, (module, _) in COMMANDS.items():
        text = textwrap.wrap(
            first_paragraph(module), width=100, initial_indent=f"  {name:17s}", subsequent_indent=" " * 19
        )
        lines += text or [f"  {name}"]
    return "\n".join(lines)


def first_paragraph(module: str) -> str:
    """The first paragraph of a stage module's docstring, whole, without importing it (some import torch)."""
    path = Path(__file__).resolve().parents[1] / (module.replace(".", "/") + ".py")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    body = text.split('"""', 2)[1] if text.count('"""') >= 2 else ""
    return " ".join(body.strip().split("\n\n")[0].split())


OVERRIDE = re.compile(r"([A-Za-z_][A-Za-z0-9_*]*(?:\.[A-Za-z0-9_*]+)*)=(.*)", re.S)


def split_words(words: list[str], takes_task: bool) -> tuple[str | None, dict[str, str], list[str]]:
    """``(task, overrides, flags)``: the first word when the command takes a task and it is neither a flag nor an
    override; every ``dotted.key=value`` word; everything else in order (flags and their values, for the stage).
    A flag's value that looks like an override can be passed as ``--flag=value``."""
    task = None
    if takes_task and words and not words[0].startswith("-") and not OVERRIDE.fullmatch(words[0]):
        task, words = words[0], words[1:]
    overrides, flags = {}, []
    for word in words:
        match = None if word.startswith("-") else OVERRIDE.fullmatch(word)
        if match:
            if match.group(1) in overrides:
                raise SwarmlabError(
                    f"{match.group(1)} is set twice ({overrides[match.group(1)]!r}, {match.group(2)!r})"
                )
            overrides[match.group(1)] = match.group(2)
        else:
            flags.append(word)
    return task, overrides, flags


FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def parse_value(key: str, text: str):
    """A YAML value, where ``3e-4`` is a number as in YAML 1.2 and DVC's ``-S`` (PyYAML's YAML 1.1 reads a string)."""
    try:
        value = yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError as exc:
        raise SwarmlabError(f"{key}={text}: not a YAML value ({str(exc).splitlines()[0]})") from None
    return float(text) if isinstance(value, str) and FLOAT.fullmatch(text.strip()) else value


def with_overrides(raw: dict, profile: str, overrides: dict[str, str]) -> dict:
    """``raw`` (params.yaml as read) with each override set: ``train.*`` / ``augment.*`` at the top level, anything
    else under ``profiles.<profile>``; the loader checks them as it checks the file."""
    out = json.loads(json.dumps(raw))  # a deep copy of plain YAML data
    for key, text in overrides.items():
        parts = key.split(".")
        if any(not p for p in parts):
            raise SwarmlabError(f"{key}={text}: an empty part in the key")
        target = out if parts[0] in TOP_LEVEL else out.setdefault("profiles", {}).setdefault(profile, {}) or {}
        if parts[0] not in TOP_LEVEL and out["profiles"][profile] is None:
            out["profiles"][profile] = target
        for part in parts[:-1]:
            child = target.get(part)
            if child is None:
                child = target[part] = {}
            elif not isinstance(child, dict):
                raise SwarmlabError(f"{key}={text}: {part} holds a value, not a section")
            target = child
        target[parts[-1]] = parse_value(key, text)
    return out


def stage_argv(command: str, task: str | None, flags: list[str], special: dict, params_file: str | None) -> list[str]:
    _, task_flag = COMMANDS[command]
    argv = []
    if task is not None:
        argv += [task] if task_flag == "" else [task_flag, task]
    if special.get("profile"):
        argv += ["--profile", special["profile"]]
    if special.get("models"):
        argv += ["--models", special["models"]]
    if params_file:
        argv += ["--params", params_file]
    return argv + flags


def outside_checkout(cwd: Path, root: Path = REPO_ROOT) -> str | None:
    """Why a command may not run in ``cwd``: its paths are those of the checkout ``root`` this code is in (the one
    the console script was installed from), so from a folder outside it a command would read and write that
    checkout's params.yaml, data/ and reports/ while the user looks at another folder."""
    cwd, root = Path(cwd).resolve(), Path(root).resolve()
    if cwd == root or root in cwd.parents:
        return None
    return (
        f"this command runs the checkout at {root} (its params.yaml, data/ and reports/), and {cwd} is outside it: "
        f"cd into {root}, or, in another checkout, run its own code with `python -m pipelines.cli ...` (or install "
        "it: bash scripts/setup.sh)"
    )


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] in ("-h", "--help", "help"):
        try:
            print(usage(), flush=True)
        except BrokenPipeError:  # `swarmlab --help | head`
            sys.stderr.close()
        return 0
    elsewhere = outside_checkout(Path.cwd())
    if elsewhere:
        print(f"error: {elsewhere}", file=sys.stderr)
        return 2
    command, rest = words[0], words[1:]
    if command not in COMMANDS:
        close = difflib.get_close_matches(command, list(COMMANDS), n=2)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        print(f"error: unknown command {command!r}{hint} (commands: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    module, task_flag = COMMANDS[command]
    try:
        task, overrides, flags = split_words(rest, takes_task=task_flag is not None)
        special = {
            "profile": overrides.pop("profile", None),
            "models": overrides.pop("model", None) or overrides.pop("models", None),
        }
        if special["models"] is not None and command not in ("train", "evaluate", "sweep", "frontier"):
            raise SwarmlabError(f"model= is for train, evaluate, sweep and frontier, not {command}")
        params_file = None
        tmp = tempfile.TemporaryDirectory(prefix="swarmlab-overrides-") if overrides else None
        if overrides:
            params_file = write_overrides(Path(tmp.name), overrides, special["profile"])
    except SwarmlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stage = importlib.import_module(module)
    try:
        rc = stage.main(stage_argv(command, task, flags, special, params_file))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return rc if isinstance(rc, int) else 0  # a stage returns None; `ui` the server's exit status


def write_overrides(folder: Path, overrides: dict[str, str], profile: str | None) -> str:
    """params.yaml with the overrides, in ``folder``; checked here by the loader the stages use, so that a bad key
    is one line naming the override, not the copy."""
    from swarmlab.drive.params import load_params, read_yaml

    raw = read_yaml(PARAMS_FILE)
    name = profile or raw.get("profile")
    if not isinstance(raw.get("profiles"), dict) or name not in raw["profiles"]:
        known = sorted(raw.get("profiles") or {})
        raise SwarmlabError(f"unknown profile {name!r}; choose one of {known}")
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(with_overrides(raw, name, overrides), sort_keys=False))
    try:
        load_params(path, name)
    except SwarmlabError as exc:
        raise SwarmlabError(str(exc).replace(str(path), SHOWN)) from None
    # MLflow run names and tags say what was overridden (swarmlab.tracking.run_context), as they do for `-S`
    if not os.environ.get("DVC_EXP_NAME"):
        os.environ["SWARMLAB_RUN_CONTEXT"] = json.dumps(
            {"params_overrides": " ".join(f"{k}={v}" for k, v in overrides.items())}
        )
    return str(path)


if __name__ == "__main__":
    sys.exit(main())
