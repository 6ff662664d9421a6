"""Board diagrams: ``bookgen.diagram.board_svg`` and ``bookgen show --svg``.

The SVG is read back with ElementTree and rendered in headless Chromium
under a fontconfig setting that hides every font covering Japanese, Chinese
or Korean (checked with ``fc-list``), so the renders show what a machine
without CJK fonts shows whatever is installed here. Expected positions come
from cshogi; pixel positions from :class:`bookgen.diagram.Layout`, whose
orientation is checked on its own.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import cshogi
import numpy as np
import pytest
from PIL import Image, ImageChops, ImageStat

from bookgen import diagram
from bookgen.diagram import Arrow, Layout, board_svg
from bookgen.store import Book
from conftest import run_chromium, run_cli

SVG_NS = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"

# Every piece kind of both colours on the board, and hands with counts.
ALL_PIECES = "+r+b+s+n+l+pgkr/b8/snlp5/9/9/9/SNLP5/B8/RKG+P+L+N+S+B+R b GS2Pgs3p 1"

def hex_rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def render(svg: str, directory: Path, env: dict[str, str], name: str = "board") -> Image.Image:
    """Chromium's screenshot of ``svg`` at 100 %, as an RGB image of the SVG's size."""
    root = ET.fromstring(svg)
    width, height = round(float(root.get("width"))), round(float(root.get("height")))
    path = directory / f"{name}.svg"
    path.write_text(svg, encoding="utf-8")
    shot = directory / f"{name}.png"
    run_chromium(directory / f"profile-{name}", f"--screenshot={shot}",
                 f"--window-size={width},{height}", path.resolve().as_uri(), env=env)
    with Image.open(io.BytesIO(shot.read_bytes())) as image:
        assert image.size == (width, height)
        return image.convert("RGB")


def inner(image: Image.Image, box: tuple[float, float, float, float], inset: int = 3
          ) -> Image.Image:
    x, y, w, h = (round(v) for v in box)
    return image.crop((x + inset, y + inset, x + w - inset, y + h - inset))


def ink(image: Image.Image) -> int:
    """Pixels dark or red enough to be a glyph's stroke (not board, piece or highlight)."""
    pixels = np.asarray(image, dtype=int)
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    return int(((pixels.max(axis=-1) < 110) | ((r > 140) & (g < 90) & (b < 90))).sum())


def difference(a: Image.Image, b: Image.Image) -> float:
    return sum(ImageStat.Stat(ImageChops.difference(a, b)).mean) / 3


def squares_of(board: cshogi.Board) -> dict[str, int]:
    """Occupied squares of ``board`` (USI names) and their cshogi piece codes."""
    return {f"{i // 9 + 1}{'abcdefghi'[i % 9]}": code
            for i, code in enumerate(board.pieces) if code}


def texts(svg: str) -> list[str]:
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG_NS}text")]


def glyph_uses(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    defined = {p.get("id"): p.get("d") for p in root.iter(f"{SVG_NS}path") if p.get("id")}
    uses = [u.get(XLINK_HREF) for u in root.iter(f"{SVG_NS}use")]
    for href in uses:
        assert href and href.startswith("#") and defined.get(href[1:]), href
    return uses


# --------------------------------------------------------------------------
# the SVG itself


@pytest.fixture
def empty_book(tmp_path) -> Path:
    path = tmp_path / "book.sqlite"
    with Book(path):
        pass
    return path


def test_show_svg_draws_pieces_as_outlines(empty_book, tmp_path):
    spec = "startpos moves 7g7f 3c3d 8h2b+ 3a2b"
    svg_path = tmp_path / "board.svg"
    run_cli("show", "-b", empty_book, "--svg", svg_path, spec)
    svg = svg_path.read_text(encoding="utf-8")
    assert all(text.isascii() for text in texts(svg)), texts(svg)
    board = cshogi.Board()
    for move in spec.split()[2:]:
        board.push_usi(move)
    kinds_in_hand = sum(1 for hand in board.pieces_in_hand for n in hand if n)
    assert len(glyph_uses(svg)) == len(squares_of(board)) + kinds_in_hand == 38 + 2


def test_layout_orientation():
    layout = Layout()
    x9a, y9a, _, _ = layout.square("9a")
    x1a, y1a, _, _ = layout.square("1a")
    x9i, y9i, _, _ = layout.square("9i")
    assert x9a < x1a and y9a == y1a and y9a < y9i and x9a == x9i  # file 9 left, rank a top
    assert layout.square("5e")[:2] == (x9a + 4 * layout.cell, y9a + 4 * layout.cell)
    # white's hand on the left, black's on the right of the board
    assert layout.hand_slot(cshogi.WHITE, 1)[0] + layout.panel <= x9a
    assert layout.hand_slot(cshogi.BLACK, 1)[0] >= x1a + layout.cell


def test_last_move_squares_are_marked(empty_book, tmp_path):
    layout = Layout()

    def marks(spec: str) -> dict[str, tuple[float, float, float, float]]:
        path = tmp_path / "marks.svg"
        run_cli("show", "-b", empty_book, "--svg", path, spec)
        root = ET.fromstring(path.read_text(encoding="utf-8"))
        return {r.get("class"): tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
                for r in root.iter(f"{SVG_NS}rect") if r.get("class", "").startswith("last")}

    assert marks("startpos moves 7g7f") == {"last-from": layout.square("7g"),
                                            "last-to": layout.square("7f")}
    assert marks("startpos moves 7g7f 3c3d 8h2b+") == {"last-from": layout.square("8h"),
                                                      "last-to": layout.square("2b")}
    dropped = "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/7R1/LNSGKGSNL b B 1 moves B*5e"
    assert marks(dropped) == {"last-to": layout.square("5e")}
    assert marks("startpos") == {}
    sfen_only = "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"
    assert marks(sfen_only) == {}


def test_bad_last_move_and_arrows_are_refused():
    board = cshogi.Board()
    with pytest.raises(ValueError, match="no piece on 7f"):
        board_svg(board, last_move="7g7f")
    with pytest.raises(ValueError, match="not a USI move"):
        board_svg(board, last_move="7g7z")
    with pytest.raises(ValueError, match="not a legal move"):
        board_svg(board, arrows=["7g7e"])
    with pytest.raises(ValueError, match="not a legal move"):
        board_svg(board, arrows=["P*5e"])


# --------------------------------------------------------------------------
# rendered without CJK fonts


@pytest.fixture(scope="module")
def all_pieces(no_cjk_env, tmp_path_factory) -> tuple[cshogi.Board, Image.Image]:
    """The board of ALL_PIECES (more rooks and bishops than a game has: bookgen's
    position parser refuses it, cshogi and the drawing do not) and its render."""
    board = cshogi.Board(ALL_PIECES)
    return board, render(board_svg(board), tmp_path_factory.mktemp("render"), no_cjk_env)


def test_every_piece_reads_without_cjk_fonts(all_pieces):
    board, image = all_pieces
    layout = Layout()
    occupied = squares_of(board)
    crops: dict[str, list[Image.Image]] = {}
    for file in "123456789":
        for rank in "abcdefghi":
            square = file + rank
            crop = inner(image, layout.square(square))
            if square not in occupied:
                assert ink(crop) == 0, f"ink on the empty square {square}"
                continue
            assert ink(crop) > 40, f"no glyph drawn on {square}"
            code = occupied[square]
            white = code >= 16
            kind = code - 16 if white else code
            # White's pieces are turned: turned back, they match black's.
            char = "white king" if white and kind == 8 else str(kind)
            crops.setdefault(char, []).append(crop.rotate(180) if white else crop)
    assert len(crops) == 15  # 14 kinds and white's own king character
    for char, group in crops.items():
        for other in group[1:]:
            assert difference(group[0], other) < 4, f"piece {char} drawn differently"
    firsts = list(crops.items())
    for i, (a, crop_a) in enumerate(firsts):
        for b, crop_b in firsts[i + 1:]:
            assert difference(crop_a[0], crop_b[0]) > 6, f"pieces {a} and {b} look alike"


def test_white_pieces_are_turned(all_pieces):
    board, image = all_pieces
    layout = Layout()
    black_pawn = inner(image, layout.square("6g"))   # P
    white_pawn = inner(image, layout.square("6c"))   # p
    assert difference(black_pawn, white_pawn.rotate(180)) < 4
    assert difference(black_pawn, white_pawn) > 3 * difference(black_pawn,
                                                               white_pawn.rotate(180)) + 4


def test_hands_are_drawn_with_counts(all_pieces):
    board, image = all_pieces
    layout = Layout()
    for colour, expected in ((cshogi.BLACK, [("G", 1), ("S", 1), ("P", 2)]),
                             (cshogi.WHITE, [("G", 1), ("S", 1), ("P", 3)])):
        # hand order: R B G S N L P, only the kinds held; slot 0 is the marker
        for slot, (_letter, count) in enumerate(expected, 1):
            x, y, w, h = layout.hand_slot(colour, slot)
            piece = inner(image, (x, y, h, h))
            number = image.crop((round(x + h), round(y), round(x + w), round(y + h)))
            assert ink(piece) > 40
            assert (ink(number) > 10) == (count > 1), (colour, slot, ink(number))
        x, y, w, h = layout.hand_slot(colour, len(expected) + 1)
        assert ink(image.crop((round(x), round(y), round(x + w), round(y + h)))) == 0
    assert sorted(texts(board_svg(board, coordinates=False))) == ["2", "3"]  # the counts


def test_last_move_and_arrows_render(no_cjk_env, tmp_path):
    board = cshogi.Board()
    for move in ("7g7f", "3c3d"):
        board.push_usi(move)
    image = render(board_svg(board, last_move="3c3d", arrows=["8h2b+", Arrow("2g2f", 0.3)]),
                   tmp_path, no_cjk_env)
    layout = Layout()

    def corner(square: str) -> tuple[int, int, int]:
        """A pixel of the square beside its piece (either way up), off the grid lines."""
        x, y, _, h = layout.square(square)
        return image.getpixel((round(x) + 3, round(y + h / 2)))

    assert corner("3c") == hex_rgb(diagram.LAST_FROM)
    assert corner("3d") == hex_rgb(diagram.LAST_TO)
    for square in ("7f", "7g", "5e", "1i"):
        assert corner(square) == hex_rgb(diagram.BOARD)
    # the arrow's shaft halfway from 8h to 2b, over the empty 5e
    x, y, w, h = layout.square("5e")
    r, g, b = image.getpixel((round(x + w / 2), round(y + h / 2)))
    assert b > r + 40 and b > g, (r, g, b)
