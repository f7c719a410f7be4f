"""The code dependencies of every DVC stage, generated from what its command imports (issue 36), so that no list of
files is kept by hand and DVC reruns exactly the stages a code change touches.

    python -m swarmlab.dvcdeps            rewrite the code deps of dvc.yaml, sweeps/dvc.yaml and claims/dvc.yaml
    python -m swarmlab.dvcdeps --check    exit 1, naming each stage whose declared code deps are not the generated ones

A stage's code is every repository file its command's module imports, transitively, including imports inside
functions (``ast``, no import is executed), and:

* a registry (``tasks/registry.py``, ``models/registry.py``) imports every module of its package on the first lookup
  (swarmlab/registry.py): reaching it means the whole package;
* a stage that runs other stages as subprocesses names them in a ``STAGE_MODULES`` constant (pipelines/claims.py,
  pipelines/ablate.py): their code is its code too.

A folder whose every ``.py`` file is in the set is written as the folder (``models``, ``swarmlab/engine``), the rest
file by file; what a stage reads besides code (data folders, ``${...}`` paths) stays as written, after the code.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from swarmlab.paths import REPO_ROOT

PIPELINES = ("dvc.yaml", "sweeps/dvc.yaml", "claims/dvc.yaml")
CODE_ROOTS = ("pipelines", "swarmlab", "models", "tasks")
REGISTRIES = {"tasks/registry.py": "tasks", "models/registry.py": "models"}


def module_file(name: str, root: Path = REPO_ROOT) -> Path | None:
    """The repository file that ``import name`` runs, if it is ours."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _package_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def stage_modules(path: Path) -> list[str]:
    """The stages a module runs as subprocesses: its ``STAGE_MODULES`` constant (a tuple, or a dict of tuples)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "STAGE_MODULES" for t in node.targets):
            value = ast.literal_eval(node.value)
            names = [m for v in value.values() for m in v] if isinstance(value, dict) else list(value)
            return sorted(set(names))
    return []


def imported_files(entry: Path, root: Path = REPO_ROOT) -> set[Path]:
    """Every repository file ``entry`` imports, transitively (see the module docstring)."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        rel = path.relative_to(root).as_posix()
        if rel in REGISTRIES:
            todo += _package_files(root / REGISTRIES[rel])
        if rel.startswith("pipelines/"):
            todo += [f for f in (module_file(f"pipelines.{m}", root) for m in stage_modules(path)) if f]
        package = ".".join(path.relative_to(root).with_suffix("").parts)
        package = package.removesuffix(".__init__") if path.name == "__init__.py" else package.rpartition(".")[0]
        names = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(p for p in [*parent, base] if p)
                names += [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__.py and a/b/__init__.py too
                found = module_file(".".join(parts[:i]), root)
                if found is not None:
                    todo.append(found)
    return seen


def entry_file(cmd: str, root: Path = REPO_ROOT) -> Path:
    m = re.match(r"python (?:-m (\S+)|(\S+\.py))", cmd)
    if not m:
        raise ValueError(f"unexpected stage command {cmd!r}: python -m <module> or python <file>.py")
    found = module_file(m.group(1), root) if m.group(1) else root / m.group(2)
    if found is None or not found.is_file():
        raise ValueError(f"stage command {cmd!r}: no such module or file")
    return found


def code_deps(cmd: str, root: Path = REPO_ROOT) -> list[str]:
    """The generated code deps of a stage running ``cmd``: whole folders where every file is imported."""
    entries = [entry_file(cmd, root)]
    m = re.match(r"python -m (\S+)", cmd)
    if m:  # `python -m a.b` runs a/__init__.py first
        parts = m.group(1).split(".")
        entries += [f for f in (module_file(".".join(parts[:i]), root) for i in range(1, len(parts))) if f]
    files = {p.relative_to(root).as_posix() for e in entries for p in imported_files(e, root)}
    folders = sorted(
        {
            p.relative_to(root).as_posix()
            for top in CODE_ROOTS
            for p in [root / top, *(d for d in (root / top).rglob("*") if d.is_dir() and "__pycache__" not in d.parts)]
            if p.is_dir() and _package_files(p)
        },
        key=lambda f: f.count("/"),
    )
    chosen: list[str] = []
    for folder in folders:  # the outermost folders first
        if any(folder == c or folder.startswith(c + "/") for c in chosen):
            continue
        inside = {p.relative_to(root).as_posix() for p in _package_files(root / folder)}
        if inside <= files:
            chosen.append(folder)
    rest = [f for f in files if not any(f.startswith(c + "/") for c in chosen)]
    order = {top: i for i, top in enumerate(CODE_ROOTS)}
    return sorted(chosen + rest, key=lambda d: (order.get(d.split("/")[0], len(order)), d))


def is_code(dep: str, root: Path = REPO_ROOT) -> bool:
    """A code dep: a ``.py`` file or a folder under the code roots. A data file kept beside the code (claims.yaml,
    paper_baselines.yaml) is something a stage reads: it stays as written."""
    if dep.startswith("${") or dep.split("/")[0] not in CODE_ROOTS:
        return False
    return dep.endswith(".py") or (root / dep).is_dir()


def _deps_blocks(lines: list[str]):
    """(start, end, cmd) of each ``deps:`` block: the lines of its entries, and the stage command above it."""
    cmd = None
    i = 0
    while i < len(lines):
        m = re.match(r"^\s+cmd:\s*(.+?)\s*$", lines[i])
        if m:
            cmd = m.group(1)
        if re.match(r"^\s+deps:", lines[i]):
            j = i + 1
            while j < len(lines) and re.match(r"^\s+- ", lines[j]):
                j += 1
            yield i + 1, j, cmd
            i = j
            continue
        i += 1


def _entry(line: str) -> str:
    return re.sub(r"\s+#.*$", "", line).strip()[2:].strip()


def regenerate(text: str, root: Path = REPO_ROOT) -> tuple[str, list[str]]:
    """``text`` (a dvc.yaml) with every stage's code deps generated, and the commands whose deps changed."""
    lines = text.split("\n")
    out, changed, last = [], [], 0
    for start, end, cmd in _deps_blocks(lines):
        block = lines[start:end]
        indent = re.match(r"^(\s+)- ", block[0]).group(1) if block else "    "
        keep = [b for b in block if not is_code(_entry(b), root)]
        new = [f"{indent}- {d}" for d in code_deps(cmd, root)] + keep
        if [_entry(b) for b in new] != [_entry(b) for b in block]:
            changed.append(cmd)
        out += lines[last:start] + new
        last = end
    out += lines[last:]
    return "\n".join(out), changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file is not current")
    args = parser.parse_args(argv)
    stale = 0
    for name in PIPELINES:
        path = REPO_ROOT / name
        text = path.read_text()
        new, changed = regenerate(text)
        for cmd in changed:
            print(f"{name}: `{cmd}` declares other code deps than it imports", file=sys.stderr)
        stale += len(changed)
        if changed and not args.check:
            path.write_text(new)
    if args.check and stale:
        print(f"error: {stale} stage(s) not current: python -m swarmlab.dvcdeps", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
