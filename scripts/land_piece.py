"""Land a claims piece that ran in a clone of this repository into this checkout: its results, its entry of
``claims/dvc.lock``, its test reads and its console log, after checks that nothing made since the clone's commit is
lost or overwritten.

    python scripts/land_piece.py <clone> [--log <console log>] [--into <checkout>] [--dry-run]

A claims piece (``bash scripts/claims.sh task|grid|sweep <name>``) runs in a clone of its own (docs/reports.md), and
it changes only what a piece writes: ``reports/claims/`` (its results), ``claims/dvc.lock`` (its stages' entries),
``reports/test_reads.jsonl`` (one line per read of a test split, appended) and ``claims/parked/`` (restored parked
work dropped, or this session's work parked by ``scripts/park.py save``). Several pieces may run from one commit
(on more cores, or one after another while main moves on), so each lands on its own:

- the clone's commit must be in this checkout's history, and the clone may change nothing but those paths (a code
  change in a piece's clone would be results made by code that is not committed);
- the test-read log of the clone and of this checkout must both extend the one at the clone's commit: the clone's new
  lines are appended after this checkout's (the log is append-only, and a line already here is refused: landed twice);
- each ``claims/dvc.lock`` stage entry the clone changed replaces this checkout's, which must still be the one at the
  clone's commit (else two pieces wrote one stage: refused); entries are merged as the text DVC wrote, block by block;
- every other file the clone changed, added or removed must be unchanged here since the clone's commit (committed or
  not), and is copied over (or removed);
- ``--log``: the piece's console log goes to ``claims/logs/<kind>_<name>.log`` (``--log-as`` names it), the name
  taken from the one task, grid or sweep entry the clone changed (a task piece's ``sample@`` and ``sweep@`` entries
  go with its ``task@``).

Every check runs before anything is written (one line, exit 2). Then regenerate the report and commit:
``dvc repro -s -f report``, ``git add reports claims dvc.lock``. Nothing here is a stage's code: landing changes no
fingerprint and no DVC dependency.

    python scripts/land_piece.py <clone> --follow [--into <checkout>] [--dry-run]

A piece still running in its clone (a grid that parks a point while the next one trains) lands what it has finished
like any piece; once that landing is committed here, ``--follow`` moves the clone's HEAD to this checkout's commit,
its working tree kept (its work folder, the work it has not landed), so that its next finished part lands on top of
the first (a second landing from the old commit is refused: landed twice). Refused, before anything moves, when this
checkout has uncommitted changes, when a commit since the clone's changed anything but what a landing and the report
write (code, params: the running piece is its commit's work; land the rest from a fresh clone), when the clone's
test-read log does not extend this checkout's (another piece's reads landed since), or when a file the clone changed
differs from both commits' versions.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from swarmlab.errors import SwarmlabError, cli  # noqa: E402
from swarmlab.io import atomic_write_text  # noqa: E402

LOCK = "claims/dvc.lock"
READS = "reports/test_reads.jsonl"
LOGS = "claims/logs"
PIECE_DIRS = ("reports/claims/", "claims/parked/")  # what a piece writes besides the lock and the log
KINDS = ("task", "grid", "sweep")  # a piece's kinds, in the order that names its log (task@x runs sweep@x first)
STAGE_LINE = re.compile(r"^  (\S.*):\s*$")  # a stage's first line in a DVC lock file: two spaces, its name, a colon


def git(repo: Path, *args: str) -> str:
    """``git -C repo args``' stdout; a failure is a SwarmlabError naming the command."""
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SwarmlabError(f"git -C {repo} {' '.join(args)} failed: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def worktree_changes(repo: Path) -> dict[str, bool]:
    """The files ``repo``'s working tree changed against its HEAD (untracked ones included, ignored ones not): path ->
    whether it was removed."""
    out = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    changes = {}
    for entry in filter(None, out.split("\0")):
        status, path = entry[:2], entry[3:]
        changes[path] = "D" in status
    return changes


def blob(repo: Path, commit: str, path: str) -> bytes | None:
    """The bytes of ``path`` at ``commit``; None where the commit has no such file."""
    out = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True)
    return out.stdout if out.returncode == 0 else None


def show(repo: Path, commit: str, path: str) -> str | None:
    """The text of ``path`` at ``commit``; None where the commit has no such file."""
    data = blob(repo, commit, path)
    return None if data is None else data.decode()


def lock_blocks(text: str, where: str) -> tuple[str, dict[str, str]]:
    """A DVC lock file's text split into its header (to ``stages:``, inclusive) and its stage entries, each the text
    DVC wrote for it, in order."""
    lines = text.splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == "stages:") + 1
    except StopIteration:
        raise SwarmlabError(f"{where} is not a DVC lock file (no 'stages:' line)") from None
    blocks: dict[str, str] = {}
    name = None
    for line in lines[start:]:
        match = STAGE_LINE.match(line)
        if match:
            name = match.group(1).strip("'\"")
            blocks[name] = ""
        elif name is None:
            raise SwarmlabError(f"{where}: a line before the first stage entry: {line.strip()!r}")
        blocks[name] += line
    return "".join(lines[:start]), blocks


@dataclass
class Landing:
    """What landing one clone writes into a checkout, computed and checked before anything is written."""

    clone: Path
    into: Path
    base: str
    copies: list[str] = field(default_factory=list)  # files copied from the clone
    removals: list[str] = field(default_factory=list)  # files removed (the clone removed them)
    landed: list[str] = field(default_factory=list)  # files already here as the clone has them: left alone
    stages: list[str] = field(default_factory=list)  # claims/dvc.lock entries the clone changed
    lock_text: str | None = None  # the merged lock, when the clone changed an entry
    new_reads: list[str] = field(default_factory=list)  # test-read lines the clone appended
    reads_text: str | None = None

    def piece(self) -> str | None:
        """``<kind>_<name>`` of the piece the clone ran, from the lock entries it changed (None if none)."""
        for kind in KINDS:
            names = sorted(s.split("@", 1)[1] for s in self.stages if s.startswith(f"{kind}@"))
            if len(names) > 1:
                raise SwarmlabError(
                    f"the clone changed {len(names)} {kind} entries of {LOCK} ({', '.join(names)}): name its log "
                    "with --log-as <kind>_<name>"
                )
            if names:
                return f"{kind}_{names[0]}"
        return None


def plan(clone: Path, into: Path) -> Landing:
    """Check that ``clone``'s piece can land in ``into`` and compute what it writes; refuses, in one line, whatever
    would lose or overwrite work (module docstring)."""
    for repo, what in ((clone, "clone"), (into, "checkout")):
        if not (repo / "params.yaml").is_file() or not (repo / ".git").exists():
            raise SwarmlabError(f"the {what} {repo} is not a swarmlab git checkout (no params.yaml or .git)")
    if clone.resolve() == into.resolve():
        raise SwarmlabError(f"the clone and the checkout are both {into}: land a clone into the checkout it came from")
    base = git(clone, "rev-parse", "HEAD").strip()
    ancestor = subprocess.run(["git", "-C", str(into), "merge-base", "--is-ancestor", base, "HEAD"])
    if ancestor.returncode != 0:
        raise SwarmlabError(
            f"the clone's commit {base[:10]} is not in {into}'s history: run pieces in clones of this checkout's "
            "commits (a piece's results name the commit that made them)"
        )
    landing = Landing(clone=clone, into=into, base=base)
    changed = worktree_changes(clone)
    foreign = sorted(p for p in changed if p not in (LOCK, READS) and not p.startswith(PIECE_DIRS))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise SwarmlabError(
            f"the clone {clone} changed files a piece does not write: {shown}. A piece's results must come from "
            "committed code: commit such a change on main and run the piece again"
        )
    moved_here = set(filter(None, git(into, "diff", "--name-only", "--no-renames", base, "HEAD").splitlines()))
    moved_here |= set(worktree_changes(into))
    for path, removed in sorted(changed.items()):
        if path in (LOCK, READS):
            continue
        here = landing.into / path
        if path in moved_here and (not here.exists() if removed else _same(here, clone / path)):
            landing.landed.append(path)  # here already as the clone has it (landed before, or made alike)
            continue
        if path in moved_here:
            raise SwarmlabError(
                f"{path} changed in {into} since the clone's commit {base[:10]} and in the clone too: two pieces "
                "wrote one file; land neither blindly (compare them by hand)"
            )
        (landing.removals if removed else landing.copies).append(path)
    if LOCK in changed:
        _merge_lock(landing)
    if READS in changed:
        _append_reads(landing)
    if changed and not (landing.copies or landing.removals or landing.stages or landing.new_reads):
        raise SwarmlabError(f"everything the clone {clone} changed is already in {into} as the clone has it: landed")
    return landing


def _same(a: Path, b: Path) -> bool:
    return a.is_file() and b.is_file() and a.read_bytes() == b.read_bytes()


def _merge_lock(landing: Landing) -> None:
    """The clone's changed entries of claims/dvc.lock put into this checkout's, entry by entry."""
    base_text = show(landing.clone, landing.base, LOCK)
    _, base = lock_blocks(base_text, f"{LOCK} at {landing.base[:10]}") if base_text is not None else ("", {})
    _, theirs = lock_blocks((landing.clone / LOCK).read_text(), f"{landing.clone / LOCK}")
    here_path = landing.into / LOCK
    head, ours = (
        lock_blocks(here_path.read_text(), str(here_path)) if here_path.is_file() else ("schema: '2.0'\nstages:\n", {})
    )
    merged = dict(ours)
    for name in [*theirs, *(n for n in base if n not in theirs)]:
        if theirs.get(name) == base.get(name):
            continue
        landing.stages.append(name)
        if ours.get(name) == theirs.get(name):
            raise SwarmlabError(f"{LOCK}: the entry {name} here is already the clone's: this piece has landed")
        if ours.get(name) != base.get(name):
            raise SwarmlabError(
                f"{LOCK}: the entry {name} changed in {landing.into} since the clone's commit {landing.base[:10]} "
                "and in the clone too: two runs of one stage; keep one by hand"
            )
        if name in theirs:
            merged[name] = theirs[name]
        else:
            merged.pop(name, None)
    text = head + "".join(merged.values())
    expected = yaml.safe_load(head + "".join(ours.values())) or {}
    expected.setdefault("stages", {})
    their_stages = (yaml.safe_load((landing.clone / LOCK).read_text()) or {}).get("stages") or {}
    for name in landing.stages:
        if name in their_stages:
            expected["stages"][name] = their_stages[name]
        else:
            expected["stages"].pop(name, None)
    if yaml.safe_load(text) != expected:  # the text merge must be the entry-by-entry merge DVC would read
        raise SwarmlabError(f"{LOCK}: merging the entries as text does not give the merged entries; merge by hand")
    landing.lock_text = text


def _append_reads(landing: Landing) -> None:
    """The clone's new lines of the test-read log appended after this checkout's, both checked to extend the log at
    the clone's commit."""
    base = show(landing.clone, landing.base, READS) or ""
    theirs = (landing.clone / READS).read_text()
    here_path = landing.into / READS
    ours = here_path.read_text() if here_path.is_file() else ""
    for text, where in ((theirs, f"the clone's {READS}"), (ours, f"{here_path}")):
        if not text.startswith(base):
            raise SwarmlabError(
                f"{where} does not begin with the log at the clone's commit {landing.base[:10]}: the log is "
                "append-only, and a rewritten one cannot be merged"
            )
    new = theirs[len(base) :].splitlines(keepends=True)
    if new and not new[-1].endswith("\n"):
        new[-1] += "\n"
    already = set(ours.splitlines())
    if any(line.rstrip("\n") in already for line in new):
        raise SwarmlabError(f"{here_path} already holds the clone's new test reads: this piece has landed")
    landing.new_reads = new
    if ours and not ours.endswith("\n"):
        ours += "\n"
    landing.reads_text = ours + "".join(new)


def land(landing: Landing, log: Path | None = None, log_as: str | None = None) -> list[str]:
    """Write what ``plan`` checked; the paths written, relative to the checkout."""
    written = []
    if log is not None:
        name = log_as or landing.piece()
        if name is None:
            raise SwarmlabError(f"the clone changed no task, grid or sweep entry of {LOCK}: name the log with --log-as")
        log_dest = Path(LOGS) / f"{name.removesuffix('.log')}.log"
    for path in landing.copies:
        dest = landing.into / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(landing.clone / path, dest)
        written.append(path)
    for path in landing.removals:
        dest = landing.into / path
        dest.unlink(missing_ok=True)
        for parent in dest.parents:  # the folders the removal emptied
            if parent == landing.into or any(parent.iterdir()):
                break
            parent.rmdir()
        written.append(path)
    if landing.lock_text is not None:
        atomic_write_text(landing.into / LOCK, landing.lock_text)
        written.append(LOCK)
    if landing.reads_text is not None:
        atomic_write_text(landing.into / READS, landing.reads_text)
        written.append(READS)
    if log is not None:
        (landing.into / LOGS).mkdir(parents=True, exist_ok=True)
        shutil.copy2(log, landing.into / log_dest)
        written.append(str(log_dest))
    return written


FOLLOW_OK = (*PIECE_DIRS, f"{LOGS}/", "docs/", "reports/report/")  # what a landing and its report commit may change
FOLLOW_OK_FILES = (LOCK, READS, "dvc.lock", "reports/REPORT.md", "reports/report.html", "README.md")


def follow(clone: Path, into: Path, *, dry_run: bool = False) -> list[str]:
    """Move ``clone``'s HEAD to ``into``'s commit, which committed what the clone had finished, keeping the clone's
    working tree (module docstring); the paths brought to the new commit's version (the clone never wrote them)."""
    base = git(clone, "rev-parse", "HEAD").strip()
    head = git(into, "rev-parse", "HEAD").strip()
    if base == head:
        raise SwarmlabError(f"the clone {clone} is at {into}'s commit {head[:10]} already: nothing to follow")
    if subprocess.run(["git", "-C", str(into), "merge-base", "--is-ancestor", base, head]).returncode != 0:
        raise SwarmlabError(f"the clone's commit {base[:10]} is not in {into}'s history: it cannot follow {head[:10]}")
    dirty = sorted(worktree_changes(into))
    if dirty:
        raise SwarmlabError(
            f"{into} has uncommitted changes ({', '.join(dirty[:3])}{' ...' if len(dirty) > 3 else ''}): commit the "
            "landing first, then follow it"
        )
    moved = sorted(filter(None, git(into, "diff", "--name-only", "--no-renames", base, head).splitlines()))
    foreign = [p for p in moved if p not in FOLLOW_OK_FILES and not p.startswith(FOLLOW_OK)]
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise SwarmlabError(
            f"{into} changed {shown} since the clone's commit {base[:10]}: the piece running in the clone is that "
            "commit's work, and cannot follow a change of code or settings; let it finish there, or run the rest in "
            "a fresh clone"
        )
    take: dict[str, bool] = {}  # path -> whether the new commit removed it
    for path in moved:
        here_path = clone / path
        here = here_path.read_bytes() if here_path.is_file() else None
        at_head = blob(into, head, path)
        if path == READS:
            if not (here or b"").startswith(at_head or b""):
                raise SwarmlabError(
                    f"the clone's {READS} does not begin with {into}'s at {head[:10]} (reads landed since from "
                    "elsewhere): land the clone's reads first, or let its piece finish and land it whole"
                )
            continue
        if here == at_head:
            continue  # landed: the clone has it as the commit does
        if here == blob(clone, base, path):
            # the clone never wrote it (the report, the docs, the log): the new commit's version
            take[path] = at_head is None
            continue
        raise SwarmlabError(
            f"{path} in the clone differs from both {base[:10]}'s and {head[:10]}'s: it changed since it landed; land "
            "it first"
        )
    if dry_run:
        return list(take)
    git(clone, "fetch", "-q", str(into), "HEAD")
    fetched = git(clone, "rev-parse", "FETCH_HEAD").strip()
    if fetched != head:
        raise SwarmlabError(f"{into} moved to {fetched[:10]} while following {head[:10]}: follow again")
    git(clone, "reset", "-q", "--mixed", head)
    for path, removed in take.items():
        if removed:
            (clone / path).unlink(missing_ok=True)
        else:
            git(clone, "checkout", head, "--", path)
    return list(take)


def describe(landing: Landing) -> str:
    stages = ", ".join(landing.stages) or "none"
    return (
        f"clone {landing.clone} at {landing.base[:10]}: {len(landing.copies)} file(s) to copy, "
        f"{len(landing.removals)} to remove, {LOCK} entries: {stages}, {len(landing.new_reads)} new test read(s)"
    )


@cli
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("clone", help="the clone that ran the piece (bash scripts/claims.sh ...)")
    parser.add_argument("--into", default=str(REPO), help="the checkout to land it in (default: this one)")
    parser.add_argument("--log", default=None, help="the piece's console log, kept in claims/logs/")
    parser.add_argument("--log-as", default=None, help="its name there (default: <kind>_<name> of the piece)")
    parser.add_argument("--dry-run", action="store_true", help="check and say what would land; write nothing")
    parser.add_argument(
        "--follow",
        action="store_true",
        help="move the clone (its piece still running) to this checkout's commit, which committed its landing",
    )
    args = parser.parse_args(argv)
    clone, into = Path(args.clone).resolve(), Path(args.into).resolve()
    if args.follow:
        if args.log or args.log_as:
            raise SwarmlabError("--follow lands nothing: it takes no --log or --log-as")
        base = git(clone, "rev-parse", "HEAD").strip()
        take = follow(clone, into, dry_run=args.dry_run)
        head = git(into, "rev-parse", "HEAD").strip()
        verb = "would move" if args.dry_run else "moved"
        print(f"{verb} the clone {clone} from {base[:10]} to {head[:10]}, {len(take)} file(s) it never wrote updated")
        return
    log = Path(args.log) if args.log else None
    if log is not None and not log.is_file():
        raise SwarmlabError(f"--log {log}: no such file")
    if args.log_as is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", args.log_as):
        raise SwarmlabError(f"--log-as {args.log_as!r}: a file name of letters, digits, '_', '.' and '-'")
    landing = plan(clone, into)
    if log is not None and args.log_as is None:
        landing.piece()  # a clone that changed two grids' entries is refused before anything is written
        if landing.piece() is None:
            raise SwarmlabError(f"the clone changed no task, grid or sweep entry of {LOCK}: name the log with --log-as")
    print(describe(landing))
    if args.dry_run:
        return
    written = land(landing, log, args.log_as)
    print(
        f"landed {len(written)} path(s) in {into}. Next: dvc repro -s -f report, then git add reports claims dvc.lock "
        "and commit (say how the piece ran)"
    )


if __name__ == "__main__":
    main()
