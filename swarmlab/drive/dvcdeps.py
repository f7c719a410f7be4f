"""The generated parts of dvc.yaml, sweeps/dvc.yaml and claims/dvc.yaml (issue 36): every stage's code dependencies,
from what its command imports, and the task lists of the per-task stages, from params.yaml's task sections and the
task classes, so that no list of files or of task keys is kept by hand and DVC reruns exactly the stages a change
touches.

    python -m swarmlab.drive.dvcdeps            rewrite the code deps and the task lists
    python -m swarmlab.drive.dvcdeps --check    exit 1, naming each stage whose deps or task list is not the generated one

A stage's code is every repository file its command's module imports, transitively, including imports inside
functions (``ast``, no import is executed), and:

* a registry (``tasks/registry.py``, ``models/registry.py``) imports every module of its package on the first lookup
  (swarmlab/registry.py): reaching it means the whole package;
* a stage that runs other stages as subprocesses names them in a ``STAGE_MODULES`` constant (pipelines/claims.py,
  pipelines/ablate.py): their code is its code too. A dict of tuples names them per subcommand: a command whose
  first argument is one of its keys (``python -m pipelines.claims grid <name>``) runs only that key's stages, so a
  claims grid piece depends on the grid's code and not on the sweep's.

A folder whose every ``.py`` file is in the set is written as the folder (``models``, ``swarmlab/engine``), the rest
file by file; what a stage reads besides code (data folders, ``${...}`` paths) stays as written, after the code.

The task lists (``foreach:``) follow from the sections of ``defaults.tasks`` whose ``pipeline`` is true, in their
order, and from each section's task (``task_lists``):

* ``train@`` and ``evaluate@``: every such task, with its data folder (``Task.data_dir``; for a task that makes its
  data as it reads it, its module) and, for train's history plot, its validation metric (``val_<Task.monitor>``);
* ``derive@`` and ``data@``: the tasks with a ``build_data`` of their own built in one step (a task built in steps,
  ``Task.data_steps``, has a fixed stage per step: IMDB's prepare, augment, tokenize); ``data@`` those that read a
  folder of the shared datasets (``Task.data_inputs``: ``${paths.datasets}/<source>``), ``derive@`` the others, with
  what they read (another stage's folder) or else the module that makes their data;
* ``sample@``: the tasks with a ``sample`` of their own;
* sweeps/dvc.yaml's ``sweep@``: the tasks with a search space (``defaults.sweep.spaces``).

``frontier@`` is a choice, not a rule (the figure paper 003 draws): its list stays as written, checked by
tests/e2e/test_task_keys.py.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from swarmlab.errors import SwarmlabError
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


def _stage_modules_value(path: Path):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "STAGE_MODULES" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def stage_modules(path: Path, kind: str | None = None) -> list[str]:
    """The stages a module runs as subprocesses: its ``STAGE_MODULES`` constant (a tuple, or a dict of tuples: the
    tuple of ``kind`` where it is a key, else all of them)."""
    value = _stage_modules_value(path)
    if value is None:
        return []
    if isinstance(value, dict):
        names = list(value[kind]) if kind in value else [m for v in value.values() for m in v]
    else:
        names = list(value)
    return sorted(set(names))


def command_kind(cmd: str, root: Path = REPO_ROOT) -> str | None:
    """The subcommand of ``python -m <module> <kind> ...`` where the module's ``STAGE_MODULES`` is keyed by it."""
    m = re.match(r"python -m (\S+)\s+([A-Za-z_]\w*)", cmd)
    if not m:
        return None
    found = module_file(m.group(1), root)
    value = _stage_modules_value(found) if found else None
    return m.group(2) if isinstance(value, dict) and m.group(2) in value else None


def imported_files(entry: Path, root: Path = REPO_ROOT, kind: str | None = None) -> set[Path]:
    """Every repository file ``entry`` imports, transitively (see the module docstring); ``kind``: the subcommand
    ``entry`` runs (``command_kind``), which picks the stages it runs from a keyed ``STAGE_MODULES``."""
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
            runs = stage_modules(path, kind if path == entry else None)
            todo += [f for f in (module_file(f"pipelines.{m}", root) for m in runs) if f]
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
    entry, kind = entry_file(cmd, root), command_kind(cmd, root)
    entries = [entry]
    m = re.match(r"python -m (\S+)", cmd)
    if m:  # `python -m a.b` runs a/__init__.py first
        parts = m.group(1).split(".")
        entries += [f for f in (module_file(".".join(parts[:i]), root) for i in range(1, len(parts))) if f]
    files = {
        p.relative_to(root).as_posix() for e in entries for p in imported_files(e, root, kind if e == entry else None)
    }
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


def task_lists(root: Path = REPO_ROOT) -> dict[str, dict[str, dict[str, dict[str, str]]]]:
    """``{pipeline file: {stage: {task key: item}}}``: the generated ``foreach`` of every per-task stage."""
    import inspect

    import yaml

    from swarmlab.drive.params import load_params
    from swarmlab.drive.runs import make_task
    from tasks import task_class
    from tasks.base import Task

    sections = yaml.safe_load((root / "params.yaml").read_text())["defaults"]
    params = load_params(root / "params.yaml")
    keys = [key for key, section in sections["tasks"].items() if (section or {}).get("pipeline", True)]
    lists: dict[str, dict] = {"train": {}, "evaluate": {}, "derive": {}, "data": {}, "sample": {}}
    for key in keys:
        cls = task_class(sections["tasks"][key].get("task") or key)
        task = make_task(params, key, root=root)
        made_by = Path(inspect.getfile(cls)).resolve().relative_to(root.resolve()).as_posix()
        try:
            data = task.data_dir.relative_to(root).as_posix()
        except SwarmlabError:  # data made as it is read (tasks/toy.py): the module that makes it is what it reads
            data = made_by
        lists["train"][key] = {"data": data, "monitor": f"val_{task.monitor}"}
        lists["evaluate"][key] = {"data": data}
        if cls.build_data is not Task.build_data and not task.data_steps():
            inputs = task.data_inputs()
            if inputs and inputs[0].startswith("${paths.datasets}/"):
                if data != f"data/{key}":
                    raise ValueError(f"task {key}: data@ writes data/{key}, its data_dir is {data}")
                lists["data"][key] = {"source": inputs[0].removeprefix("${paths.datasets}/")}
            else:
                lists["derive"][key] = {"data": data, "input": inputs[0] if inputs else made_by}
        if cls.sample is not Task.sample:
            lists["sample"][key] = {"data": data}
    spaces = sections.get("sweep", {}).get("spaces", {})
    unswept = [key for key in keys if key not in spaces]
    if unswept:  # train@<key> depends on what sweep@<key> chose (reports/sweep/<key>/chosen.json)
        raise ValueError(f"tasks {unswept} have no search space: add defaults.sweep.spaces.<key> to params.yaml")
    sweeps = {key: {"data": lists["evaluate"][key]["data"]} for key in keys}
    return {"dvc.yaml": lists, "sweeps/dvc.yaml": {"sweep": sweeps}}


def _foreach_block(lines: list[str], stage: str) -> tuple[int, int, str]:
    """(start, end, indent) of the item lines of ``stage``'s ``foreach:`` mapping."""
    for i, line in enumerate(lines):
        if re.match(rf"^  {re.escape(stage)}:\s*(#.*)?$", line) and re.match(r"^    foreach:\s*$", lines[i + 1]):
            j = i + 2
            while j < len(lines) and re.match(r"^      \S", lines[j]):
                j += 1
            return i + 2, j, "      "
    raise ValueError(f"no stage {stage!r} with a foreach mapping")


def regenerate_lists(text: str, lists: dict[str, dict[str, dict[str, str]]]) -> tuple[str, list[str]]:
    """``text`` (a dvc.yaml) with the ``foreach`` items of the stages in ``lists`` generated; the stages changed."""
    lines = text.split("\n")
    changed = []
    for stage, items in lists.items():
        start, end, indent = _foreach_block(lines, stage)
        new = [f"{indent}{key}: {{{', '.join(f'{k}: {v}' for k, v in item.items())}}}" for key, item in items.items()]
        if lines[start:end] != new:
            changed.append(stage)
            lines[start:end] = new
    return "\n".join(lines), changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file is not current")
    args = parser.parse_args(argv)
    stale = 0
    lists = task_lists()
    for name in PIPELINES:
        path = REPO_ROOT / name
        text = path.read_text()
        new, changed = regenerate(text)
        for cmd in changed:
            print(f"{name}: `{cmd}` declares other code deps than it imports", file=sys.stderr)
        new, changed_lists = regenerate_lists(new, lists.get(name, {}))
        for stage in changed_lists:
            print(f"{name}: {stage}@'s task list is not the generated one", file=sys.stderr)
        stale += len(changed) + len(changed_lists)
        if (changed or changed_lists) and not args.check:
            path.write_text(new)
    if args.check and stale:
        print(f"error: {stale} stage(s) not current: python -m swarmlab.drive.dvcdeps", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
