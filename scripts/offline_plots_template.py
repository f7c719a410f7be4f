"""Write .dvc/plots/offline.html: DVC's plots page with Vega, Vega-Lite and Vega-Embed inline, so that
`dvc plots show` renders with no network (DVC's own page loads them from a CDN: offline, every plot is 0 px tall).

.dvc/config names it (`[plots] html_template = plots/offline.html`, relative to .dvc/); the file is committed, so a
fresh clone renders offline with no tool. This script is how it was made, and remakes it for another Vega-Lite:

    pip install vl-convert-python==1.9.0.post1
    python scripts/offline_plots_template.py [--vega-lite v5.20]

vl-convert bundles the three libraries (and their dependencies) into one script that sets ``vegaEmbed``, ``vegaLite``
and ``vega`` on ``window``, which DVC's plot snippets call (``vegaEmbed('#id', spec)``). The page is DVC's
(dvc_render.html.PAGE_HTML) with its ``{scripts}`` placeholder, where DVC puts the CDN tags, replaced by that bundle.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
OUT = REPO_ROOT / ".dvc" / "plots" / "offline.html"


def page(bundle: str, vega_lite: str, converter: str) -> str:
    from dvc_render.html import PAGE_HTML

    if "{scripts}" not in PAGE_HTML or "{plot_divs}" not in PAGE_HTML:
        raise SystemExit("error: dvc_render's page has no {scripts} / {plot_divs} placeholder: check its version")
    for placeholder in ("{scripts}", "{plot_divs}", "{refresh_tag}"):
        if placeholder in bundle:  # DVC replaces every occurrence: the bundle must hold none
            raise SystemExit(f"error: the bundle contains {placeholder}, which DVC would replace")
    note = (
        f"<!-- Vega-Lite {vega_lite}, Vega and Vega-Embed inline (vl-convert {converter}): written by "
        "scripts/offline_plots_template.py, so that `dvc plots show` renders offline -->"
    )
    return PAGE_HTML.replace("{scripts}", f'{note}\n    <script type="text/javascript">\n{bundle}\n</script>')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vega-lite", default="v5.20", help="Vega-Lite version for the bundle (DVC's templates: v5)")
    parser.add_argument("--out", default=str(OUT), help=f"where to write (default: {OUT.relative_to(REPO_ROOT)})")
    args = parser.parse_args(argv)
    try:
        import vl_convert
    except ImportError:
        print("error: vl-convert-python is not installed: pip install vl-convert-python==1.9.0.post1", file=sys.stderr)
        return 2
    bundle = vl_convert.javascript_bundle(vl_version=args.vega_lite)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(bundle, args.vega_lite, getattr(vl_convert, "__version__", "?")), encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
