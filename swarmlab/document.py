"""A small document model rendered twice: Markdown (REPORT.md) and one self-contained HTML page.

Blocks are plain dataclasses; inline text uses a Markdown subset (`code`, **bold**, [text](target)) that
both renderers understand. The HTML page needs nothing from the network: its style is inline, its images
are ``data:`` URIs, and it has no scripts; the only URLs in it are links a reader clicks.
Rendering is deterministic: the same blocks give the same bytes.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field

_INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*|\[([^\]]+)\]\(([^)\s]+)\)")


@dataclass
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    align: str = ""  # one letter per column: l / r (default: l for the first column, r for the rest)


@dataclass
class Image:
    data: bytes  # PNG bytes, embedded in the HTML
    path: str  # where REPORT.md finds the file, relative to it
    caption: str = ""


@dataclass
class Code:
    text: str


@dataclass
class Document:
    title: str
    blocks: list = field(default_factory=list)

    def add(self, *blocks) -> "Document":
        self.blocks.extend(b for b in blocks if b is not None)
        return self


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: Document) -> str:
    out = [f"# {doc.title}", ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out += [f"{'#' * b.level} {b.text}", ""]
        elif isinstance(b, Para):
            out += [b.text, ""]
        elif isinstance(b, Bullets):
            out += [f"- {item}" for item in b.items] + [""]
        elif isinstance(b, Table):
            align = b.align or "l" + "r" * (len(b.header) - 1)
            out.append("| " + " | ".join(md_cell(h) for h in b.header) + " |")
            out.append("|" + "|".join("---:" if a == "r" else "---" for a in align) + "|")
            out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("")
        elif isinstance(b, Image):
            out += [f"![{b.caption}]({b.path})", ""]
            if b.caption:
                out += [f"*{b.caption}*", ""]
        elif isinstance(b, Code):
            out += ["```", b.text.rstrip("\n"), "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def inline_html(text: str) -> str:
    """Escape ``text`` and render the inline Markdown subset. Relative link targets stay relative."""
    parts, pos = [], 0
    for m in _INLINE.finditer(text):
        parts.append(html.escape(text[pos : m.start()]))
        if m.group(1) is not None:
            parts.append(f"<code>{html.escape(m.group(1))}</code>")
        elif m.group(2) is not None:
            parts.append(f"<strong>{inline_html(m.group(2))}</strong>")
        else:
            parts.append(f'<a href="{html.escape(m.group(4), quote=True)}">{inline_html(m.group(3))}</a>')
        pos = m.end()
    parts.append(html.escape(text[pos:]))
    return "".join(parts)


STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1f2328; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 28px; border-bottom: 1px solid #d0d7de; padding-bottom: 8px; }
h2 { font-size: 22px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 18px; margin-top: 28px; }
h4 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; vertical-align: top; }
th { background: #f6f8fa; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fbfcfd; }
code { background: #eff1f3; padding: 1px 4px; border-radius: 4px; font-size: 12.5px; }
pre { background: #f6f8fa; padding: 12px; overflow-x: auto; border-radius: 6px; }
pre code { background: none; padding: 0; }
figure { margin: 12px 0 20px; }
figure img { max-width: 100%; border: 1px solid #d0d7de; }
figcaption { color: #57606a; font-size: 13px; }
nav.toc { background: #f6f8fa; border: 1px solid #d0d7de; padding: 8px 16px; border-radius: 6px; }
nav.toc ul { margin: 4px 0; padding-left: 20px; }
""".strip()


def to_html(doc: Document) -> str:
    body, toc = [], []
    used: set[str] = set()
    for b in doc.blocks:
        if isinstance(b, Heading):
            anchor = b.anchor or slug(b.text)
            base, k = anchor, 2
            while anchor in used:
                anchor, k = f"{base}-{k}", k + 1
            used.add(anchor)
            if b.level == 2:
                toc.append(f'<li><a href="#{anchor}">{inline_html(b.text)}</a></li>')
            body.append(f'<h{b.level} id="{anchor}">{inline_html(b.text)}</h{b.level}>')
        elif isinstance(b, Para):
            body.append(f"<p>{inline_html(b.text)}</p>")
        elif isinstance(b, Bullets):
            body.append("<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            align = b.align or "l" + "r" * (len(b.header) - 1)
            head = "".join(f'<th class="{a}">{inline_html(h)}</th>' for a, h in zip(align, b.header))
            rows = "".join(
                "<tr>" + "".join(f'<td class="{a}">{inline_html(c)}</td>' for a, c in zip(align, row)) + "</tr>"
                for row in b.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(b, Image):
            uri = "data:image/png;base64," + base64.b64encode(b.data).decode("ascii")
            caption = f"<figcaption>{inline_html(b.caption)}</figcaption>" if b.caption else ""
            body.append(f'<figure><img src="{uri}" alt="{html.escape(b.caption, quote=True)}">{caption}</figure>')
        elif isinstance(b, Code):
            body.append(f"<pre><code>{html.escape(b.text.rstrip(chr(10)))}</code></pre>")
    nav = f'<nav class="toc"><strong>Contents</strong><ul>{"".join(toc)}</ul></nav>' if toc else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(doc.title)}</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>\n<main>\n"
        f"<h1>{inline_html(doc.title)}</h1>\n{nav}\n" + "\n".join(body) + "\n</main>\n</body>\n</html>\n"
    )
