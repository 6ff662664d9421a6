"""Rebuild bookgen/board_glyphs.py: outlines of the shogi piece characters.

``bookgen.diagram.board_svg`` draws pieces as SVG paths, not as text, so a
board reads the same on a machine without any CJK font. This script takes
the outlines of the characters below from a CJK OpenType font (by default
Noto Serif CJK JP Bold from Debian's ``fonts-noto-cjk``, SIL Open Font
License 1.1) and writes them, with the font's name, version, copyright and
license text, as a small Python module.

Each outline becomes one SVG path: font units (1000 per em), y pointing
down, origin at the centre of the ideographic em box, every point rounded to
a whole unit and written relative to the previous one (``m``/``l``/``c``/
``z``; a repeated command letter is left out). The font is read with
fontTools (a matplotlib dependency, so it is in the venv already). Without
installing the font system-wide::

    apt-get download fonts-noto-cjk
    dpkg-deb -x fonts-noto-cjk_*.deb /tmp/noto
    .venv/bin/python data/make_glyphs.py \\
        --font /tmp/noto/usr/share/fonts/opentype/noto/NotoSerifCJK-Bold.ttc \\
        --license /tmp/noto/usr/share/doc/fonts-noto-cjk/copyright

(``--license`` reads the ``License: SIL-1.1`` paragraph of a Debian
copyright file, or a plain license text file.)
"""

from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path

from fontTools.pens.basePen import BasePen
from fontTools.ttLib import TTCollection, TTFont

# Kings (玉 for black, 王 for white), the other pieces, their promoted forms.
CHARACTERS = "玉王飛角金銀桂香歩龍馬と全圭杏"
DEFAULT_FONT = "/usr/share/fonts/opentype/noto/NotoSerifCJK-Bold.ttc"
DEFAULT_FACE = "Noto Serif CJK JP Bold"
DEFAULT_LICENSE = "/usr/share/doc/fonts-noto-cjk/copyright"
OUTPUT = Path(__file__).resolve().parent.parent / "bookgen" / "board_glyphs.py"


class RelativePathPen(BasePen):
    """Collects an outline as compact relative SVG path data (whole font units).

    Quadratic (TrueType) curves reach ``_curveToOne`` as cubics through
    BasePen's default ``_qCurveToOne``.
    """

    def __init__(self, glyph_set: object, centre_x: float, centre_y: float) -> None:
        super().__init__(glyph_set)
        self.centre = (centre_x, centre_y)
        self.parts: list[str] = []
        self.last_command = ""
        self.current = (0, 0)
        self.start = (0, 0)

    def _point(self, point: tuple[float, float]) -> tuple[int, int]:
        return round(point[0] - self.centre[0]), round(self.centre[1] - point[1])

    def _emit(self, command: str, points: list[tuple[int, int]]) -> None:
        numbers = []
        origin = self.current
        for x, y in points:
            numbers += [x - origin[0], y - origin[1]]
        text = ""
        for number in numbers:
            if text and number >= 0:
                text += " "
            text += str(number)
        if command != self.last_command or command == "m":
            self.parts.append(command)
        elif text[0] != "-":
            self.parts.append(" ")
        self.parts.append(text)
        self.last_command = command
        self.current = points[-1]

    def _moveTo(self, point: tuple[float, float]) -> None:
        target = self._point(point)
        self._emit("m", [target])
        self.last_command = "l"  # numbers after an 'm' continue as lines
        self.start = target

    def _lineTo(self, point: tuple[float, float]) -> None:
        target = self._point(point)
        if target != self.current:
            self._emit("l", [target])

    def _curveToOne(self, p1: tuple[float, float], p2: tuple[float, float],
                    p3: tuple[float, float]) -> None:
        points = [self._point(p) for p in (p1, p2, p3)]
        if len(set([self.current, *points])) <= 2:  # collapsed by the rounding
            self._lineTo(p3)
            return
        self._emit("c", points)

    def _closePath(self) -> None:
        self.parts.append("z")
        self.last_command = "z"
        self.current = self.start

    def _endPath(self) -> None:
        self.last_command = ""

    @property
    def path(self) -> str:
        return "".join(self.parts)


def open_face(path: str, face: str) -> TTFont:
    if path.lower().endswith((".ttc", ".otc")):
        collection = TTCollection(path)
        for font in collection.fonts:
            if font["name"].getDebugName(4) == face:
                return font
        names = ", ".join(str(f["name"].getDebugName(4)) for f in collection.fonts)
        raise SystemExit(f"{path}: no face {face!r} (faces: {names})")
    return TTFont(path)


def license_text(path: str) -> str:
    text = Path(path).read_text(encoding="utf-8")
    match = re.search(r"^License: SIL-1\.1\n((?: .*\n?)+)", text, re.MULTILINE)
    if not match:
        return text.strip()
    lines = [line[1:] for line in match.group(1).splitlines()]
    return "\n".join("" if line == "." else line for line in lines).strip()


def extract(font: TTFont) -> tuple[dict[str, str], int]:
    """Path data of each character and the font's units per em."""
    em = font["head"].unitsPerEm
    os2 = font["OS/2"]
    # The ideographic em box: ascender to descender, one em high, centred horizontally.
    bottom = os2.sTypoDescender
    centre_x, centre_y = em / 2, bottom + em / 2
    cmap = font.getBestCmap()
    glyph_set = font.getGlyphSet()
    paths = {}
    for character in CHARACTERS:
        name = cmap.get(ord(character))
        if name is None:
            raise SystemExit(f"the font has no glyph for {character}")
        pen = RelativePathPen(glyph_set, centre_x, centre_y)
        glyph_set[name].draw(pen)
        paths[character] = pen.path
    return paths, em


def write_module(paths: dict[str, str], em: int, font: TTFont, licence: str,
                 output: Path) -> None:
    names = font["name"]
    face = str(names.getDebugName(4))
    version = str(names.getDebugName(5))
    copyright_notice = str(names.getDebugName(0))
    licence_block = textwrap.indent(licence, "# ", lambda line: True).replace("# \n", "#\n")
    lines = [
        '"""Outlines of the shogi piece characters, drawn by :mod:`bookgen.diagram`.',
        "",
        "Generated by data/make_glyphs.py; do not edit. Path data in font units",
        f"({em} per em), y down, origin at the centre of the ideographic em box.",
        "",
        f"Font: {face} ({version}).",
        f"Copyright: {copyright_notice}",
        "These outlines are a Modified Version of the Font Software under the SIL",
        "Open Font License 1.1, whose text follows at the end of this file.",
        '"""',
        "",
        f"FONT = {face!r}",
        f"FONT_VERSION = {version!r}",
        f"COPYRIGHT = {copyright_notice!r}",
        'LICENSE = "OFL-1.1"',
        f"EM = {em}",
        "",
        "GLYPHS: dict[str, str] = {",
    ]
    for character, path in paths.items():
        lines.append(f"    {character!r}: (")
        for start in range(0, len(path), 88):
            lines.append(f"        {path[start:start + 88]!r}")
        lines.append("    ),")
    lines += ["}", "", "# The license of the font these outlines come from:", "#",
              licence_block, ""]
    output.write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--font", default=DEFAULT_FONT, help="OpenType font or collection")
    parser.add_argument("--face", default=DEFAULT_FACE, help="full font name in a collection")
    parser.add_argument("--license", default=DEFAULT_LICENSE,
                        help="the font's license text (or a Debian copyright file)")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    font = open_face(args.font, args.face)
    paths, em = extract(font)
    write_module(paths, em, font, license_text(args.license), args.output)
    size = sum(len(p) for p in paths.values())
    print(f"{args.output}: {len(paths)} glyphs, {size} characters of path data")


if __name__ == "__main__":
    main()
