"""Documents of plain-text blocks (paragraphs, tables, lists, figures) and their renderers.

Every text is plain and escaped by the renderer: :func:`render_html_page`
writes one self-contained HTML page (CSS inline, figures as base64 PNG,
nothing linked outside), :func:`render_markdown_page` its Markdown twin
(figures referenced as PNG files). :mod:`bookgen.analysis.report` writes them with
:func:`bookgen.files.atomic_write` after :func:`bookgen.files.check_output`.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field

from bookgen import __version__

__all__ = ["Block", "Bullets", "Heading", "Image", "Paragraph", "Section", "Table",
           "markdown_escape", "render_html_page",
           "plural", "render_markdown_page"]


def plural(count: int, noun: str) -> str:
    """``"1 game"``, ``"2 games"``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


@dataclass
class Paragraph:
    text: str
    style: str = ""  # "", "note" or "warning"


@dataclass
class Heading:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    id: str | None = None
    numeric: list[bool] | None = None  # right-aligned columns
    caption: str = ""


@dataclass
class Image:
    key: str  # file stem of the Markdown twin's PNG
    title: str
    png: bytes


Block = Paragraph | Heading | Bullets | Table | Image


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       background: #f6f7f9; color: #1d2330; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { margin-top: 0; border-bottom: 3px solid #3b4a6b; padding-bottom: 8px; }
h2 { margin-top: 36px; border-bottom: 1px solid #d5d9e0; padding-bottom: 4px; color: #3b4a6b; }
h3 { margin-top: 24px; }
nav ul { columns: 2; }
table { border-collapse: collapse; margin: 12px 0; font-size: 14px; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: 4px; }
th, td { border: 1px solid #d5d9e0; padding: 4px 8px; vertical-align: top; }
th { background: #e8ecf3; text-align: center; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #f7f8fb; }
table#ratings td:nth-child(2) { font-weight: 600; }
figure { margin: 16px 0; }
figure img { max-width: 100%; border: 1px solid #e1e4ea; }
figcaption { font-size: 13px; color: #555; }
p.note { background: #eef4ff; border-left: 4px solid #5b7bd5; padding: 6px 10px; }
p.warning { background: #fff4e5; border-left: 4px solid #e09b3d; padding: 6px 10px; }
""".strip()


def _html_block(block: Block) -> str:
    escape = html.escape
    if isinstance(block, Paragraph):
        style = f' class="{block.style}"' if block.style else ""
        return f"<p{style}>{escape(block.text)}</p>"
    if isinstance(block, Heading):
        return f"<h3>{escape(block.text)}</h3>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Image):
        data = base64.b64encode(block.png).decode("ascii")
        return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(block.title)}">'
                f"<figcaption>{escape(block.title)}</figcaption></figure>")
    numeric = block.numeric or [False] * len(block.headers)
    table_id = f' id="{escape(block.id)}"' if block.id else ""
    parts = [f"<table{table_id}>"]
    if block.caption:
        parts.append(f"<caption>{escape(block.caption)}</caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in block.headers)
                 + "</tr></thead><tbody>")
    for row in block.rows:
        cells = "".join(f'<td class="num">{escape(cell)}</td>' if right
                        else f"<td>{escape(cell)}</td>" for cell, right in zip(row, numeric))
        parts.append(f"<tr>{cells}</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def render_html_page(title: str, sections: Sequence[Section]) -> str:
    """``sections`` as one self-contained HTML page (CSS inline, figures embedded)."""
    escape = html.escape
    toc = "".join(f'<li><a href="#{escape(s.id)}">{escape(s.title)}</a></li>'
                  for s in sections)
    body = []
    for section in sections:
        body.append(f'<section id="{escape(section.id)}"><h2>{escape(section.title)}</h2>')
        body.extend(_html_block(block) for block in section.blocks)
        body.append("</section>")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="bookgen {escape(__version__)}">',
        f"<title>{escape(title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body><main>",
        f"<h1>{escape(title)}</h1>",
        f"<nav><ul>{toc}</ul></nav>",
        *body,
        "</main></body>",
        "</html>",
        "",
    ])


_MARKDOWN_INLINE = set("\\`*_[]|~$")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def markdown_escape(text: str, *, block: bool = False) -> str:
    """``text`` as literal Markdown text, safe in a table cell.

    Inline punctuation is backslash-escaped (``|`` included, so a cell cannot
    end early; backticks, so no code span starts), ``<``, ``>`` and ``&``
    become entities (no raw HTML), and line breaks become spaces. With
    ``block=True`` (a paragraph, a list item or a heading) a start that would
    open a heading, a list or a quote is escaped as well.
    """
    text = " ".join(text.splitlines())
    out = "".join("\\" + c if c in _MARKDOWN_INLINE else _ENTITIES.get(c, c) for c in text)
    if block:
        stripped = out.lstrip(" ")
        digits = len(stripped) - len(stripped.lstrip("0123456789"))
        if stripped[:1] in ("#", "+", "-", "="):
            out = "\\" + stripped
        elif digits and stripped[digits:digits + 1] in (".", ")"):
            out = stripped[:digits] + "\\" + stripped[digits:]
    return out


def _markdown_block(block: Block, image_dir: str) -> str:
    if isinstance(block, Paragraph):
        text = markdown_escape(block.text, block=True)
        return f"> {text}" if block.style else text
    if isinstance(block, Heading):
        return f"### {markdown_escape(block.text, block=True)}"
    if isinstance(block, Bullets):
        return "\n".join(f"- {markdown_escape(item, block=True)}" for item in block.items)
    if isinstance(block, Image):
        return f"![{markdown_escape(block.title)}]({image_dir}/{block.key}.png)"
    numeric = block.numeric or [False] * len(block.headers)
    lines = []
    if block.caption:
        lines += [f"*{markdown_escape(block.caption)}*", ""]
    lines.append("| " + " | ".join(markdown_escape(h) for h in block.headers) + " |")
    lines.append("|" + "|".join("---:" if right else ":---" for right in numeric) + "|")
    for row in block.rows:
        lines.append("| " + " | ".join(markdown_escape(c) for c in row) + " |")
    return "\n".join(lines)


def render_markdown_page(title: str, sections: Sequence[Section], image_dir: str) -> str:
    """``sections`` as Markdown, figures referenced as ``image_dir/<key>.png``."""
    parts = [f"# {markdown_escape(title, block=True)}"]
    for section in sections:
        parts.append(f"## {markdown_escape(section.title, block=True)}")
        parts.extend(_markdown_block(block, image_dir) for block in section.blocks)
    return "\n\n".join(parts) + "\n"
