"""Shared helpers for the bookgen test suite.

Everything here is written against cshogi and the standard library only, so
that expected results never come from the code under test:

* random legal positions by random walks from the initial position;
* a DB2016 text writer (with optional BOM / CRLF) for building input files;
* a small independent DB2016 parser for reading exported files;
* ``run_cli``: click's CliRunner on ``bookgen.cli.main``;
* ``dump_book``: the content of a book file read with the plain sqlite3 module;
* ``chromium_binary`` / ``run_chromium``: headless Chromium for rendering tests, and
  ``no_cjk_env``: an environment whose fontconfig has no CJK font.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cshogi
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings, strategies as st

from bookgen.cli import main as cli_main
from bookgen.engines.mcts import MctsSettings
from bookgen.grow import GrowBudget, GrowSettings

# Hypothesis judges no test by time: a loaded machine is slow, not wrong (the tests'
# own @settings keep these unless they say otherwise).
settings.register_profile("bookgen", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("bookgen")

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable

STARTPOS = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"
DB2016_HEADER = "#YANEURAOU-DB2016 1.00"


# --------------------------------------------------------------------------
# positions


def key_of(board: cshogi.Board) -> str:
    """Normalised sfen (board, turn, hands; no move number) straight from cshogi."""
    board_field, turn, hands, _ply = board.sfen().split(" ")
    return f"{board_field} {turn} {hands}"


def random_walk(rng: random.Random, plies: int, start: str | None = None
                ) -> tuple[cshogi.Board, list[str]]:
    """Play up to ``plies`` random legal moves; returns the board and the USI moves."""
    board = cshogi.Board(start) if start else cshogi.Board()
    played: list[str] = []
    for _ in range(plies):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        played.append(cshogi.move_to_usi(move))
        board.push(move)
    return board, played


def random_positions(seed: int, count: int, max_plies: int = 60) -> list[cshogi.Board]:
    """``count`` boards reached by independent random walks (duplicates possible)."""
    rng = random.Random(seed)
    return [random_walk(rng, rng.randint(0, max_plies))[0] for _ in range(count)]


def generate_blocks(seed: int, positions: int) -> list[tuple[str, list[tuple]]]:
    """``positions`` distinct positions met on random games, 1-2 moves each."""
    rng = random.Random(seed)
    seen: dict[str, tuple[int, list[tuple]]] = {}
    while len(seen) < positions:
        board = cshogi.Board()
        for _ in range(rng.randint(5, 80)):
            legal = list(board.legal_moves)
            if not legal:
                break
            key = key_of(board)
            if key not in seen:
                chosen = rng.sample(legal, min(2, len(legal)))
                seen[key] = (board.move_number, [
                    (cshogi.move_to_usi(m), None, rng.randint(-900, 900), rng.randint(1, 30),
                     rng.randint(1, 500)) for m in chosen])
                if len(seen) == positions:
                    break
            board.push(rng.choice(legal))
    return [(f"{key} {ply}", moves) for key, (ply, moves) in seen.items()]


@st.composite
def walks(draw, max_plies: int = 40, min_plies: int = 0):
    """Hypothesis strategy: (board, usi moves) of a random walk from the start.

    Each ply draws an index into the legal move list, so examples shrink to
    short walks and first moves.
    """
    plies = draw(st.integers(min_plies, max_plies))
    board = cshogi.Board()
    played: list[str] = []
    for _ in range(plies):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = legal[draw(st.integers(0, len(legal) - 1))]
        played.append(cshogi.move_to_usi(move))
        board.push(move)
    return board, played


def legal_usis(board: cshogi.Board) -> list[str]:
    return [cshogi.move_to_usi(m) for m in board.legal_moves]


def replies_after(board: cshogi.Board, usi: str) -> list[str]:
    """Legal USI replies after ``usi`` is played on ``board`` (board unchanged)."""
    copy = cshogi.Board(board.sfen())
    copy.push_usi(usi)
    return legal_usis(copy)


# --------------------------------------------------------------------------
# DB2016 text


def db2016_text(blocks: Iterable[tuple[str, Sequence[object]]], *, header: bool = True,
                bom: bool = False, crlf: bool = False) -> str:
    """DB2016 text for ``blocks``: (sfen line body, moves).

    A move is either a raw string (written as is) or a tuple
    ``(move, ponder, value, depth, count)`` where ``None`` is written ``none``.
    """
    lines: list[str] = [DB2016_HEADER] if header else []
    for sfen, moves in blocks:
        lines.append(f"sfen {sfen}")
        for move in moves:
            if isinstance(move, str):
                lines.append(move)
            else:
                lines.append(" ".join("none" if f is None else str(f) for f in move))
    newline = "\r\n" if crlf else "\n"
    text = newline.join(lines) + newline
    return ("\ufeff" + text) if bom else text


def write_db2016(path: Path, blocks: Iterable[tuple[str, Sequence[object]]], **kwargs) -> Path:
    path = Path(path)
    path.write_bytes(db2016_text(blocks, **kwargs).encode("utf-8"))
    return path


@dataclass
class ParsedDb2016:
    header: str
    noe: str | None
    blocks: list[tuple[str, int, list[tuple[str, str | None, int | None, int | None, int]]]]

    def entries(self) -> set[tuple]:
        return {(sfen, *move) for sfen, _ply, moves in self.blocks for move in moves}


def parse_db2016(text: str) -> ParsedDb2016:
    """A deliberately strict parser for what ``bookgen export`` writes.

    Any deviation from ``sfen B T H PLY`` / ``move ponder value depth count``
    fails an assertion.
    """
    def field(token: str) -> int | None:
        return None if token == "none" else int(token)

    lines = text.split("\n")
    assert lines[-1] == "", "file must end with a newline"
    lines = lines[:-1]
    assert lines, "empty export"
    header = lines[0]
    noe = None
    body = lines[1:]
    if body and body[0].startswith("# NOE:"):
        noe = body[0]
        body = body[1:]
    blocks: list = []
    for line in body:
        assert "\r" not in line
        if line.startswith("sfen "):
            parts = line.split(" ")
            assert len(parts) == 5, line
            assert parts[4].lstrip("-").isdigit(), line
            blocks.append((" ".join(parts[1:4]), int(parts[4]), []))
        else:
            assert blocks, f"move line before any sfen: {line!r}"
            parts = line.split(" ")
            assert len(parts) == 5, line
            move, ponder, value, depth, count = parts
            blocks[-1][2].append((move, None if ponder == "none" else ponder,
                                  field(value), field(depth), int(count)))
    return ParsedDb2016(header, noe, blocks)


# --------------------------------------------------------------------------
# books


# A transposition row an import or merge stored (the own-moves rule of docs/schema.md).
LINK_ROW = ("(m.value IS NULL AND m.depth IS NULL AND m.count = 0 AND m.run_id IN "
            "(SELECT id FROM runs WHERE command = 'link'))")


def dump_book(path: Path) -> dict[str, list[tuple]]:
    """Positions, moves (the book's own: not the link rows of imports and merges),
    link rows, runs (the link runs apart) and meta of a book, read with plain sqlite3."""
    # Read-write connection in query_only mode: closing it checkpoints and
    # removes the WAL files, so a dumped book can be copied as one file.
    conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=rw", uri=True)
    conn.execute("PRAGMA query_only = ON")
    try:
        return {
            "positions": conn.execute(
                "SELECT sfen, zobrist, ply, turn FROM positions ORDER BY sfen").fetchall(),
            "moves": conn.execute(
                "SELECT p.sfen, m.move, m.ponder, m.value, m.depth, m.count "
                f"FROM moves m JOIN positions p ON p.id = m.position_id WHERE NOT {LINK_ROW} "
                "ORDER BY p.sfen, m.move").fetchall(),
            # the transposition rows imports and merges store (their link runs)
            "links": conn.execute(
                "SELECT p.sfen, m.move, c.sfen FROM moves m "
                "JOIN positions p ON p.id = m.position_id "
                f"LEFT JOIN positions c ON c.id = m.child_id WHERE {LINK_ROW} "
                "ORDER BY p.sfen, m.move").fetchall(),
            "runs": conn.execute(
                "SELECT * FROM runs WHERE command <> 'link' ORDER BY id").fetchall(),
            "link_runs": conn.execute(
                "SELECT * FROM runs WHERE command = 'link' ORDER BY id").fetchall(),
            "meta": conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall(),
        }
    finally:
        conn.close()


def book_entries(path: Path) -> set[tuple]:
    """{(sfen, move, ponder, value, depth, count)} of a book."""
    return set(dump_book(path)["moves"])


def integrity_ok(path: Path) -> bool:
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


# --------------------------------------------------------------------------
# the command line


def small_grow(playouts: int, positions: int, seed: int = 0, **fields) -> GrowSettings:
    """Settings of a small grow run: ``positions`` expansions of ``playouts`` playouts,
    grow's defaults for everything but ``fields``."""
    return GrowSettings(mcts=MctsSettings(playouts=playouts),
                        budget=GrowBudget(positions=positions), seed=seed, **fields)


def results_games(results: Path) -> list[sqlite3.Row]:
    """The ``games`` rows of the match results file ``results``, in order."""
    db = sqlite3.connect(results)
    db.row_factory = sqlite3.Row
    try:
        return db.execute("SELECT * FROM games ORDER BY id").fetchall()
    finally:
        db.close()


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """Where a browser test saves its screenshot ``name``: the README's image in
    docs/images when BOOKGEN_WRITE_SCREENSHOTS=1 (to refresh it), otherwise
    ``tmp_path``, so a test run leaves the checkout as it was."""
    if os.environ.get("BOOKGEN_WRITE_SCREENSHOTS") == "1":
        return ROOT / "docs" / "images" / name
    return tmp_path / name


def run_cli(*args: object, expect: int | None = 0):
    """Invoke ``bookgen ARGS`` in-process; checks the exit code unless ``expect`` is None."""
    runner = CliRunner()
    result = runner.invoke(cli_main, [str(a) for a in args], catch_exceptions=True)
    if expect is not None:
        assert result.exit_code == expect, (
            f"bookgen {' '.join(map(str, args))}: exit {result.exit_code}, expected {expect}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}\n"
            f"exception: {result.exception!r}")
    return result


def run_script(tmp_path: Path, source: str, *args: object,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a Python script in a fresh interpreter (for code that may abort the
    process, such as cshogi on garbage); fails the test on a non-zero exit."""
    script = tmp_path / "script.py"
    script.write_text(source)
    proc = subprocess.run([PYTHON, str(script), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT))
    assert proc.returncode == 0, (
        f"exit code {proc.returncode} (negative = killed by a signal)\n"
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}")
    return proc


def run_bookgen_process(*args: object, env: dict[str, str] | None = None,
                        timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m bookgen.cli ARGS`` in a fresh interpreter."""
    full_env = dict(os.environ)
    full_env.pop("BOOKGEN_FAULT", None)
    if env:
        full_env.update(env)
    return subprocess.run([PYTHON, "-m", "bookgen.cli", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=timeout,
                          cwd=str(ROOT))


@pytest.fixture
def cli():
    return run_cli


# --------------------------------------------------------------------------
# headless Chromium (the report and board diagram renders)

CHROMIUM_TIMEOUT = 180


def chromium_binary() -> str:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium") or ""):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("chromium is not installed: run 'make engines' (it installs chromium) or "
                "apt-get install chromium")


def run_chromium(profile: Path, *args: str, env: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess:
    """Run headless Chromium with its own ``profile`` directory; ``env`` replaces the
    environment (a fontconfig setting, say). Fails the test unless it exits 0."""
    command = [chromium_binary(), "--headless", "--disable-gpu", "--no-sandbox",
               "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", f"--user-data-dir={profile}", *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT,
                          env=env)
    assert proc.returncode == 0, f"{' '.join(command)}: exit {proc.returncode}\n{proc.stderr}"
    return proc


# Chromium without CJK fonts: the board must read all the same (its pieces are outlines).
NO_CJK_FONTS = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <cachedir>{cache}</cachedir>
  <selectfont><rejectfont>
    <pattern><patelt name="lang"><string>ja</string></patelt></pattern>
    <pattern><patelt name="lang"><string>zh-cn</string></patelt></pattern>
    <pattern><patelt name="lang"><string>zh-tw</string></patelt></pattern>
    <pattern><patelt name="lang"><string>zh-hk</string></patelt></pattern>
    <pattern><patelt name="lang"><string>ko</string></patelt></pattern>
  </rejectfont></selectfont>
</fontconfig>
"""



@pytest.fixture(scope="session")
def no_cjk_env(tmp_path_factory) -> dict[str, str]:
    """An environment whose fontconfig has no font for Japanese (nor Chinese, Korean)."""
    directory = tmp_path_factory.mktemp("fontconfig")
    conf = directory / "fonts.conf"
    conf.write_text(NO_CJK_FONTS.format(cache=directory / "cache"), encoding="utf-8")
    env = {**os.environ, "FONTCONFIG_FILE": str(conf)}
    if shutil.which("fc-list"):
        for lang in ("ja", "zh-cn", "ko"):
            listed = subprocess.run(["fc-list", f":lang={lang}", "family"], env=env,
                                    capture_output=True, text=True, check=True).stdout
            assert listed.strip() == "", f"fonts for {lang} still visible: {listed}"
    return env


# --------------------------------------------------------------------------
# a DB2016 file large enough for the parallel reader

LARGE_POSITIONS = 140_000


@pytest.fixture(scope="session")
def large_db2016(tmp_path_factory):
    """(path, blocks, bad position line, bad move line) of a ~17 MB DB2016 file
    with one invalid position in the middle and one invalid move at the end."""
    blocks = generate_blocks(seed=4242, positions=LARGE_POSITIONS)
    blocks.insert(LARGE_POSITIONS // 3, ("9/9/9/9/9/9/9/9/9 b - 0", ["none none 1 1 1"]))
    blocks.append((blocks[0][0], ["7g7e none 0 0 1"]))
    path = write_db2016(tmp_path_factory.mktemp("large") / "large.db", blocks)
    lines = path.read_text().split("\n")
    bad_position_line = lines.index("sfen 9/9/9/9/9/9/9/9/9 b - 0") + 1
    bad_move_line = len(lines) - 1
    assert lines[bad_move_line - 1] == "7g7e none 0 0 1"
    return path, blocks, bad_position_line, bad_move_line
