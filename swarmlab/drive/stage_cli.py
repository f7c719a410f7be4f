"""Arguments every stage shares: --params, --profile."""

from __future__ import annotations

import argparse

from swarmlab.drive.params import load_params
from swarmlab.drive.sections import check_environment


def stage_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default=None, help="params file (default: params.yaml at the repo root)")
    parser.add_argument("--profile", default=None, help="profile to use (default: the file's `profile` key)")
    return parser


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
