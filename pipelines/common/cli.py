"""Arguments every stage shares: --params, --profile."""

from __future__ import annotations

import argparse

from pipelines.common.params import load_params


def stage_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default=None, help="params file (default: params.yaml at the repo root)")
    parser.add_argument("--profile", default=None, help="profile to use (default: the file's `profile` key)")
    return parser


def params_from(args: argparse.Namespace) -> dict:
    """The resolved params of ``--params``/``--profile``, after the environment variables are checked."""
    from pipelines.common.sections import check_environment

    check_environment()
    return load_params(args.params, args.profile)
