"""`dvc plots show` renders with no network (#38): DVC's page loads Vega from a CDN, so offline every plot was 0 px
tall; .dvc/config names .dvc/plots/offline.html, DVC's page with the libraries inline (scripts/offline_plots_template.py).
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.test_mlflow_browser import FLAGS, chromium

TEMPLATE = REPO_ROOT / ".dvc" / "plots" / "offline.html"


def test_the_project_renders_its_plots_with_the_inline_template():
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / ".dvc" / "config")
    assert config["plots"]["html_template"] == "plots/offline.html"  # relative to .dvc/, as DVC resolves it
    text = TEMPLATE.read_text(encoding="utf-8")
    assert "{plot_divs}" in text and "{scripts}" not in text  # no {scripts}: DVC's CDN tags have nowhere to go
    assert "window.vegaEmbed=" in text.replace(" ", "")
    assert not re.search(r"<script[^>]+src=", text)  # nothing to fetch


@pytest.mark.slow
def test_dvc_plots_show_draws_offline(tmp_path):
    """A DVC project with one line plot and this project's template: `dvc plots show` writes a page that Chromium,
    with every host name unresolvable, draws (Vega's canvas, taller than 0 px)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    dvc = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "dvc", *a], cwd=repo, env=env, capture_output=True, text=True, timeout=120
    )
    init = dvc("init", "--no-scm")
    assert init.returncode == 0, init.stderr
    (repo / ".dvc" / "plots").mkdir(exist_ok=True)
    (repo / ".dvc" / "plots" / "offline.html").write_bytes(TEMPLATE.read_bytes())
    with open(repo / ".dvc" / "config", "a") as f:
        f.write("[plots]\n    html_template = plots/offline.html\n")
    (repo / "history.csv").write_text("step,val_loss\n" + "".join(f"{s},{1 / (s + 1):.4f}\n" for s in range(20)))
    (repo / "dvc.yaml").write_text("plots:\n  - history.csv:\n      x: step\n      y: val_loss\n")
    shown = dvc("plots", "show", "-o", "plots")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    page = repo / "plots" / "index.html"
    html = page.read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in html and "vegaEmbed(" in html
    dom = subprocess.run(
        [chromium(), *FLAGS, "--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    marks = re.findall(r'<(?:svg|canvas)[^>]*class="marks"[^>]*>', dom)  # Vega's drawing (DVC asks for SVG)
    assert marks, dom[-2000:]
    heights = [int(h) for m in marks for h in re.findall(r' height="(\d+)"', m)]
    assert heights and min(heights) > 50, marks
    assert "mark-line" in dom  # the line itself, not only the axes
