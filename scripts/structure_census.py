"""Structure of the code at a commit (issue 36's before/after): the largest modules and functions, the lines of
dvc.yaml and of the config machinery, and swarmlab/'s share of the code. Reads ``git archive`` of the commit, so
the working tree is untouched.

    python scripts/structure_census.py 5da21da HEAD        # one column per commit
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("swarmlab", "models", "tasks", "pipelines")
MACHINERY = (
    "swarmlab/settings.py",
    "swarmlab/drive/params.py",
    "swarmlab/drive/sections.py",
    "swarmlab/drive/run_config.py",
    "swarmlab/drive/spec.py",
)


def files_at(commit: str) -> dict[str, str]:
    raw = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    out = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for m in tar.getmembers():
            if m.isfile() and (m.name.endswith(".py") or m.name in ("dvc.yaml", "claims/dvc.yaml", "params.yaml")):
                out[m.name] = tar.extractfile(m).read().decode()
    return out


def functions(path: str, text: str):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{path}:{node.name}", node.end_lineno - node.lineno + 1


def census(commit: str, top: int) -> list[str]:
    files = files_at(commit)
    code = {p: t for p, t in files.items() if p.endswith(".py") and p.split("/")[0] in PACKAGES}
    lines = {p: len(t.splitlines()) for p, t in code.items()}
    total = sum(lines.values())
    lib = sum(n for p, n in lines.items() if p.startswith("swarmlab/"))
    funcs = sorted((f for p, t in code.items() for f in functions(p, t)), key=lambda f: -f[1])
    out = [f"## {commit}", f"code in {', '.join(PACKAGES)}: {total} lines; swarmlab/ {lib} ({100 * lib / total:.0f}%)"]
    out.append(
        f"dvc.yaml {len(files.get('dvc.yaml', '').splitlines())} lines, "
        f"claims/dvc.yaml {len(files.get('claims/dvc.yaml', '').splitlines())}, "
        f"params.yaml {len(files.get('params.yaml', '').splitlines())}"
    )
    mach = {p: lines[p] for p in MACHINERY if p in lines}
    out.append(f"config machinery {sum(mach.values())} lines: " + ", ".join(f"{p} {n}" for p, n in mach.items()))
    out.append("largest modules: " + ", ".join(f"{p} {n}" for p, n in sorted(lines.items(), key=lambda x: -x[1])[:top]))
    out.append("largest functions: " + ", ".join(f"{f} {n}" for f, n in funcs[:top]))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args(argv)
    for c in args.commits:
        print("\n".join(census(c, args.top)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
