"""``bookgen serve`` in a real browser: Debian's chromium, headless, driven over the
DevTools protocol (tests/cdp.py), with no CJK font, against the explorer served by
uvicorn on 127.0.0.1. Never skipped: a machine without chromium fails here (``make
engines`` installs it).

The run also saves the README's screenshot (docs/images/explorer.png with
BOOKGEN_WRITE_SCREENSHOTS=1, else in the test's temporary folder).
"""

from __future__ import annotations

import io
import json

import cshogi
import numpy as np
import pytest
from PIL import Image

from bookgen.diagram import Layout
from bookgen.files import atomic_write
from cdp import Browser
from conftest import screenshot_path
from serve_books import LiveServer, book_rows, make_explorer_book

CELL = 44   # the explorer's board cell (bookgen.explore.pages.board_html)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_explorer_book(tmp_path_factory.mktemp("browse"))


def book_moves(book, moves: list[str], own: bool = True) -> list[str]:
    board = cshogi.Board()
    for usi in moves:
        board.push_usi(usi)
    sfen = board.sfen().rsplit(" ", 1)[0]
    where = " AND m.count > 0" if own else ""
    return sorted(r[0] for r in book_rows(
        book, "SELECT m.move FROM moves m JOIN positions p ON p.id = m.position_id "
              f"WHERE p.sfen = ?{where}", sfen))


TABLE_MOVES = ("Array.from(document.querySelectorAll('#moves tbody tr'))"
               ".map(r => r.dataset.move).sort()")
BOARD_SFEN = "document.querySelector('svg.board').dataset.sfen"


def ink(image: Image.Image) -> int:
    """Pixels dark or red enough to be a glyph's stroke (not board, piece face, arrow)."""
    pixels = np.asarray(image, dtype=int)
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    return int(((pixels.max(axis=-1) < 110) | ((r > 140) & (g < 90) & (b < 90))).sum())


def square_image(shot: Image.Image, square: str, inset: int = 4) -> Image.Image:
    layout = Layout(float(CELL))
    scale = shot.width / layout.width
    x, y, w, h = (v * scale for v in layout.square(square))
    return shot.crop((round(x) + inset, round(y) + inset, round(x + w) - inset,
                      round(y + h) - inset))


def test_explore_in_chromium(made, tmp_path, no_cjk_env):
    with LiveServer(made.book) as server, Browser(tmp_path / "profile", env=no_cjk_env) as page:
        page.navigate(server.url)
        page.until("document.querySelector('#moves tbody tr')", "the move table")
        start_sfen = page.evaluate(BOARD_SFEN)
        assert page.evaluate(TABLE_MOVES) == book_moves(made.book, [], own=False)

        # click the first move of the table: board, URL and table follow, in place
        first = page.evaluate("document.querySelector('#moves tbody tr').dataset.move")
        page.evaluate("window.__same_document = true")   # survives only without a reload
        page.click("#moves tbody tr:first-child td:first-child a")
        page.until(f"{BOARD_SFEN} !== {start_sfen!r}", "the board after the move")
        assert page.evaluate("new URLSearchParams(location.search).get('moves')") == first
        assert page.evaluate("window.__same_document") is True
        assert page.evaluate(TABLE_MOVES) == book_moves(made.book, [first], own=False)
        assert page.evaluate("document.querySelectorAll('svg.board .last-to').length") == 1
        assert page.evaluate("document.querySelector('#line .current').textContent"
                             ) == f"1.{first}"
        after_first = page.evaluate(BOARD_SFEN)

        # click an arrow's head on the board: its move is played
        arrow = page.evaluate("document.querySelector('svg.board g.arrow').dataset.move")
        page.click("svg.board g.arrow polygon")
        page.until(f"{BOARD_SFEN} !== {after_first!r}", "the board after the arrow's move")
        assert page.evaluate("new URLSearchParams(location.search).get('moves')"
                             ) == f"{first} {arrow}"
        assert page.evaluate(TABLE_MOVES) == book_moves(made.book, [first, arrow], own=False)

        # the browser's back button goes back along the line
        page.evaluate("history.back()")
        page.until(f"{BOARD_SFEN} === {after_first!r}", "the position before the arrow")
        assert page.evaluate("new URLSearchParams(location.search).get('moves')") == first
        page.evaluate("history.forward()")
        page.until(f"{BOARD_SFEN} !== {after_first!r}", "the position after the arrow")

        # the tree expands on demand
        page.evaluate("history.back()")
        page.until(f"{BOARD_SFEN} === {after_first!r}", "the position before the arrow")
        # (the best moves come open a ply deeper; one that is not opens on a click)
        closed = "#tree > ul > li:not(.expanded) > button.expand"
        node = page.evaluate(f"document.querySelector({closed!r}).parentElement.dataset.move")
        page.click(closed)
        item = f'#tree > ul > li[data-move="{node}"]'
        below = page.until(f"document.querySelector({json.dumps(item + '.expanded > ul > li')})"
                           f" && Array.from(document.querySelectorAll("
                           f"{json.dumps(item + ' > ul > li')})).map(li => li.dataset.move)",
                           "the expanded tree")
        assert sorted(below) == book_moves(made.book, [first, node])
        opened = "#tree > ul > li.expanded > button.expand"
        page.click(opened)     # an open node closes
        page.until("document.querySelector('#tree > ul > li.expanded > ul[hidden]')",
                   "the closed node")

        # the board is drawn, with pieces, without any CJK font
        shot = Image.open(io.BytesIO(page.screenshot("svg.board"))).convert("RGB")
        assert len(np.unique(np.asarray(shot).reshape(-1, 3), axis=0)) > 20   # not blank
        board = cshogi.Board()
        board.push_usi(first)
        pieces = {f"{i // 9 + 1}{'abcdefghi'[i % 9]}" for i, code in enumerate(board.pieces)
                  if code}
        empty = sorted({f"{f}{r}" for f in "123456789" for r in "def"} - pieces)
        assert "5i" in pieces and "5a" in pieces and empty
        king, black_king, nothing = (ink(square_image(shot, s)) for s in ("5a", "5i",
                                                                           empty[0]))
        assert king > 40 and black_king > 40, (king, black_king)
        assert nothing < king / 10, (nothing, king)

        # the README's screenshot: the page after the first move
        shot_path = screenshot_path("explorer.png", tmp_path)
        atomic_write(shot_path, page.screenshot())
    with Image.open(shot_path) as image:
        assert image.size == (1280, 1000)


def click_box(page, box: tuple[float, float, float, float]) -> None:
    """Click the centre of ``box`` (board units) of the page's board."""
    svg = page.box("svg.board")
    scale = svg["width"] / Layout(float(CELL)).width
    x, y, w, h = box
    page.click_at(svg["x"] + (x + w / 2) * scale, svg["y"] + (y + h / 2) * scale)


MOVES_PARAM = "new URLSearchParams(location.search).get('moves')"


def test_moves_played_on_the_board_and_the_keys(made, tmp_path):
    layout = Layout(float(CELL))
    with LiveServer(made.book) as server, Browser(tmp_path / "profile") as page:
        # a piece, then its square: 2g2f
        page.navigate(server.url)
        page.until("document.querySelector('svg.board')", "the board")
        start = page.evaluate(BOARD_SFEN)
        click_box(page, layout.square("2g"))
        page.until("document.querySelector('svg.board rect.selected')", "the selection")
        click_box(page, layout.square("2f"))
        page.until(f"{BOARD_SFEN} !== {start!r}", "the board after 2g2f")
        assert page.evaluate(MOVES_PARAM) == "2g2f"
        # a square no piece of the side to move can leave from: nothing is selected
        click_box(page, layout.square("5e"))
        assert page.evaluate("document.querySelectorAll('svg.board rect.selected').length") == 0
        # a piece in hand, then its square: after a bishop trade black drops B*5e
        page.navigate(server.url + "?moves=7g7f+3c3d+8h2b%2B+3a2b")
        page.until("document.querySelector('svg.board')", "the board")
        before = page.evaluate(BOARD_SFEN)
        board = cshogi.Board()
        for usi in ("7g7f", "3c3d", "8h2b+", "3a2b"):
            board.push_usi(usi)
        from bookgen.diagram import hand_boxes

        click_box(page, hand_boxes(board, layout)[(cshogi.BLACK, "B")])
        page.until("document.querySelector('svg.board rect.selected')", "the selection")
        click_box(page, layout.square("5e"))
        page.until(f"{BOARD_SFEN} !== {before!r}", "the board after B*5e")
        assert page.evaluate(MOVES_PARAM) == "7g7f 3c3d 8h2b+ 3a2b B*5e"
        # the left key goes back a ply, the right key follows the book's best move
        page.press("ArrowLeft")
        page.until(f"{BOARD_SFEN} === {before!r}", "the position before the drop")
        assert page.evaluate(MOVES_PARAM) == "7g7f 3c3d 8h2b+ 3a2b"
        page.navigate(server.url)
        page.until("document.querySelector('.nav a.forward')", "the best move link")
        best = page.evaluate("document.querySelector('#pv a').textContent")
        page.press("ArrowRight")
        page.until(f"{BOARD_SFEN} !== {start!r}", "the position after the best move")
        assert page.evaluate(MOVES_PARAM) == best


def test_a_bad_link_shows_the_400_page_in_the_browser(made, tmp_path):
    with LiveServer(made.book) as server, Browser(tmp_path / "profile") as page:
        page.navigate(server.url + "?moves=7g7f+7g7f")
        message = page.until("document.getElementById('error')", "the error message")
        assert message is not None
        text = page.evaluate("document.getElementById('error').textContent")
        assert text == "move 2 (7g7f): '7g7f' is not legal in this position"
