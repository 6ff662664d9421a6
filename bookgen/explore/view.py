"""What the explorer shows, read from a book opened read-only: :class:`Explorer`.

A place in the book is a line: a start position (the initial position, or an
sfen) and the USI moves played from it (:class:`Place`, parsed from a URL by
:func:`parse_place` or from the search box by :func:`parse_search`; anything
malformed raises :class:`PlaceError`, which says what is wrong). For a place
the explorer reads the position's columns, every ``moves`` row, the engine
analyses and the mistakes found there, the principal variation from it
(minimax-best moves for both sides), the book's value along the line and the
tree of book moves below it (two plies for the best moves on the page, then
:meth:`Explorer.tree`, one level per call).

Every read goes through :mod:`bookgen.store.browse` and
:mod:`bookgen.store.queries` (point reads by sfen and position id, all
parameters bound) on one connection opened with ``mode=ro``
(:func:`bookgen.store.snapshot.open_book_snapshot` with ``strict=True``):
the explorer never writes the book, not even a checkpoint, and sees what a
writer (``grow``, ``refine``) has committed, each call in one snapshot.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cshogi

from bookgen.errors import BookgenError
from bookgen.position import (
    STARTPOS_SFEN,
    InvalidMove,
    InvalidPosition,
    board_key,
    parse_move,
    parse_sfen,
)
from bookgen.store import browse, queries
from bookgen.store.own_moves import ValueColumn
from bookgen.store.snapshot import open_book_snapshot

__all__ = ["MAX_MOVES", "MoveView", "OpeningResult", "PlayerScore", "Place", "PlaceError",
           "PositionView", "TreeNode", "Explorer", "parse_place", "parse_search"]

MAX_MOVES = 600          # moves in one URL's line
MAX_TEXT = 8000          # characters of an sfen, a move list or a search
PV_PLIES = 40            # plies of the principal variation at most
TREE_OPEN = 3            # the position page's tree opens this many best moves a ply deeper
_USI = re.compile(r"^(?:[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i])$")


class PlaceError(BookgenError):
    """A malformed or illegal sfen, move or search text (a 400 page says it)."""


@dataclass(frozen=True)
class Place:
    """A line in the book: ``start`` (a normalised sfen, None for the initial
    position), its move number ``start_ply`` and the USI ``moves`` played from it."""

    start: str | None = None
    start_ply: int = 1
    moves: tuple[str, ...] = ()

    def board(self, plies: int | None = None) -> cshogi.Board:
        """The board after the first ``plies`` moves (all by default); the moves are
        legal (checked by :func:`parse_place`)."""
        board = cshogi.Board(f"{self.start or STARTPOS_SFEN} {self.start_ply}")
        for usi in self.moves[:plies]:
            board.push_usi(usi)
        return board

    def then(self, *moves: str) -> Place:
        return Place(self.start, self.start_ply, self.moves + tuple(moves))

    def cut(self, plies: int) -> Place:
        return Place(self.start, self.start_ply, self.moves[:plies])

    def query(self) -> dict[str, str]:
        """The URL query of the place (``sfen`` only when it does not start at the initial
        position, ``moves`` only when there are some)."""
        found: dict[str, str] = {}
        if self.start is not None:
            found["sfen"] = self.start + ("" if self.start_ply == 1 else f" {self.start_ply}")
        if self.moves:
            found["moves"] = " ".join(self.moves)
        return found

    def spec(self) -> str:
        """The place as a USI ``position`` argument (``startpos moves ...``)."""
        head = "startpos" if self.start is None else f"sfen {self.start} {self.start_ply}"
        return head + (" moves " + " ".join(self.moves) if self.moves else "")


def _check_moves(start: str | None, start_ply: int, moves: Sequence[str]) -> Place:
    if len(moves) > MAX_MOVES:
        raise PlaceError(f"moves: {len(moves)} moves, at most {MAX_MOVES}")
    board = cshogi.Board(f"{start or STARTPOS_SFEN} {start_ply}")
    for number, usi in enumerate(moves, 1):
        try:
            board.push(parse_move(board, usi))
        except InvalidMove as error:
            raise PlaceError(f"move {number} ({usi}): {error}") from None
    return Place(start, start_ply, tuple(moves))


def parse_place(sfen: str | None, moves: str | None) -> Place:
    """The place of a URL's ``sfen`` (None: the initial position) and ``moves`` (USI
    moves separated by spaces or commas); :class:`PlaceError` says what is wrong."""
    start, start_ply = None, 1
    if sfen is not None and sfen.strip():
        if len(sfen) > MAX_TEXT:
            raise PlaceError(f"sfen: longer than {MAX_TEXT} characters")
        try:
            position = parse_sfen(sfen)
        except InvalidPosition as error:
            raise PlaceError(f"sfen {sfen!r}: {error}") from None
        start_ply = position.ply or 1
        start = None if position.sfen == STARTPOS_SFEN and start_ply == 1 else position.sfen
    text = moves or ""
    if len(text) > MAX_TEXT:
        raise PlaceError(f"moves: longer than {MAX_TEXT} characters")
    return _check_moves(start, start_ply, text.replace(",", " ").split())


def parse_search(text: str) -> Place:
    """The place a search means: an sfen (``sfen ...`` or bare, ``moves ...`` may
    follow), ``startpos [moves ...]`` (``position`` may lead), or USI moves from the
    initial position."""
    if len(text) > MAX_TEXT:
        raise PlaceError(f"search: longer than {MAX_TEXT} characters")
    tokens = text.split()
    if tokens and tokens[0] == "position":
        tokens = tokens[1:]
    if not tokens:
        raise PlaceError("search: empty; give an sfen, 'startpos moves ...' or USI moves")
    if tokens[0] == "moves":
        tokens = tokens[1:]
    if tokens and all(_USI.match(t) for t in tokens):
        return parse_place(None, " ".join(tokens))
    if tokens and tokens[0] == "startpos":
        rest = tokens[1:]
        if rest and rest[0] != "moves":
            raise PlaceError(f"search: expected 'moves' after startpos, got {rest[0]!r}")
        return parse_place(None, " ".join(rest[1:]))
    if tokens and tokens[0] == "sfen":
        tokens = tokens[1:]
    cut = tokens.index("moves") if "moves" in tokens else len(tokens)
    if cut == 0:
        raise PlaceError("search: no position before 'moves'")
    if "/" not in tokens[0]:
        raise PlaceError(f"search: {tokens[0]!r} is neither an sfen, 'startpos' nor a USI "
                         "move")
    return parse_place(" ".join(tokens[:cut]), " ".join(tokens[cut + 1:]))


@dataclass(frozen=True)
class MoveView:
    """One ``moves`` row of a position (every column, ``docs/schema.md``), with the
    child's place in the book and the mistakes that name it."""

    row: dict[str, Any]
    own: bool
    child_in_book: bool
    child_moves: int
    mistakes: tuple[dict[str, Any], ...] = ()

    @property
    def move(self) -> str:
        return str(self.row["move"])

    @property
    def best_value(self) -> int | None:
        """The move's value for the side to move: minimax when refined, else the book's."""
        value = self.row["minimax_value"]
        return self.row["value"] if value is None else value


@dataclass(frozen=True)
class TreeNode:
    """A book move below a place: its ``move``, value, count, the number of book
    moves of its child (0: a leaf, or not in the book) and, when read already, the
    tree below the child (``children``)."""

    move: str
    value: int | None
    count: int
    child_moves: int
    children: tuple[TreeNode, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"move": self.move, "value": self.value, "count": self.count,
                "child_moves": self.child_moves,
                "children": [child.as_dict() for child in self.children]}


@dataclass(frozen=True)
class PositionView:
    """Everything the position page shows of a place."""

    place: Place
    sfen: str
    turn: int
    last_move: str | None
    position: dict[str, Any] | None          # the positions row; None: not in the book
    moves: tuple[MoveView, ...]              # best first
    analyses: tuple[dict[str, Any], ...]
    mistakes: tuple[dict[str, Any], ...]
    pv: tuple[str, ...]                      # from here, minimax-best for both sides
    line_values: tuple[int | None, ...]      # the book's value (black's view) at each ply
    pv_values: tuple[int | None, ...]        # the same along the PV (after each move)
    tree: tuple[TreeNode, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"sfen": self.sfen, "turn": self.turn, "place": self.place.query(),
                "position": self.place.spec(), "last_move": self.last_move,
                "in_book": self.position is not None, "columns": self.position,
                "moves": [{**m.row, "own": m.own, "child_in_book": m.child_in_book,
                           "mistakes": list(m.mistakes)} for m in self.moves],
                "analyses": list(self.analyses), "mistakes": list(self.mistakes),
                "pv": list(self.pv), "line_values": list(self.line_values),
                "pv_values": list(self.pv_values),
                "tree": [node.as_dict() for node in self.tree]}


@dataclass(frozen=True)
class PlayerScore:
    """One player's games and points from an opening's games."""

    player: str
    games: int
    points: float


@dataclass(frozen=True)
class OpeningResult:
    """The games played from one opening of the results files: the opening as
    written (``opening``), its place, its position's sfen, the number of games and
    each player's score. Built by the analysis stage
    (:func:`bookgen.analysis.openings.results_by_opening`) and handed to the explorer
    and the report."""

    opening: str
    place: Place
    sfen: str
    games: int
    scores: tuple[PlayerScore, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {"opening": self.opening, "sfen": self.sfen, "place": self.place.query(),
                "games": self.games,
                "scores": [{"player": s.player, "games": s.games, "points": s.points}
                           for s in self.scores]}


def _best_first(moves: list[MoveView]) -> list[MoveView]:
    return sorted(moves, key=lambda m: (not m.own, m.best_value is None,
                                        -(m.best_value or 0), -int(m.row["count"] or 0),
                                        m.move))


def _black_view(value: int | None, turn: int) -> int | None:
    return None if value is None else (value if turn == cshogi.BLACK else -value)


class Explorer:
    """The book at ``path``, opened read-only (``mode=ro``) for the explorer's reads.

    One connection serves every call, under a lock; each call reads in one
    transaction (one snapshot of the book) and ends it, so the next call sees
    what writers have committed since.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn = open_book_snapshot(self.path, strict=True)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Explorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """The connection, inside one read transaction."""
        with self._lock:
            queries.begin(self._conn)
            try:
                yield self._conn
            finally:
                queries.commit(self._conn)

    # -- a position -------------------------------------------------------------------

    def _moves(self, conn: sqlite3.Connection, position_id: int, board: cshogi.Board,
               mistakes: Sequence[dict[str, Any]]) -> list[MoveView]:
        rows = browse.moves_of(conn, position_id)
        children: list[str | None] = []
        for row in rows:
            move = board.move_from_usi(row["move"])
            if not move or not board.is_legal(move):   # a damaged row: shown, not followed
                children.append(None)
                continue
            board.push(move)
            children.append(board_key(board))
            board.pop()
        found = browse.positions_of(conn, [c for c in children if c is not None])
        views = []
        for row, child in zip(rows, children):
            marks = tuple(m for m in mistakes if row["move"] == m["book_move"])
            known = found.get(child) if child is not None else None
            views.append(MoveView(row={k: v for k, v in row.items() if k != "own"},
                                  own=bool(row["own"]), child_in_book=known is not None,
                                  child_moves=known[1] if known else 0, mistakes=marks))
        return _best_first(views)

    def _best(self, conn: sqlite3.Connection, sfen: str) -> tuple[str, int | None] | None:
        """The minimax-best move of ``sfen`` (best value, then count, then move) and its
        value; None when the position has no moves in the book."""
        rows = queries.position_moves(conn, sfen, ValueColumn.MINIMAX)
        if not rows:
            return None
        move, _count, value = min(rows, key=lambda r: (r[2] is None, -(r[2] or 0), -r[1],
                                                       r[0]))
        return move, value

    def _principal(self, conn: sqlite3.Connection, board: cshogi.Board
                   ) -> tuple[list[str], list[int | None]]:
        """The PV from ``board`` (left as it was) and the book value after each move."""
        pv: list[str] = []
        values: list[int | None] = []
        seen = {board_key(board)}
        while len(pv) < PV_PLIES:
            best = self._best(conn, board_key(board))
            if best is None:
                break
            move = board.move_from_usi(best[0])
            if not move or not board.is_legal(move):
                break
            board.push(move)
            pv.append(best[0])
            key = board_key(board)
            after = self._best(conn, key)
            values.append(_black_view(after[1] if after else None, board.turn))
            if key in seen:
                break
            seen.add(key)
        for _ in pv:
            board.pop()
        return pv, values

    def _line_values(self, conn: sqlite3.Connection, place: Place) -> list[int | None]:
        board = place.board(0)
        values = []
        for index in range(len(place.moves) + 1):
            best = self._best(conn, board_key(board))
            values.append(_black_view(best[1] if best else None, board.turn))
            if index < len(place.moves):
                board.push_usi(place.moves[index])
        return values

    def position(self, place: Place) -> PositionView:
        """What the position page shows of ``place``."""
        board = place.board()
        sfen = board_key(board)
        with self.snapshot() as conn:
            row = browse.position_of(conn, sfen)
            moves: list[MoveView] = []
            analyses: list[dict[str, Any]] = []
            mistakes: list[dict[str, Any]] = []
            if row is not None:
                mistakes = browse.mistakes_at(conn, row["id"])
                moves = self._moves(conn, row["id"], board, mistakes)
                analyses = browse.analyses_of(conn, row["id"])
            pv, pv_values = self._principal(conn, board)
            line_values = self._line_values(conn, place)
            tree = []
            for rank, m in enumerate(m for m in moves if m.own):
                below: tuple[TreeNode, ...] = ()
                if rank < TREE_OPEN and m.child_moves:
                    board.push_usi(m.move)
                    below = tuple(self._level(conn, board))
                    board.pop()
                tree.append(TreeNode(m.move, m.best_value, int(m.row["count"] or 0),
                                     m.child_moves, below))
        return PositionView(place=place, sfen=sfen, turn=board.turn,
                            last_move=place.moves[-1] if place.moves else None,
                            position=row, moves=tuple(moves), analyses=tuple(analyses),
                            mistakes=tuple(mistakes), pv=tuple(pv),
                            line_values=tuple(line_values), pv_values=tuple(pv_values),
                            tree=tuple(tree))

    def _level(self, conn: sqlite3.Connection, board: cshogi.Board) -> list[TreeNode]:
        row = browse.position_of(conn, board_key(board))
        if row is None:
            return []
        return [TreeNode(m.move, m.best_value, int(m.row["count"] or 0), m.child_moves)
                for m in self._moves(conn, row["id"], board, ()) if m.own]

    def tree(self, place: Place) -> list[TreeNode]:
        """The book's own moves of ``place``, best first, each with its child's number of
        book moves (one level of the tree)."""
        with self.snapshot() as conn:
            return self._level(conn, place.board())

    # -- lists --------------------------------------------------------------------------

    def mistakes(self, limit: int, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
        """(number of mistakes, the largest ones from ``offset`` on)."""
        with self.snapshot() as conn:
            return browse.largest_mistakes(conn, limit, offset)

    def runs(self) -> list[dict[str, Any]]:
        with self.snapshot() as conn:
            return browse.runs(conn)

    def in_book(self, sfens: Sequence[str]) -> dict[str, tuple[int, int]]:
        """sfen -> (position id, number of book moves) of those in the book."""
        with self.snapshot() as conn:
            return browse.positions_of(conn, sfens)
