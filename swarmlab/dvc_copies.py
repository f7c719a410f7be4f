"""DVC's queued and temporary experiments (``dvc exp run --temp``, ``--queue``, ``dvc queue start -j N``) run in a
copy of the repository: ``<repo>/.dvc/tmp/exps/<tmp>/`` (the queue's workers) or
``<repo>/.dvc/tmp/exps/standalone/<tmp>/`` (``--temp``). Two things the stages read lie outside the repository, by a
path relative to it, and must resolve from a copy too (issue 38, item 1):

* the shared datasets (``paths.datasets``, default ``../shared/datasets``): DVC itself checks them as a stage's
  dependency (``${paths.datasets}/imdb``) before it runs the stage, relative to the copy, where ``../shared`` is
  ``<repo>/.dvc/tmp/exps/shared`` (or ``.../exps/standalone/shared``). ``python -m swarmlab.dvc_copies`` (run by
  scripts/setup.sh) makes both links to the repository's own ``../shared``, so DVC sees the same files, with the same
  hashes, from every copy, and a stage it already ran in the workspace is up to date there as well;
* the MLflow store (``sqlite:///<repo>/mlruns.db``): a copy's own store is thrown away with the copy, so the stages
  resolve the default store, and a relative datasets path, against the repository the copy was made from
  (``swarmlab.paths.home_root``).

Run it again after changing ``paths.datasets`` to another relative folder; an absolute one needs no link.

    python -m swarmlab.dvc_copies [--params params.yaml]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path, PurePosixPath

import yaml

from swarmlab.errors import SwarmlabError, cli
from swarmlab.paths import COPIES, PARAMS_FILE, REPO_ROOT


def copy_links(configured: str, root: Path = REPO_ROOT) -> list[tuple[Path, Path]]:
    """``[(link, target)]``: for each place DVC makes its copies, the folder a copy reaches by the relative path
    ``configured``, and the folder the workspace reaches by it, to be linked; none when both reach the same (an
    absolute path) or the copy has the folder itself (a path inside the repository, under git or DVC)."""
    if Path(configured).expanduser().is_absolute():
        return []
    parts = PurePosixPath(configured).parts
    ups = next((i for i, part in enumerate(parts) if part != ".."), len(parts))
    rest = parts[ups:]
    if ups == 0 and ".." not in rest:
        return []
    shallowest = min(len(c) for c in COPIES) + 1  # a copy: <root>/.dvc/tmp/exps/<tmp>/
    if not rest or ".." in rest or ups >= shallowest:
        raise SwarmlabError(
            f"paths.datasets {configured!r}: DVC's copies under {root.joinpath(*COPIES[0])} cannot be given the same "
            f"folder; write it as ../<folder>/... (at most {shallowest - 1} levels up) or as an absolute path"
        )
    target = (root / Path(*parts[: ups + 1])).resolve()
    return [(root.joinpath(*(*copies, "<tmp>")[: len(copies) + 1 - ups], rest[0]), target) for copies in COPIES]


def make_links(params_file: Path = PARAMS_FILE, root: Path = REPO_ROOT) -> list[str]:
    """Make (or mend) the links that let DVC's copies see ``paths.datasets`` as DVC's dependencies name it
    (``${paths.datasets}/...`` in dvc.yaml); one line per link, saying what was done."""
    configured = str(((yaml.safe_load(params_file.read_text()) or {}).get("paths") or {}).get("datasets", ""))
    if not configured:
        raise SwarmlabError(f"{params_file} sets no paths.datasets")
    found = copy_links(configured, root)
    if not found:
        return [f"paths.datasets {configured} reads the same from DVC's copies: no link needed"]
    done = []
    for link, target in found:
        if not target.is_dir():
            raise SwarmlabError(f"{target} does not exist: it is paths.datasets ({configured}) of {root}")
        if link.is_symlink() and Path(os.readlink(link)) == target:
            done.append(f"{link.relative_to(root)} -> {target} (already there)")
            continue
        if link.is_symlink():
            link.unlink()
        elif link.exists():
            raise SwarmlabError(f"{link} exists and is no link: move it, then run python -m swarmlab.dvc_copies again")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
        done.append(f"{link.relative_to(root)} -> {target}")
    return done


@cli
def main(argv: list[str] | None = None) -> None:
    description, _, epilog = (__doc__ or "").partition("\n\n")
    parser = argparse.ArgumentParser(
        description=description, epilog=epilog.rstrip(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--params", type=Path, default=PARAMS_FILE, help="params file (default: params.yaml)")
    args = parser.parse_args(argv)
    print("\n".join(make_links(args.params)))


if __name__ == "__main__":
    main()
