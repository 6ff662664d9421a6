"""refine minimax: values over the book graph against a plain recursive negamax.

The reference here is written from the rules only (cshogi and the standard
library): it finds every legal move into a book position by pushing it and
comparing sfens, and values each position by a recursive negamax over the
game that starts there, with the positions of the game so far on a path
(a move back onto the path ends the game: the mover's draw value, or a loss
for a side that gave check with every move since) and a memo for positions
that lie on no cycle.
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import cshogi
import pytest

from conftest import PYTHON, ROOT, key_of, parse_db2016, run_cli, small_grow, write_db2016
from linkcheck import forget_links

MATE = 30000
START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"


# ------------------------------------------------------------------ the reference


def cp(per_mille: int) -> int:
    p = per_mille / 1000
    if p >= 1 - 1e-12:
        return MATE
    if p <= 1e-12:
        return -MATE
    return int(round(max(-MATE, min(MATE, -math.log(1 / p - 1) * 756))))


@dataclass
class RefBook:
    """Positions with their book moves (move -> (value, count)) and, computed by
    brute force, every legal move into a book position."""

    moves: dict[str, dict[str, tuple[int | None, int]]]
    turn: dict[str, int] = field(default_factory=dict)
    in_check: dict[str, bool] = field(default_factory=dict)
    children: dict[str, dict[str, str]] = field(default_factory=dict)  # move -> child node
    on_cycle: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        board = cshogi.Board()
        for sfen in self.moves:
            board.set_sfen(sfen + " 1")
            self.turn[sfen] = board.turn
            self.in_check[sfen] = board.is_check()
            found = {}
            for move in board.legal_moves:
                board.push(move)
                child = key_of(board)
                board.pop()
                if child in self.moves:
                    found[cshogi.move_to_usi(move)] = child
            self.children[sfen] = found
        for sfen in self.moves:   # on a cycle: reaches itself
            seen, todo = set(), list(self.children[sfen].values())
            while todo:
                node = todo.pop()
                if node == sfen:
                    self.on_cycle.add(sfen)
                    break
                if node not in seen:
                    seen.add(node)
                    todo.extend(self.children[node].values())

    def options(self, sfen: str, leaf_value=None) -> list[tuple[str, str | None, int]]:
        """(move, child node or None, leaf value) of every option."""
        result = []
        for move, (value, _count) in self.moves[sfen].items():
            if move not in self.children[sfen]:
                v = 0 if value is None else max(-MATE, min(MATE, value))
                if leaf_value is not None:
                    v = leaf_value(sfen, move)
                result.append((move, None, v))
        for move, child in self.children[sfen].items():
            result.append((move, child, 0))
        return result


INF = math.inf


def ref_key(value: int, depth: float, draw: int) -> tuple:
    """Larger is better for a mover whose draw value is ``draw``."""
    return (value, -depth) if value >= draw else (value, depth)


class Reference:
    """Recursive negamax over a RefBook, one game per owner colour (the draw value
    of a repetition is the owner's; both colours' coincide when they sum to 1000)."""

    def __init__(self, book: RefBook, draw_black: int = 500, draw_white: int = 500,
                 leaf_value=None) -> None:
        self.book, self.leaf_value = book, leaf_value
        self.draws = {0: cp(draw_black), 1: -cp(draw_white)}   # black's view, per owner
        self.memo: dict[int, dict[str, tuple[int, float]]] = {0: {}, 1: {}}

    def value(self, root: str, owner: int | None = None) -> tuple[int, float]:
        """(value, depth) of the game starting at ``root`` for its side to move."""
        book = self.book
        owner = book.turn[root] if owner is None else owner
        R = self.draws[owner]
        memo = self.memo[owner]
        path: list[str] = []

        def negamax(node: str) -> tuple[int, float]:
            if node in memo:
                return memo[node]
            path.append(node)
            black = book.turn[node] == 0
            draw = R if black else -R
            best = None
            for _move, child, leaf in book.options(node, self.leaf_value):
                if child is None:
                    line = (leaf, 0)
                elif child in path:
                    stretch = path[path.index(child):]
                    black_checks = all(book.in_check[p] for p in stretch if book.turn[p] == 1)
                    white_checks = all(book.in_check[p] for p in stretch if book.turn[p] == 0)
                    outcome = R
                    if black_checks and not white_checks:
                        outcome = -MATE
                    elif white_checks and not black_checks:
                        outcome = MATE
                    line = (outcome if black else -outcome, INF)
                else:
                    v, d = negamax(child)
                    line = (-v, d + 1)
                if best is None or ref_key(*line, draw) > ref_key(*best, draw):
                    best = line
            path.pop()
            if node not in book.on_cycle:
                memo[node] = best
            return best

        return negamax(root)

    def all_values(self) -> tuple[dict, dict]:
        """{sfen: (value, depth)} and {(sfen, move): (value, depth)}, movers' views."""
        book = self.book
        positions = {sfen: self.value(sfen) for sfen in book.moves}
        options = {}
        for sfen in book.moves:
            for move, child, leaf in book.options(sfen, self.leaf_value):
                if child is None:
                    options[(sfen, move)] = (leaf, 0)
                else:
                    v, d = self.value(child, owner=book.turn[sfen])
                    options[(sfen, move)] = (-v, d + 1)
        return positions, options


# ------------------------------------------------------------------ books


SHUFFLES = ("5i5h", "5h5i", "5a5b", "5b5a", "2h3h", "3h2h", "8b7b", "7b8b")
PUSHES = ("7g7f", "3c3d", "2g2f", "8c8d", "1g1f", "9c9d", "6g6f", "4c4d")
VALUES = (-300, -100, -50, 0, 0, 0, 50, 100, 300, None)


def legal_map(board: cshogi.Board) -> dict[str, int]:
    return {cshogi.move_to_usi(m): m for m in board.legal_moves}


def shuffle_book(seed: int, positions: int = 40, shuffles=SHUFFLES, pushes=PUSHES,
                 values=VALUES, extra_leaves: int = 2, push_rate: float = 0.3,
                 start: str = START, rng: random.Random | None = None, branching: int = 1
                 ) -> dict[str, dict]:
    """A book over king/rook shuffles (cycles) and pawn pushes (exits to other
    cycles), grown in random order; some other legal moves as leaf moves."""
    rng = rng or random.Random(seed)
    board = cshogi.Board()
    book: dict[str, dict] = {}
    queue = [start]
    while queue and len(book) < positions:
        sfen = queue.pop(rng.randrange(len(queue)))
        if sfen in book:
            continue
        board.set_sfen(sfen + " 1")
        legal = legal_map(board)
        cycle_moves = [u for u in shuffles if u in legal]
        exit_moves = [u for u in pushes if u in legal]
        chosen = rng.sample(cycle_moves, rng.randint(min(1, len(cycle_moves)),
                                                     min(2, len(cycle_moves))))
        if exit_moves and (not chosen or rng.random() < push_rate):
            chosen += rng.sample(exit_moves, rng.randint(1, min(branching, len(exit_moves))))
        others = [u for u in legal if u not in chosen]
        leaves = rng.sample(others, rng.randint(0 if chosen else 1,
                                                min(extra_leaves, len(others))))
        if not chosen + leaves:
            continue
        book[sfen] = {u: (rng.choice(values), rng.randint(1, 50)) for u in chosen + leaves}
        for usi in chosen:
            board.push(legal[usi])
            queue.append(key_of(board))
            board.pop()
    return book


def tree_book(seed: int, positions: int = 40, values=VALUES) -> dict[str, dict]:
    """Random walks from the start: transpositions, no cycles (pawn pushes only)."""
    return shuffle_book(seed, positions, shuffles=(), values=values, push_rate=1.0,
                        pushes=PUSHES + ("5g5f", "5c5d", "4g4f", "6c6d"), branching=2)


def blocks_of(book: dict[str, dict]) -> list[tuple[str, list[tuple]]]:
    return [(f"{sfen} 0", [(move, None, value, 5, count)
                           for move, (value, count) in moves.items()])
            for sfen, moves in book.items()]


def import_book(tmp_path: Path, book: dict[str, dict], name: str = "book") -> Path:
    source = write_db2016(tmp_path / f"{name}.db", blocks_of(book))
    target = tmp_path / f"{name}.sqlite"
    run_cli("import", source, "-b", target)
    return target


def stored_values(path: Path) -> tuple[dict, dict]:
    """({sfen: (value, depth)}, {(sfen, move): (value, depth)}) as refine stored them."""
    conn = sqlite3.connect(path)
    try:
        positions = {sfen: (v, INF if d is None else d) for sfen, v, d in conn.execute(
            "SELECT sfen, minimax_value, minimax_depth FROM positions "
            "WHERE id IN (SELECT position_id FROM moves)")}
        moves = {(sfen, move): (v, INF if d is None else d) for sfen, move, v, d in conn.execute(
            "SELECT p.sfen, m.move, m.minimax_value, m.minimax_depth FROM moves m "
            "JOIN positions p ON p.id = m.position_id")}
    finally:
        conn.close()
    return positions, moves


# A white king chased by a black rook along rank a / rank e (every rook move gives
# check), and the colour-swapped position: perpetual check by black, by white.
CHECKED_WHITE = "4k4/9/9/9/4R4/9/9/9/4K4 w -"
CHECKED_BLACK = "4k4/9/9/9/4r4/9/9/9/4K4 b -"
CHASE = ("5a4a", "4a5a", "5a6a", "6a5a", "5e4e", "4e5e", "5e6e", "6e5e", "5i5h", "5h5i",
         "5i4i", "4i5i", "5i6i", "6i5i", "5a5b", "5b5a", "4a4b", "4b4a")


def check_book(seed: int, positions: int = 30, values=VALUES) -> dict[str, dict]:
    """Books around perpetual-check loops of either colour, with king shuffles that
    break them and leaf moves as exits."""
    rng = random.Random(seed)
    start = CHECKED_WHITE if seed % 2 == 0 else CHECKED_BLACK
    return shuffle_book(seed, positions, shuffles=CHASE, pushes=(), values=values,
                        extra_leaves=2, start=start, rng=rng)


def trusted(book: dict[str, dict]):
    """dlshogi's trusted score of each book move: the minimum stored value of the
    position's moves up to it in count order (count desc, then value desc, then move)."""
    scores = {}

    def stored(moves, move):
        value = moves[move][0]
        return 0 if value is None else max(-MATE, min(MATE, value))

    for sfen, moves in book.items():
        running = MATE
        for move in sorted(moves, key=lambda m: (-moves[m][1], -stored(moves, m), m)):
            running = min(running, stored(moves, move))
            scores[(sfen, move)] = running
    return lambda sfen, move: scores[(sfen, move)]


# ------------------------------------------------------------------ helpers


def refine(path: Path, *args: object) -> dict:
    return json.loads(run_cli("refine", "minimax", "-b", path, "--json", *args).stdout)


def assert_matches_reference(path: Path, book: dict[str, dict], draw_black: int = 500,
                             draw_white: int = 500, leaf_value=None) -> None:
    got_positions, got_moves = stored_values(path)
    want_positions, want_moves = Reference(RefBook(book), draw_black, draw_white,
                                           leaf_value).all_values()
    assert got_positions == want_positions
    assert got_moves == want_moves   # book moves and every transposition edge


def cycle_of(start: str, moves: list[str]) -> list[str]:
    board = cshogi.Board(start + " 1")
    positions = []
    for usi in moves:
        positions.append(key_of(board))
        board.push_usi(usi)
    assert key_of(board) == positions[0], "the moves must return to the start"
    return positions


# ------------------------------------------------------------------ against the reference


DRAWS = [(500, 500), (300, 700), (400, 400), (650, 600), (0, 1000), (1000, 1000), (520, 480)]


# Seeds and sizes keep the reference (exponential on cycles) under a second each.
@pytest.mark.parametrize("seed, size", [*((s, 30) for s in range(12)), (1, 40), (3, 40)])
def test_books_with_many_cycles_match_the_reference(tmp_path, seed, size):
    book = shuffle_book(seed, positions=size, push_rate=0.15)
    path = import_book(tmp_path, book)
    draw_black, draw_white = DRAWS[seed % len(DRAWS)]
    summary = refine(path, "--draw-value-black", draw_black, "--draw-value-white", draw_white)
    assert summary["cycle_components"] >= 1 and summary["positions_in_cycles"] >= 4
    assert_matches_reference(path, book, draw_black, draw_white)


@pytest.mark.parametrize("seed", range(4))
def test_books_without_cycles_match_the_reference(tmp_path, seed):
    book = tree_book(seed, positions=60)
    path = import_book(tmp_path, book)
    summary = refine(path)
    assert summary["cycle_components"] == 0
    assert summary["transposition_edges"] >= 1   # moves orders that meet
    assert_matches_reference(path, book)


@pytest.mark.parametrize("seed", [0, 1, 3, 5, 6, 11, 12, 15, 17, 26])  # with checking cycles
def test_perpetual_check_books_match_the_reference(tmp_path, seed):
    book = check_book(seed, positions=24)
    path = import_book(tmp_path, book)
    draw_black, draw_white = DRAWS[seed % 3]
    summary = refine(path, "--draw-value-black", draw_black, "--draw-value-white", draw_white)
    assert summary["checking_components"] >= 1
    assert summary["checking_components_searched"] == summary["checking_components"]
    assert_matches_reference(path, book, draw_black, draw_white)


def for_random_books(tmp_path, refine_and_check):
    """Call ``refine_and_check(work_dir, book, draws)`` on 12 random books (hypothesis,
    derandomised): shuffle cycles, perpetual checks and trees, per-side draw values."""
    from hypothesis import given, settings, strategies as st

    counter = iter(range(10**6))

    @settings(max_examples=12, deadline=None, derandomize=True)
    @given(seed=st.integers(0, 10**6), size=st.sampled_from([10, 20, 30]),
           draws=st.sampled_from(DRAWS), kind=st.sampled_from(["shuffle", "check", "tree"]),
           values=st.sampled_from([VALUES, (-1, 0, 1), (-MATE, 0, MATE, 7), (-200, 200)]))
    def check(seed, size, draws, kind, values):
        book = {"shuffle": shuffle_book, "check": check_book, "tree": tree_book}[kind](
            seed, size, values=values)
        work = tmp_path / f"h{next(counter)}"
        work.mkdir()
        refine_and_check(work, book, draws)

    check()


def test_random_books_match_the_reference_through_the_api(tmp_path):
    from bookgen.refine.minimax import MinimaxSettings, refine_minimax
    from bookgen.values import DrawValues

    def refine_and_check(work, book, draws):
        path = import_book(work, book)
        refine_minimax(path, MinimaxSettings(draws=DrawValues(*draws)))
        assert_matches_reference(path, book, *draws)

    for_random_books(tmp_path, refine_and_check)


# ------------------------------------------------------------------ hand-computed cases


# The kings step aside and back: 5i5h 5a5b 5h5i 5b5a returns to the start.
KING_WALTZ = ["5i5h", "5a5b", "5h5i", "5b5a"]


def waltz_book(exit_value: int) -> tuple[dict[str, dict], list[str]]:
    """The four positions of the waltz, each with its waltz move and a leaf exit
    (a pawn push) worth ``exit_value`` to the side to move."""
    cycle = cycle_of(START, KING_WALTZ)
    exits = ["7g7f", "3c3d", "7g7f", "3c3d"]
    book = {sfen: {move: (None, 5), exit: (exit_value, 10)}
            for sfen, move, exit in zip(cycle, KING_WALTZ, exits)}
    return book, cycle


@pytest.mark.parametrize("draws, expected", [
    # A repetition is worth 0: better than the exits, nobody leaves, no depth.
    ((500, 500), [(0, INF)] * 4),
    # Both sides dislike draws (-641 cp): the side to move leaves at once, since
    # the opponent would complete the repetition.
    ((300, 300), [(-500, 0)] * 4),
    # Both like draws (+641): the side to move goes on; the opponent, who would
    # otherwise let the mover complete the repetition, leaves: +500 in one ply.
    ((700, 700), [(500, 1)] * 4),
    # Black dislikes draws, white likes them (values sum to 1000: one game).
    ((300, 700), [(-500, 0), (500, 1), (-500, 0), (500, 1)]),
])
def test_repetition_uses_each_sides_draw_value(tmp_path, draws, expected):
    book, cycle = waltz_book(-500)
    path = import_book(tmp_path, book)
    summary = refine(path, "--draw-value-black", draws[0], "--draw-value-white", draws[1])
    assert summary["cycle_components"] == 1 and summary["positions_in_cycles"] == 4
    positions, _ = stored_values(path)
    assert [positions[sfen] for sfen in cycle] == expected
    assert_matches_reference(path, book, *draws)


def chase_book(exit_black: int, exit_white: int, checker: str = "black"
               ) -> tuple[dict[str, dict], list[str]]:
    """The rook checks the king on every move while the king steps back and forth:
    [checked side to move, checker, checked, checker]; each has a leaf exit."""
    if checker == "black":
        cycle = cycle_of(CHECKED_WHITE, ["5a4a", "5e4e", "4a5a", "4e5e"])
        moves = ["5a4a", "5e4e", "4a5a", "4e5e"]
        exits = ["5a6a", "5i5h", "4a3a", "5i5h"]
        values = [exit_white, exit_black, exit_white, exit_black]
    else:
        cycle = cycle_of(CHECKED_BLACK, ["5i4i", "5e4e", "4i5i", "4e5e"])
        moves = ["5i4i", "5e4e", "4i5i", "4e5e"]
        exits = ["5i6i", "5a5b", "4i3i", "5a5b"]
        values = [exit_black, exit_white, exit_black, exit_white]
    book = {sfen: {move: (None, 5), exit: (value, 10)}
            for sfen, move, exit, value in zip(cycle, moves, exits, values)}
    return book, cycle


@pytest.mark.parametrize("checker", ["black", "white"])
def test_perpetual_check_loses_for_the_checking_side(tmp_path, checker):
    # Exits are bad for both (-500 for the checker, -400 for the checked side):
    # the checker must leave before the repetition, the checked side keeps going.
    exit_checker, exit_checked = -500, -400
    book, cycle = chase_book(*((exit_checker, exit_checked) if checker == "black"
                               else (exit_checked, exit_checker)), checker=checker)
    path = import_book(tmp_path, book)
    summary = refine(path)
    assert summary["checking_components"] == 1
    positions, moves = stored_values(path)
    # checked side to move: +500 in three plies (the checker leaves at -500);
    # checker to move: -500, and two plies longer is better when losing.
    assert [positions[s] for s in cycle] == [(500, 3), (-500, 2), (500, 3), (-500, 2)]
    assert_matches_reference(path, book)


def test_perpetual_check_is_a_win_for_the_checked_side_without_exits(tmp_path):
    # The checker's exits are mated lines: everything loses for it, and losing it
    # prefers the longest line, the perpetual check (infinitely long).
    book, cycle = chase_book(-MATE, 100, checker="black")
    path = import_book(tmp_path, book)
    refine(path)
    positions, _ = stored_values(path)
    assert positions[cycle[1]] == (-MATE, INF)
    assert positions[cycle[0]] == (MATE, INF)
    assert_matches_reference(path, book)


def test_ties_prefer_short_wins_and_long_losses(tmp_path):
    """P: leaf 7g7f +100, or 2g2f into C where white's only move is worth -100 to
    white (+100 to black, one ply longer)."""
    board = cshogi.Board()
    start = key_of(board)
    board.push_usi("2g2f")
    child = key_of(board)
    book = {start: {"7g7f": (100, 10), "2g2f": (None, 5)}, child: {"3c3d": (-100, 7)}}
    path = import_book(tmp_path, book)
    refine(path)
    positions, moves = stored_values(path)
    assert positions[start] == (100, 0)            # winning: the shorter line
    assert moves[(start, "2g2f")] == (100, 1)
    assert positions[child] == (-100, 0)
    book[start]["7g7f"] = (-100, 10)
    book[child]["3c3d"] = (100, 7)
    path = import_book(tmp_path, book, name="losing")
    refine(path)
    positions, _ = stored_values(path)
    assert positions[start] == (-100, 1)           # losing: the longer line
    book[start]["7g7f"] = (0, 10)
    book[child]["3c3d"] = (0, 7)
    path = import_book(tmp_path, book, name="draw")
    refine(path)
    positions, _ = stored_values(path)
    assert positions[start] == (0, 0)              # draw-valued tie: the shorter line


# ------------------------------------------------------------------ what is stored


def book_rows(path: Path) -> list[tuple]:
    """Everything but the minimax columns and child links, for 'unchanged' checks."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT p.sfen, m.move, m.ponder, m.value, m.depth, m.count, m.visits, m.prior, "
            "m.win_rate, m.eval_value, m.engine_score, m.run_id FROM moves m "
            "JOIN positions p ON p.id = m.position_id ORDER BY p.sfen, m.move").fetchall()
    finally:
        conn.close()


def test_import_stores_the_transposition_rows(tmp_path):
    book = shuffle_book(3, positions=30)
    path = import_book(tmp_path, book)
    ref = RefBook(book)
    transpositions = {(sfen, move) for sfen in book for move in ref.children[sfen]
                      if move not in book[sfen]}
    rows = book_rows(path)
    assert transpositions
    assert {(row[0], row[1]) for row in rows if row[-1] != 1} == transpositions
    assert all(row[2:6] == (None, None, None, 0) for row in rows if row[-1] != 1)
    summary = refine(path)
    assert summary["transposition_rows_added"] == 0
    assert summary["transposition_edges"] == len(transpositions)


def test_refine_keeps_raw_values_and_adds_transposition_rows(tmp_path):
    book = shuffle_book(3, positions=30)
    path = import_book(tmp_path, book)
    forget_links(path)
    before = book_rows(path)
    summary = refine(path)
    after = book_rows(path)
    added = [row for row in after if row not in before]
    assert [row for row in after if row in before] == before      # nothing changed
    ref = RefBook(book)
    transpositions = {(sfen, move) for sfen in book for move in ref.children[sfen]
                      if move not in book[sfen]}
    assert {(row[0], row[1]) for row in added} == transpositions
    assert len(added) == summary["transposition_rows_added"] == summary["transposition_edges"]
    assert all(row[2:6] == (None, None, None, 0) for row in added)
    conn = sqlite3.connect(path)
    try:
        links = conn.execute(
            "SELECT p.sfen, m.move, c.sfen FROM moves m JOIN positions p ON p.id = m.position_id "
            "LEFT JOIN positions c ON c.id = m.child_id").fetchall()
    finally:
        conn.close()
    for sfen, move, child in links:   # every edge links its child, leaf moves none
        assert child == ref.children[sfen].get(move)


def test_merge_leaves_refines_transposition_rows_behind(tmp_path):
    book = shuffle_book(3, positions=30)
    path = import_book(tmp_path, book)
    forget_links(path)
    before = book_rows(path)
    assert refine(path)["transposition_rows_added"] > 0
    merged = tmp_path / "merged.sqlite"
    run_cli("merge", "-o", merged, path)
    # The merged book holds the book's own moves, as export sees them, and its own
    # link run's transposition rows (the same edges refine found).
    link_run = max(r[-1] for r in book_rows(merged))
    assert sorted(r[:-1] for r in book_rows(merged) if r[-1] != link_run) == \
        sorted(r[:-1] for r in before)
    assert sorted(r[:2] for r in book_rows(merged) if r[-1] == link_run) == \
        sorted(r[:2] for r in book_rows(path) if r not in before)
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    run_cli("export", "-b", path, "-o", first)
    run_cli("export", "-b", merged, "-o", second)
    assert first.read_text() == second.read_text()
    again = refine(merged)
    assert again["transposition_rows_added"] == 0 and again["transposition_edges"] > 0


def test_own_moves_are_the_rows_refine_did_not_add(tmp_path):
    """MoveRows.OWN, the temporary view for plain SQL and Book.moves_of agree on
    the book's own moves; refine adds its transposition rows only to positions
    that have own moves, so the positions with moves are the same either way."""
    from bookgen.store import Book, MoveRows, queries
    from bookgen.store.index import BookIndex, IndexSpec
    from bookgen.store.own_moves import create_own_moves_view

    book = shuffle_book(3, positions=30)
    path = import_book(tmp_path, book)
    forget_links(path)
    before = book_rows(path)
    assert refine(path)["transposition_rows_added"] > 0
    after = book_rows(path)
    with Book(path, create=False, readonly=True) as store:
        conn = store.conn
        assert store.count_moves(MoveRows.OWN) == len(before)
        assert store.count_moves() == queries.count_moves(conn, MoveRows.ALL) == len(after)
        assert queries.positions_with_moves(conn, MoveRows.OWN) == len(book)
        assert queries.positions_with_moves(conn, MoveRows.ALL) == len(book)
        assert BookIndex.load(store, IndexSpec(rows=MoveRows.OWN)).has_moves.tolist() == \
            BookIndex.load(store, IndexSpec(rows=MoveRows.ALL)).has_moves.tolist()
        for position_id, sfen in conn.execute("SELECT id, sfen FROM positions"):
            if sfen in book:
                assert sorted(m.move for m in store.moves_of(position_id)) == sorted(book[sfen])
                assert len(store.moves_of(position_id, MoveRows.ALL)) >= len(book[sfen])
    conn = sqlite3.connect(path)
    try:
        view = create_own_moves_view(conn)
        assert conn.execute(f"SELECT count(*) FROM {view}").fetchone()[0] == len(before)
    finally:
        conn.close()


def test_rerun_is_idempotent_and_recorded(tmp_path):
    book = check_book(0, positions=24)
    path = import_book(tmp_path, book)
    forget_links(path)   # the first refine scans and stores the links
    first = refine(path, "--draw-value-black", 450, "--draw-value-white", 600)
    values = stored_values(path)
    rows = book_rows(path)
    second = refine(path, "--draw-value-black", 450, "--draw-value-white", 600)
    assert stored_values(path) == values
    assert book_rows(path) == rows
    assert second["transposition_rows_added"] == 0 and second["transposition_rows_removed"] == 0
    assert second["transposition_edges"] == first["transposition_edges"]
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        runs = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
    finally:
        conn.close()
    assert [r["command"] for r in runs] == ["import", "refine minimax", "refine minimax"]
    for run, summary in zip(runs[1:], (first, second)):
        assert run["status"] == "done" and run["id"] == summary["run_id"]
        assert json.loads(run["params"]) == {"draw_value_black": 450, "draw_value_white": 600,
                                             "method": "retrograde"}
        counts = json.loads(run["counts"])
        for key in ("positions", "edges", "transposition_edges", "cycle_components",
                    "positions_in_cycles", "passes"):
            assert counts[key] == summary[key]
        assert set(counts["seconds"]) == {"graph", "propagate", "write", "total"}
        assert run["moves_added"] == summary["transposition_rows_added"]
    assert runs[1]["moves_added"] == first["transposition_edges"] > 0
    # moves_updated counts the rows whose values changed: all the imported moves the
    # first time, none when nothing changed.
    assert runs[1]["moves_updated"] == runs[0]["moves_added"] > 0
    assert runs[2]["moves_updated"] == second["moves_updated"] == 0


def test_refine_writes_nothing_when_it_fails(tmp_path, monkeypatch):
    from bookgen.refine import minimax

    book = shuffle_book(2, positions=20)
    path = import_book(tmp_path, book)
    rows = book_rows(path)

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(minimax, "write_results", broken)
    runs = sqlite3.connect(path).execute("SELECT count(*) FROM runs").fetchone()[0]
    with pytest.raises(RuntimeError):
        minimax.refine_minimax(path)
    assert book_rows(path) == rows
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == runs
        assert conn.execute("SELECT count(*) FROM positions WHERE minimax_value IS NOT NULL"
                            ).fetchone()[0] == 0
    finally:
        conn.close()


def book_tables(path: Path) -> dict[str, list[tuple]]:
    """Every row of the tables refine writes, all columns, and the runs without their
    times (``started_at``, ``ended_at``, the seconds in ``counts``)."""
    conn = sqlite3.connect(path)
    try:
        runs = []
        for row in conn.execute("SELECT id, command, params, status, positions_added, "
                                "moves_added, moves_updated, counts FROM runs ORDER BY id"):
            counts = json.loads(row[-1])
            counts.pop("seconds", None)
            runs.append((*row[:-1], counts))
        return {"positions": conn.execute("SELECT * FROM positions ORDER BY id").fetchall(),
                "moves": conn.execute("SELECT * FROM moves ORDER BY position_id, move"
                                      ).fetchall(),
                "runs": runs}
    finally:
        conn.close()


def old_write_results(store, graph, result, run_id):
    """refine minimax's writer before the batched one (bookgen 0.1, issue 12): one
    executemany per kind of row, straight from the graph's order, foreign keys
    checked."""
    import numpy as np

    from bookgen.refine.retrograde import DEPTH_INF

    none = np.array(None, dtype=object)
    conn = store.conn
    conn.execute("PRAGMA foreign_keys = ON")   # (ignored in a transaction: as it was)
    position_ids = graph.position_ids
    edge = graph.target >= 0
    child = np.where(edge, position_ids[np.where(edge, graph.target, 0)], -1)
    link = edge & ~graph.child_linked
    stored = graph.stored
    source_ids = position_ids[graph.source]
    moves = np.char.decode(graph.move, "ascii")
    depths = np.where(result.option_depth >= DEPTH_INF, none, result.option_depth)
    links = np.where(link, child, none)
    new = ~stored

    def column(values, rows):
        return values[rows].tolist()

    if graph.stale_transpositions:
        conn.executemany("DELETE FROM moves WHERE position_id = ? AND move = ?",
                         graph.stale_transpositions)
    before = conn.total_changes
    conn.executemany(
        "UPDATE moves SET minimax_value = ?1, minimax_depth = ?2, "
        "child_id = coalesce(child_id, ?3) WHERE position_id = ?4 AND move = ?5 "
        "AND (minimax_value IS NOT ?1 OR minimax_depth IS NOT ?2 "
        "OR (child_id IS NULL AND ?3 IS NOT NULL))",
        zip(column(result.option_value, stored), column(depths, stored),
            column(links, stored), column(source_ids, stored), column(moves, stored)))
    updated = conn.total_changes - before
    conn.executemany(
        "INSERT INTO moves(position_id, move, ponder, value, depth, count, child_id, "
        "minimax_value, minimax_depth, run_id) VALUES (?, ?, NULL, NULL, NULL, 0, ?, ?, ?, ?)",
        zip(column(source_ids, new), column(moves, new), column(child, new),
            column(result.option_value, new), column(depths, new), [run_id] * int(new.sum())))
    conn.executemany(
        "UPDATE positions SET minimax_value = ?, minimax_depth = ? WHERE id = ?",
        zip(result.node_value.tolist(),
            np.where(result.node_depth >= DEPTH_INF, none, result.node_depth).tolist(),
            position_ids.tolist()))
    return {"transposition_rows_added": int(new.sum()), "moves_updated": updated,
            "transposition_rows_removed": len(graph.stale_transpositions),
            "child_links_added": int((link & stored).sum())}


def books_to_refine(tmp_path: Path) -> list[Path]:
    """Books in the states refine meets: imported (no links, no minimax values), refined
    and changed since (values moved, links lost, minimax values that are no integers,
    a child without moves now: stale transposition rows, earlier transposition rows
    kept), grown (links stored)."""
    imported = import_book(tmp_path, shuffle_book(8, positions=200, push_rate=0.5,
                                                  branching=2), "imported")
    changed = import_book(tmp_path, shuffle_book(9, positions=200, push_rate=0.5,
                                                 branching=2), "changed")
    refine(changed)
    conn = sqlite3.connect(changed)
    with conn:
        conn.execute("UPDATE moves SET value = coalesce(value, 0) + 7 "
                     "WHERE count > 0 AND (position_id + length(move)) % 5 = 0")
        conn.execute("UPDATE moves SET child_id = NULL "   # links lost, values kept
                     "WHERE count > 0 AND (position_id + length(move)) % 7 = 0")
        # values that are no integers (written by hand): rewritten, equal or not
        conn.execute("UPDATE moves SET minimax_value = minimax_value + 0.25 "
                     "WHERE (position_id + length(move)) % 11 = 0")
        conn.execute("UPDATE moves SET minimax_depth = 'deep' "
                     "WHERE (position_id + length(move)) % 13 = 0")
        conn.execute("UPDATE positions SET minimax_value = minimax_value || '' WHERE id % 3 = 0")
        conn.execute("UPDATE positions SET minimax_depth = minimax_depth + 0.0 WHERE id % 4 = 0")
        conn.execute("DELETE FROM moves WHERE position_id IN (SELECT child_id FROM moves "
                     "WHERE count = 0 AND value IS NULL ORDER BY position_id, move LIMIT 3)")
    conn.close()
    grown = tmp_path / "grown.sqlite"
    run_cli("grow", "-b", grown, "--playouts", 20, "--positions", 12, "--seed", 3)
    return [imported, changed, grown]


@pytest.mark.parametrize("share", [0.0, None, 2.0])   # always stream, as shipped, never
@pytest.mark.parametrize("settings", [{}, {"method": "negascout"},
                                      {"draws": (450, 600)}])
def test_batched_writer_writes_what_the_old_writer_wrote(tmp_path, monkeypatch, settings,
                                                         share):
    """The same rows, values, links and run counts as the writer it replaced, on
    every kind of book, and the same again when refined a second time: whether the
    moves rows are streamed in one UPDATE or updated by key."""
    import shutil

    from bookgen.refine import minimax
    from bookgen.store import writes
    from bookgen.values import DrawValues

    if share is not None:
        monkeypatch.setattr(writes, "STREAM_SHARE", share)
    if share == 0.0:   # and the table read, compared and streamed 7 rows at a time
        monkeypatch.setattr(writes, "_BATCH", 7)
        monkeypatch.setattr(writes, "_STREAM_BATCH", 5)

    options = {k: v for k, v in settings.items() if k != "draws"}
    if "draws" in settings:
        options["draws"] = DrawValues(*settings["draws"])
    for book in books_to_refine(tmp_path):
        old = shutil.copyfile(book, book.with_suffix(".old.sqlite"))
        for _ in range(2):
            new_summary = minimax.refine_minimax(book, minimax.MinimaxSettings(**options))
            with monkeypatch.context() as patch:
                patch.setattr(minimax, "write_results", old_write_results)
                old_summary = minimax.refine_minimax(old, minimax.MinimaxSettings(**options))
            assert new_summary.counts == old_summary.counts
            assert book_tables(book) == book_tables(old)
        assert old_summary.counts["moves_updated"] == 0
    assert new_summary.counts["transposition_rows_added"] == 0


# refine minimax with a page cache so small that the transaction's changes spill
# into the write-ahead log before the commit.
SPILLING_REFINE = """
import sys
from bookgen.refine.minimax import refine_minimax
from bookgen.store import writes

write_minimax = writes.write_minimax

def spilling(conn, *args):
    conn.execute("PRAGMA cache_size = 8")
    return write_minimax(conn, *args)

writes.write_minimax = spilling
refine_minimax(sys.argv[1])
"""


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("how", ["command", "spilling"])
def test_refine_killed_while_writing_leaves_the_book_as_it_was(tmp_path, how, which):
    """kill -9 in the middle of the write (the moves rows updated, the transposition
    rows not yet inserted): the book file is byte for byte what it was, every row
    with it, and a refine then gives what it would have given. ``spilling``: with
    the changes already in the write-ahead log. Book 0 (imported: every row changes)
    has its moves rows streamed in one UPDATE, book 1 (links, earlier transposition
    rows, stale ones, values that are no integers) updated by key."""
    import os
    import shutil
    import signal

    from conftest import PYTHON, integrity_ok

    book = books_to_refine(tmp_path)[which]
    untouched = shutil.copyfile(book, tmp_path / "untouched.sqlite")
    data, rows = book.read_bytes(), book_tables(book)
    script = tmp_path / "refine.py"
    script.write_text(SPILLING_REFINE)
    args = [script, book] if how == "spilling" else ["-m", "bookgen.cli", "refine", "minimax",
                                                     "-b", book]
    done = subprocess.run([PYTHON, *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "BOOKGEN_FAULT": "refine-minimax-moves-written"},
                          timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    wal = Path(f"{book}-wal")
    if how == "spilling":
        assert wal.stat().st_size > 0
    assert book.read_bytes() == data
    assert integrity_ok(book)
    assert book_tables(book) == rows
    assert not wal.exists()
    assert refine(book)["moves_updated"] == refine(untouched)["moves_updated"] > 0
    killed, clean = book_tables(book), book_tables(untouched)
    assert killed["positions"] == clean["positions"] and killed["moves"] == clean["moves"]
    assert [run[:3] for run in killed["runs"]] == [run[:3] for run in clean["runs"]]


def test_streamed_write_out_of_step_writes_nothing(tmp_path):
    """The streamed UPDATE checks each row's position against its values' column: rows
    given in another order than the table's are refused, and the book keeps its rows."""
    import numpy as np

    from bookgen.arrays import NULL
    from bookgen.store import Book, writes

    book = import_book(tmp_path, shuffle_book(5, positions=40, push_rate=0.3))
    before = book_tables(book)
    with Book(book) as store:
        (n,) = store.conn.execute("SELECT count(*) FROM moves").fetchone()
        pids = np.array([p for (p,) in store.conn.execute(
            "SELECT position_id FROM moves ORDER BY position_id, move")], dtype=np.int64)
        moves = writes.MinimaxMoves(pids, np.zeros(n, dtype=np.int64), ["x"],
                                    np.arange(n, dtype=np.int64), np.full(n, 3),
                                    np.full(n, NULL), np.ones(n, dtype=bool))
        with pytest.raises(RuntimeError, match="out of step"):
            with store.transaction():
                writes._stream_moves(store.conn, moves, np.arange(n)[::-1].copy())
        assert book_tables(book) == before
        with store.transaction():   # in step: every row written
            writes._stream_moves(store.conn, moves, np.arange(n))
        written = [v for (v,) in store.conn.execute(
            "SELECT minimax_value FROM moves ORDER BY position_id, move")]
    assert written == list(range(n))


GRAPH_FIELDS = ("position_ids", "turn", "in_check", "indptr", "target", "kind", "value",
                "count", "move", "move16", "stored", "child_linked", "row")


def test_parallel_graph_building_matches_serial(tmp_path, monkeypatch):
    import numpy as np

    from bookgen.refine import minimax_graph as graph
    from bookgen.store import Book, legal_edges

    book = shuffle_book(4, positions=60, push_rate=0.3)
    path = import_book(tmp_path, book)
    with Book(path) as store:
        serial = graph.build_graph(store, workers=1)
        monkeypatch.setattr(legal_edges, "_PARALLEL_MIN_POSITIONS", 0)
        monkeypatch.setattr(legal_edges, "_CHUNK", 7)
        parallel = graph.build_graph(store, workers=2)
    for name in GRAPH_FIELDS:
        assert np.array_equal(getattr(serial, name), getattr(parallel, name)), name
    assert serial.counts()["transposition_edges"] > 0


TRANSPOSITION_ROW = ("(m.value IS NULL AND m.depth IS NULL AND m.count = 0 AND m.run_id IS NOT "
                     "NULL AND m.run_id IN (SELECT id FROM runs WHERE command IN "
                     "('refine minimax', 'link')))")


def old_read_book(store):
    """refine/minimax_graph's SQL reader before the book index: the nodes (positions
    with any moves row) and every moves row, ordered by (position id, move)."""
    import numpy as np

    conn = store.conn
    rows = conn.execute(
        "SELECT p.id, p.sfen, p.turn FROM positions p "
        "WHERE EXISTS (SELECT 1 FROM moves m WHERE m.position_id = p.id) ORDER BY p.id"
    ).fetchall()
    position_ids = np.array([r[0] for r in rows], dtype=np.int64)
    sfens = [r[1] for r in rows]
    turn = np.array([r[2] for r in rows], dtype=np.int8)
    refined = conn.execute("SELECT 1 FROM runs WHERE command IN ('refine minimax', 'link') "
                           "LIMIT 1").fetchone() is not None
    moves = conn.execute(
        f"SELECT m.position_id, m.move, max({-MATE}, min({MATE}, coalesce(m.value, 0))), "
        f"m.count, m.child_id IS NOT NULL, {TRANSPOSITION_ROW if refined else 0} FROM moves m "
        "ORDER BY m.position_id, m.move").fetchall()
    names = ("source", "move", "value", "count", "linked", "earlier")
    types = (np.int64, "S5", np.int32, np.int64, bool, bool)
    arrays = {name: np.array([row[i] for row in moves], dtype=dtype)
              for i, (name, dtype) in enumerate(zip(names, types))}
    arrays["source"] = np.searchsorted(position_ids, arrays["source"])
    move16 = {}      # cshogi's 16-bit move of each USI text
    for code in range(1 << 15):
        to, origin, promote = code & 0x7F, code >> 7 & 0x7F, code >> 14
        if to < 81 and origin < 88 and origin != to and not (origin >= 81 and promote):
            move16[cshogi.move_to_usi(code)] = code
    arrays["move16"] = np.array([move16[m.decode()] for m in arrays.pop("move")],
                                dtype=np.uint16)
    arrays = {name: arrays[name] for name in ("source", "move16", "value", "count", "linked",
                                              "earlier")}
    return position_ids, sfens, turn, arrays


def test_graph_reads_the_book_index_as_the_sql_reader_did(tmp_path, monkeypatch):
    """The graph read through the book index equals the graph of the SQL reader,
    on an imported book (values None included), a refined one (transposition rows
    of an earlier refine, flagged) and a grown one."""
    import numpy as np

    from bookgen.refine import minimax_graph as graph
    from bookgen.store import Book

    imported = import_book(tmp_path, shuffle_book(5, positions=50), "imported")
    refined = import_book(tmp_path, shuffle_book(6, positions=50), "refined")
    forget_links(refined)
    assert refine(refined)["transposition_rows_added"] > 0
    conn = sqlite3.connect(refined)   # a transposition row into a position without moves now
    with conn:
        conn.execute("DELETE FROM moves WHERE position_id = (SELECT child_id FROM moves "
                     "WHERE count = 0 AND value IS NULL ORDER BY position_id, move LIMIT 1)")
    conn.close()
    grown = tmp_path / "grown.sqlite"
    run_cli("grow", "-b", grown, "--playouts", 20, "--positions", 8, "--seed", 1)
    run_cli("refine", "minimax", "-b", grown)
    stale = []
    for path in (imported, refined, grown):
        with Book(path) as store:
            new_inputs, old_inputs = graph._read_book(store), old_read_book(store)
            for new, old in zip(new_inputs[:3], old_inputs[:3]):
                assert np.array_equal(new, old)
                assert getattr(new, "dtype", None) == getattr(old, "dtype", None)
            assert list(new_inputs[3]) == list(old_inputs[3])
            for name, column in old_inputs[3].items():
                assert np.array_equal(new_inputs[3][name], column), name
                assert new_inputs[3][name].dtype == column.dtype, name
            new_graph = graph.build_graph(store, workers=1)
            with monkeypatch.context() as patch:
                patch.setattr(graph, "_read_book", old_read_book)
                old_graph = graph.build_graph(store, workers=1)
        for name in GRAPH_FIELDS:
            assert np.array_equal(getattr(new_graph, name), getattr(old_graph, name)), name
        assert new_graph.stale_transpositions == old_graph.stale_transpositions
        stale.append(len(old_graph.stale_transpositions))
    assert stale[1] > 0


# ------------------------------------------------------------------ export


def export(path: Path, out: Path, *args: object) -> bytes:
    run_cli("export", "-b", path, "-o", out, *args)
    return out.read_bytes()


def test_raw_export_is_unchanged_by_refine(tmp_path):
    book = shuffle_book(5, positions=30)
    path = import_book(tmp_path, book)
    db_before = export(path, tmp_path / "a.db")
    bin_before = export(path, tmp_path / "a.bin", "--format", "apery")
    refine(path)
    assert export(path, tmp_path / "b.db") == db_before
    assert export(path, tmp_path / "c.db", "--values", "raw") == db_before
    assert export(path, tmp_path / "b.bin", "--format", "apery") == bin_before
    minimax_text = export(path, tmp_path / "m.db", "--values", "minimax")
    assert minimax_text != db_before


def test_minimax_export(tmp_path):
    book = shuffle_book(6, positions=30)
    path = import_book(tmp_path, book)
    refine(path)
    _, moves = stored_values(path)
    positions, _ = stored_values(path)
    text = export(path, tmp_path / "m.db", "--values", "minimax").decode()
    parsed = parse_db2016(text)
    ref = RefBook(book)
    assert {sfen for sfen, _ply, _moves in parsed.blocks} == set(book)
    tied = 0
    for sfen, _ply, written in parsed.blocks:
        assert {m[0] for m in written} == set(book[sfen]) | set(ref.children[sfen])
        best_move, _ponder, best_value, best_depth, _count = written[0]
        # The best move first, with the position's value and depth, unchanged.
        assert (best_value, INF if best_depth is None else best_depth) == positions[sfen]
        assert moves[(sfen, best_move)] == positions[sfen]
        for move, _ponder, value, depth, count in written[1:]:
            stored_value, stored_depth = moves[(sfen, move)]
            assert (INF if depth is None else depth) == stored_depth
            if stored_value == best_value and stored_depth != positions[sfen][1]:
                assert value == stored_value - 1
                tied += 1
            else:
                assert value == stored_value
            assert count == (book[sfen][move][1] if move in book[sfen] else 0)
    assert tied > 0   # the book has such ties, so the rule was exercised


def test_minimax_export_apery(tmp_path):
    import numpy as np

    book = waltz_book(-500)[0]
    book[START]["2g2f"] = (120, 3)
    path = import_book(tmp_path, book)
    refine(path)
    run_cli("export", "-b", path, "-o", tmp_path / "m.bin", "--format", "apery",
            "--values", "minimax")
    records = np.fromfile(tmp_path / "m.bin", dtype=cshogi.BookEntry)
    board = cshogi.Board()
    mine = records[records["key"] == board.book_key()]
    scores = {cshogi.move_to_usi(board.move_from_move16(int(r["fromToPro"]) & 0xFFFF)):
              int(r["score"]) for r in mine}
    # 2g2f +120 is best; the waltz comes back here for 2g2f four plies later
    # (+120 at depth 4): same value, another depth, written one lower.
    assert scores == {"2g2f": 120, "5i5h": 119, "7g7f": -500}
    assert stored_values(path)[1][(START, "5i5h")] == (120, 4)


def test_minimax_export_needs_a_refine(tmp_path):
    path = import_book(tmp_path, tree_book(1, positions=10))
    result = run_cli("export", "-b", path, "-o", tmp_path / "m.db", "--values", "minimax",
                     expect=2)
    assert "refine minimax" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m.db").exists()


# ------------------------------------------------------------------ negascout


def consistent_counts(book: dict[str, dict]) -> dict[str, dict]:
    """Counts in the order of the values, so that trusted scores are the stored ones."""
    result = {}
    for sfen, moves in book.items():
        ranked = sorted(moves, key=lambda m: (0 if moves[m][0] is None else moves[m][0], m))
        result[sfen] = {m: (moves[m][0], 10 * (i + 1)) for i, m in enumerate(ranked)}
    return result


@pytest.mark.parametrize("seed", range(4))
def test_negascout_agrees_with_retrograde_where_the_rules_coincide(tmp_path, seed):
    book = consistent_counts(tree_book(seed, positions=50))
    retro = import_book(tmp_path, book, "retro")
    scout = import_book(tmp_path, book, "scout")
    refine(retro)
    summary = refine(scout, "--method", "negascout")
    assert summary["method"] == "negascout" and summary["cycle_components"] == 0
    assert stored_values(retro) == stored_values(scout)
    assert_matches_reference(scout, book)


@pytest.mark.parametrize("maker, seed", [(shuffle_book, 1), (shuffle_book, 7), (check_book, 3),
                                         (check_book, 12), (tree_book, 2)])
def test_negascout_matches_the_reference_with_trusted_scores(tmp_path, maker, seed):
    book = maker(seed, 24)
    path = import_book(tmp_path, book)
    summary = refine(path, "--method", "negascout", "--draw-value-black", 400,
                     "--draw-value-white", 550)
    assert summary["negascout_components_approximated"] == 0
    assert_matches_reference(path, book, 400, 550, leaf_value=trusted(book))


def test_trusted_score_keeps_rare_moves_from_looking_better(tmp_path):
    board = cshogi.Board()
    start = key_of(board)
    book = {start: {"7g7f": (50, 100), "2g2f": (200, 10), "5g5f": (-30, 5), "9g9f": (400, 1)}}
    retro = import_book(tmp_path, book, "retro")
    scout = import_book(tmp_path, book, "scout")
    refine(retro)
    refine(scout, "--method", "negascout")
    assert stored_values(retro)[0][start] == (400, 0)
    positions, moves = stored_values(scout)
    assert positions[start] == (50, 0)
    assert {m: moves[(start, m)][0] for m in book[start]} == {
        "7g7f": 50, "2g2f": 50, "5g5f": -30, "9g9f": -30}


def test_negascout_budget_falls_back_and_says_so(tmp_path):
    from bookgen.refine.minimax_graph import build_graph
    from bookgen.refine.negascout import negascout
    from bookgen.store import Book

    book = shuffle_book(11, positions=30, push_rate=0.15)
    path = import_book(tmp_path, book)
    with Book(path) as store:
        graph = build_graph(store, workers=1)
    exact = negascout(graph)
    rough = negascout(graph, budget=5)
    assert exact.counts["negascout_components_approximated"] == 0
    assert rough.counts["negascout_components_approximated"] == exact.counts[
        "cycle_components"] >= 1
    # Positions from which no cycle can be reached do not depend on the fallback.
    ref = RefBook(book)
    conn = sqlite3.connect(path)
    sfen_of = dict(conn.execute("SELECT id, sfen FROM positions").fetchall())
    conn.close()

    def reaches_cycle(sfen, seen=None):
        seen = set() if seen is None else seen
        if sfen in ref.on_cycle:
            return True
        seen.add(sfen)
        return any(reaches_cycle(c, seen) for c in ref.children[sfen].values() if c not in seen)

    acyclic = [i for i, pid in enumerate(graph.position_ids.tolist())
               if not reaches_cycle(sfen_of[pid])]
    assert acyclic
    assert exact.node_value[acyclic].tolist() == rough.node_value[acyclic].tolist()


# ------------------------------------------------------------------ command line and API


def test_errors_are_one_line(tmp_path):
    result = run_cli("refine", "minimax", "-b", tmp_path / "missing.sqlite", expect=2)
    assert result.stderr.strip() == f"bookgen: error: {tmp_path / 'missing.sqlite'}: no such book"
    path = import_book(tmp_path, tree_book(0, positions=5))
    run_cli("refine", "minimax", "-b", path, "--draw-value-black", 1001, expect=2)
    run_cli("refine", "minimax", "-b", path, "--method", "peta", expect=2)
    from bookgen.errors import BookgenError, SettingsError
    from bookgen.refine.minimax import MinimaxSettings
    from bookgen.values import DrawValues

    with pytest.raises(BookgenError, match="unknown method 'peta'"):
        MinimaxSettings(method="peta")
    with pytest.raises(SettingsError, match="^draws.white is per mille"):
        MinimaxSettings(draws=DrawValues(white=-1))
    with pytest.raises(SettingsError, match="^scan_workers must be at least 1$"):
        MinimaxSettings(scan_workers=0)


def test_python_api_and_text_output(tmp_path):
    from bookgen.refine.minimax import MinimaxSettings, refine_minimax
    from bookgen.values import DrawValues

    book = waltz_book(-500)[0]
    path = import_book(tmp_path, book)
    settings = MinimaxSettings(draws=DrawValues(700, 700), scan_workers=1)
    summary = refine_minimax(path, settings)
    assert summary.settings is settings and summary.run_id == 2
    assert summary.counts["positions"] == 4 and summary.counts["cycle_components"] == 1
    assert summary.counts["transposition_edges"] == 0 and summary.counts["leaf_moves"] == 4
    assert summary.peak_memory_mb > 0 and summary.seconds.total >= summary.seconds.write
    # --json: the keys in their order of before (settings first, then the counts)
    keys = list(summary.as_dict())
    assert keys[:8] == ["book", "run_id", "method", "draw_value_black", "draw_value_white",
                        "positions", "options", "edges"]
    assert keys[-6:] == ["transposition_rows_added", "moves_updated",
                         "transposition_rows_removed", "child_links_added", "seconds",
                         "peak_memory_mb"]
    assert summary.as_dict()["draw_value_black"] == 700
    line = run_cli("refine", "minimax", "-b", path).stdout.strip()
    assert line.startswith(f"{path}: run 3: retrograde minimax over 4 positions, 4 edges")
    assert "1 cycle components with 4 positions" in line


@pytest.mark.parametrize("code", [
    "import bookgen.cli.refine\nfrom bookgen.cli import main",
    "from bookgen.cli.refine import refine_group as main",
    "from bookgen.cli import main",
    "import bookgen.refine.minimax, bookgen.refine.negascout, bookgen.bookfiles.exporter\n"
    "from bookgen.cli import main",
])
def test_commands_register_in_any_import_order(code):
    script = code + "\nimport click\ngroup = main.commands['refine'] if 'refine' in " \
                    "main.commands else main\nprint(sorted(group.commands))"
    done = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "minimax" in done.stdout


def test_module_entry_point_runs_the_command(tmp_path):
    path = import_book(tmp_path, tree_book(3, positions=8))
    done = subprocess.run([PYTHON, "-m", "bookgen.cli", "refine", "minimax", "-b", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "retrograde minimax over" in done.stdout


def test_a_book_changed_during_the_refine_is_left_alone(tmp_path, monkeypatch):
    from bookgen.errors import BookgenError
    from bookgen.refine import minimax

    path = import_book(tmp_path, shuffle_book(1, positions=15))
    rows = book_rows(path)
    real_build = minimax.build_graph

    def build_while_someone_writes(store, workers=None, rescan=False):
        graph = real_build(store, workers, rescan=rescan)
        other = sqlite3.connect(path)
        other.execute("UPDATE moves SET count = count + 1")
        other.commit()
        other.close()
        return graph

    monkeypatch.setattr(minimax, "build_graph", build_while_someone_writes)
    with pytest.raises(BookgenError, match="changed by another process"):
        minimax.refine_minimax(path)
    assert [r[:5] + r[6:] for r in book_rows(path)] == [r[:5] + r[6:] for r in rows]
    assert stored_values(path)[0] == {sfen: (None, INF) for sfen in stored_values(path)[0]}


def test_large_checking_components_fall_back_and_say_so(tmp_path, monkeypatch):
    from bookgen.refine import minimax, retrograde

    book, cycle = chase_book(-500, -400)
    path = import_book(tmp_path, book)
    monkeypatch.setattr(retrograde, "_EXHAUSTIVE_BUDGET", 3)
    counts = minimax.refine_minimax(path).counts
    assert counts["checking_components"] == 1
    assert counts["checking_components_approximated"] == 1
    assert counts["checking_components_searched"] == 0
    positions, _ = stored_values(path)
    # Solved as if the repetition were a plain draw: the checker keeps checking.
    assert [positions[s] for s in cycle] == [(0, INF)] * 4


def test_grown_book(tmp_path):
    """A book grown by 'bookgen grow': frontier rows (children without moves) are not
    book positions, child links exist, and grow's value/eval_value stay as they were."""
    path = tmp_path / "grown.sqlite"
    run_cli("grow", "-b", path, "--positions", 12, "--playouts", 8, "--min-visits", 1)
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT p.sfen, m.move, m.value, m.count FROM moves m "
            "JOIN positions p ON p.id = m.position_id").fetchall()
        frontier = conn.execute("SELECT count(*) FROM positions WHERE id NOT IN "
                                "(SELECT position_id FROM moves)").fetchone()[0]
    finally:
        conn.close()
    assert frontier > 0
    book: dict[str, dict] = {}
    for sfen, move, value, count in rows:
        book.setdefault(sfen, {})[move] = (value, count)
    before = book_rows(path)
    summary = refine(path)
    assert summary["positions"] == len(book) and summary["child_links_added"] == 0
    assert_matches_reference(path, book)
    assert [r for r in book_rows(path) if r in before] == before
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM positions WHERE minimax_value IS NOT NULL "
                            "AND id NOT IN (SELECT position_id FROM moves)").fetchone()[0] == 0
    finally:
        conn.close()


def test_grow_stats_and_show_ignore_refines_transposition_rows(tmp_path):
    """After refine minimax, growing continues on the book's own moves only, and
    stats/show count the book's moves, not refine's transposition rows."""
    import sqlite3

    from bookgen.grow import grow

    book = tmp_path / "book.sqlite"
    grow(book, small_grow(20, 15, seed=4), progress=False)
    before_stats = json.loads(run_cli("stats", "--json", "-b", book).stdout)
    run_cli("refine", "minimax", "-b", book)
    conn = sqlite3.connect(book)
    added = conn.execute("SELECT count(*) FROM moves WHERE count = 0 AND value IS NULL"
                         ).fetchone()[0]
    conn.close()
    after_stats = json.loads(run_cli("stats", "--json", "-b", book).stdout)
    assert after_stats["moves"] == before_stats["moves"]
    grow(book, small_grow(20, 5, seed=5), progress=False)
    conn = sqlite3.connect(book)
    still = conn.execute("SELECT count(*) FROM moves WHERE count = 0 AND value IS NULL"
                         ).fetchone()[0]
    conn.close()
    assert still >= added  # grow left refine's rows alone (no values written into them)


def simple_lines(successors: list[list[int]]) -> int:
    """The positions an exhaustive search from every root visits: its simple lines."""
    def count(node: int, path: set[int]) -> int:
        path.add(node)
        total = 1 + sum(count(child, path) for child in successors[node] if child not in path)
        path.discard(node)
        return total

    return sum(count(root, set()) for root in range(len(successors)))


def test_the_search_budget_is_found_exceeded_exactly_when_it_is():
    """retrograde.search_exceeds (the check that skips a hopeless exhaustive search) says
    yes exactly for graphs whose simple lines outnumber the budget; solve_by_search
    raises then, and runs to the end otherwise."""
    from bookgen.refine import retrograde

    rng = random.Random(7)
    exceeded = searched = 0
    for _ in range(400):
        n = rng.randint(2, 9)
        successors = [rng.sample(range(n), rng.randint(1, min(4, n))) for _ in range(n)]
        lines = simple_lines(successors)
        budget = rng.randint(n, 2 * lines)
        assert retrograde.search_exceeds(successors, budget) == (lines > budget)
        black = [i % 2 == 0 for i in range(n)]
        in_check = [rng.random() < 0.5 for _ in range(n)]
        exits = [[(rng.choice([-300, 0, 300]), 0)] for _ in range(n)]
        try:
            retrograde.solve_by_search(black, in_check, exits, successors, 0, budget)
        except retrograde.BudgetExceeded:
            assert lines > budget
            exceeded += 1
        else:
            assert lines <= budget
            searched += 1
    assert exceeded > 50 and searched > 50
    # A ring of 1,500 positions: 1,500 simple lines from each root, 2.25 M in all.
    ring = [[(i + 1) % 1500] for i in range(1500)]
    assert retrograde.search_exceeds(ring, 2_000_000)
    assert not retrograde.search_exceeds(ring, 1500 * 1500)


@pytest.mark.parametrize("group", [None, 12])
def test_cycle_components_solved_together_match_the_reference(tmp_path, monkeypatch, group):
    """Several shuffle books behind different first moves: their cycle components lie
    on one level of the solving order and are solved together
    (retrograde._solve_by_levels_together; in groups of about ``group`` positions
    when given), each as on its own."""
    from bookgen.refine import retrograde
    from bookgen.refine.minimax import MinimaxSettings, refine_minimax
    from bookgen.values import DrawValues

    board = cshogi.Board(START + " 1")
    legal = legal_map(board)
    book: dict[str, dict] = {START: {}}
    for i, push in enumerate([u for u in PUSHES if u in legal]):
        board.push(legal[push])
        after = key_of(board)
        board.pop()
        book[START][push] = (VALUES[i], 10)
        book.update(shuffle_book(i, positions=9, pushes=(), start=after))
    path = import_book(tmp_path, book)
    together: list[int] = []
    solve = retrograde._solve_by_levels_together

    def spy(graph, structure, components, *args):
        together.append(len(components))
        return solve(graph, structure, components, *args)

    monkeypatch.setattr(retrograde, "_solve_by_levels_together", spy)
    if group is not None:
        monkeypatch.setattr(retrograde, "_TOGETHER_POSITIONS", group)
    for draw_black, draw_white in ((500, 500), (400, 700)):
        refine_minimax(path, MinimaxSettings(draws=DrawValues(draw_black, draw_white)))
        assert_matches_reference(path, book, draw_black, draw_white)
    if group is None:
        assert max(together) >= 3
    else:   # that level's components in more than one group
        assert max(together) < 3
