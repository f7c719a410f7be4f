"""Arguments every stage shares: --params, --profile, --task; and the stage's ``--help`` made from its docstring."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import yaml

from swarmlab.drive.params import load_params
from swarmlab.drive.sections import check_environment
from swarmlab.paths import PARAMS_FILE


def help_parts(doc: str) -> tuple[str, str]:
    """A stage docstring's first paragraph, whole (the description), and its indented command lines (the examples)."""
    paragraphs = textwrap.dedent(doc).strip().split("\n\n")
    description = textwrap.fill(" ".join(line.strip() for line in paragraphs[0].splitlines()), width=100)
    examples = [line for line in doc.splitlines() if line.startswith("    ") and "python -m " in line]
    epilog = "examples:\n" + textwrap.indent(textwrap.dedent("\n".join(examples)), "  ") if examples else ""
    return description, epilog


def stage_parser(doc: str) -> argparse.ArgumentParser:
    """The stage's parser: its docstring's first paragraph as the description, its command lines as examples."""
    description, epilog = help_parts(doc)
    parser = argparse.ArgumentParser(
        description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--params", default=None, help="params file (default: params.yaml at the repo root)")
    parser.add_argument("--profile", default=None, help="profile to use (default: the file's `profile` key)")
    return parser


def task_keys(params_file: Path = PARAMS_FILE) -> list[str]:
    """The task sections of params.yaml (``defaults.tasks``), for ``--help``; empty when the file cannot be read."""
    try:
        return list(yaml.safe_load(params_file.read_text())["defaults"]["tasks"])
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return []


def add_task_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--task``: the ``tasks.<task>`` section ``what`` is done for, the sections of params.yaml listed."""
    keys = task_keys()
    choices = f": one of {', '.join(keys)}" if keys else ""
    parser.add_argument(
        "--task", default=None, help=f"task section (tasks.<task>) {what}{choices} (default: params `task`)"
    )


def add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    """``--parallel`` and ``--address``: how a stage's runs are scheduled (never what they compute)."""
    parser.add_argument(
        "--parallel",
        type=int,
        default=None,
        help="runs at once (default: schedule.parallel); 1 = one after "
        "another in this process; 0 = as many as Ray's resources hold",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to fan the runs out to, e.g. 127.0.0.1:6379 or auto "
        "(default: $RAY_ADDRESS, else schedule.address, else a local Ray)",
    )


def params_from(args: argparse.Namespace) -> dict:
    """The resolved params of ``--params``/``--profile``, after the environment variables are checked."""
    check_environment()
    return load_params(args.params, args.profile)
