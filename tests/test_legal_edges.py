"""find_legal_edges against brute force: push every legal move and look the child
up by its exact sfen.

The positions: a generated book (benchmarks/generate_book.py, imported with the
library), random games that capture and drop a lot, handicap positions with
even twins whose book keys alias theirs (the book key leaves out the hand of the
side not to move), and forced key collisions. The expected edges, checks and
move counts come from cshogi's push and sfen only, never from the code under
test.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.bookfiles.importer import ImportSettings, import_books
from bookgen.errors import BookgenError
from bookgen.store import Book, legal_edges
from bookgen.store.index import BookIndex, IndexSpec
from bookgen.store.legal_edges import find_legal_edges, hands, legal_child_keys, move16_usi

ROOT = Path(__file__).resolve().parent.parent
HANDICAP = "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w -"   # rook and bishop


def sfen_of(board: cshogi.Board) -> str:
    return board.sfen().rsplit(" ", 1)[0]


def normal(sfen: str) -> str:
    board = cshogi.Board()
    board.set_sfen(sfen)
    return sfen_of(board)


def brute_force(sfens: list[str]) -> tuple[list[tuple[int, int, int]], list[bool], list[int],
                                            list[int]]:
    """(source, target, move16) of every legal move into a position, by source then
    legal move order; in check; legal moves; the 32-bit moves of the edges."""
    where = {sfen: i for i, sfen in enumerate(sfens)}
    board = cshogi.Board()
    edges, checks, counts, moves32 = [], [], [], []
    for i, sfen in enumerate(sfens):
        board.set_sfen(sfen)
        checks.append(board.is_check())
        legal = list(board.legal_moves)
        counts.append(len(legal))
        for move in legal:
            board.push(move)
            target = where.get(sfen_of(board))
            board.pop()
            if target is not None:
                edges.append((i, target, move & 0xFFFF))
                moves32.append(move)
    return edges, checks, counts, moves32


def assert_exact(sfens: list[str], workers: int = 1) -> list[int]:
    """find_legal_edges equals brute force; returns the edges' 32-bit moves."""
    found = find_legal_edges(sfens, workers)
    edges, checks, counts, moves32 = brute_force(sfens)
    assert list(zip(found.source.tolist(), found.target.tolist(),
                    found.move16.tolist())) == edges
    assert found.source.dtype == np.int32 and found.target.dtype == np.int32
    assert found.move16.dtype == np.uint16
    assert found.in_check.tolist() == checks
    assert found.legal_moves.tolist() == counts
    assert len(found) == len(edges)
    return moves32


def random_games(seed: int, games: int, plies: int, start: str | None = None,
                 capture_rate: float = 0.7) -> list[list[str]]:
    """Games of random legal moves, captures preferred: the sfens after each move."""
    rng = random.Random(seed)
    board = cshogi.Board()
    out = []
    for _ in range(games):
        board.set_sfen(start + " 1") if start else board.reset()
        line = [sfen_of(board)]
        for _ in range(plies):
            moves = list(board.legal_moves)
            if not moves:
                break
            captures = [m for m in moves if cshogi.move_cap(m)]
            board.push(rng.choice(captures if captures and rng.random() < capture_rate
                                  else moves))
            line.append(sfen_of(board))
        out.append(line)
    return out


def unique(sfens: list[str]) -> list[str]:
    return list(dict.fromkeys(sfens))


def book_key(sfen: str) -> int:
    board = cshogi.Board()
    board.set_sfen(sfen)
    return int(board.book_key())


@pytest.fixture
def parallel(monkeypatch):
    """Forked workers even for a few positions, in small chunks."""
    monkeypatch.setattr(legal_edges, "_PARALLEL_MIN_POSITIONS", 0)
    monkeypatch.setattr(legal_edges, "_CHUNK", 37)


# -- (a) a generated book ----------------------------------------------------------


@pytest.fixture(scope="module")
def generated_sfens(tmp_path_factory) -> list[str]:
    """The sfens of a 3,000-position book of benchmarks/generate_book.py, imported."""
    spec = importlib.util.spec_from_file_location(
        "generate_book", ROOT / "benchmarks" / "generate_book.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path_factory.mktemp("legal_edges")
    module.generate(root / "book.db", 3000)
    import_books(root / "book.sqlite", [root / "book.db"], ImportSettings(parser_workers=1),
                 progress=False)
    with Book(root / "book.sqlite") as book:
        index = BookIndex.load(book, IndexSpec(positions=frozenset(), values=(),
                                               edges=frozenset(), resolve_children=False,
                                               sfens=True))
        return index.sfens()


def test_generated_book(generated_sfens):
    assert len(generated_sfens) == 3000
    moves = assert_exact(generated_sfens)
    assert len(moves) > len(generated_sfens)


def test_generated_book_on_two_workers(generated_sfens, parallel):
    assert_exact(generated_sfens, workers=2)


# -- (b) random games: drops, promotions, captures of promoted pieces ------------


def test_random_games_with_drops_promotions_and_promoted_captures():
    games = random_games(1, games=30, plies=150)
    sfens = unique([sfen for game in games for sfen in game])
    # Side lines: one other move from some positions, so that positions have
    # several children in the set and some children are not in it.
    rng = random.Random(2)
    board = cshogi.Board()
    for sfen in sfens[::5]:
        board.set_sfen(sfen)
        moves = list(board.legal_moves)
        if moves:
            board.push(rng.choice(moves))
            sfens.append(sfen_of(board))
    sfens = unique(sfens)
    moves = assert_exact(sfens)
    drops = [m for m in moves if cshogi.move_is_drop(m)]
    assert len({cshogi.move_drop_hand_piece(m) for m in drops}) == 7
    assert sum(cshogi.move_is_promotion(m) for m in moves) > 20
    assert sum(cshogi.move_cap(m) > 8 for m in moves) > 5    # captures of promoted pieces
    assert sum(board.set_sfen(s) or board.turn for s in sfens) > 100


def test_legal_child_keys_against_push():
    """Every legal move's child book key, and the positions' own keys, sides, checks,
    zobrist keys and sfens, of positions given as sfens and as sfens after one or
    two moves (siblings sharing an sfen object), against push and cshogi's keys."""
    sfens = unique([s for game in random_games(11, games=8, plies=120) for s in game])
    rng = random.Random(4)
    board = cshogi.Board()
    bases, paths, expected = [], [], []
    for sfen in sfens:
        board.set_sfen(sfen)
        for _ in range(rng.choice([1, 1, 2, 3])):   # the position, then siblings
            path = []
            for _ in range(rng.choice([0, 1, 2]) if bases and bases[-1] is sfen else 0):
                moves = list(board.legal_moves)
                if moves:
                    path.append(rng.choice(moves))
                    board.push(path[-1])
            legal = list(board.legal_moves)
            children = []
            for move in legal:
                board.push(move)
                children.append(board.book_key())
                board.pop()
            expected.append((board.book_key(), board.turn, board.is_check(), legal, children,
                             board.zobrist_hash(), sfen_of(board)))
            for _ in path:
                board.pop()
            bases.append(sfen)
            paths.append(tuple(path))
    assert sum(len(p) == 2 for p in paths) > 50
    for keys in (None, np.array([e[0] for e in expected], dtype=np.uint64)):
        found = legal_child_keys(bases, keys, played=paths, zobrist=True, sfen=True)
        assert found.keys.tolist() == [e[0] for e in expected]
        assert found.turn.tolist() == [e[1] for e in expected]
        assert found.in_check.tolist() == [e[2] for e in expected]
        assert found.counts.tolist() == [len(e[3]) for e in expected]
        assert found.moves.tolist() == [m for e in expected for m in e[3]]
        assert found.child_keys.tolist() == [k for e in expected for k in e[4]]
        assert found.source.tolist() == [i for i, e in enumerate(expected) for _ in e[3]]
        assert found.move16.tolist() == [m & 0xFFFF for e in expected for m in e[3]]
        assert found.zobrist is not None and found.sfens is not None
        assert found.zobrist.tolist() == [e[5] for e in expected]
        assert found.sfens == [e[6] for e in expected]
    plain = legal_child_keys(sfens)    # each sfen's first entry is the position itself
    firsts = [e for i, e in enumerate(expected) if i == 0 or bases[i - 1] is not bases[i]]
    assert plain.zobrist is None and plain.sfens is None
    assert plain.child_keys.tolist() == [k for e in firsts for k in e[4]]


def test_the_edges_usi_are_cshogis():
    sfens = unique([s for game in random_games(3, games=5, plies=120) for s in game])
    found = find_legal_edges(sfens)
    _, _, _, moves32 = brute_force(sfens)
    assert found.usi().tolist() == [cshogi.move_to_usi(m).encode() for m in moves32]
    every = np.arange(1 << 16)
    usi = move16_usi(every)
    assert usi.dtype == np.dtype("S5")
    board = cshogi.Board()
    for sfen in sfens[::10]:
        board.set_sfen(sfen)
        for move in board.legal_moves:
            assert usi[move & 0xFFFF].decode() == cshogi.move_to_usi(move)


# -- (c) handicap positions and their even twins: aliasing book keys ------------


def with_black_hand(sfen: str, extra: str) -> str:
    """``sfen`` with ``extra`` (uppercase letters) added to black's hand."""
    board_part, turn, hand = sfen.split(" ")
    hand = ("" if hand == "-" else hand) + extra
    return normal(f"{board_part} {turn} {hand} 1")


def handicap_and_twins() -> tuple[list[list[str]], list[list[str]]]:
    """Games from the two-piece handicap start, and their even twins: the same
    positions with the missing rook and bishop in black's hand. A twin with white
    to move has the book key of its handicap position (the key hashes white's hand
    only); the moves of a game are legal moves of its twin game too."""
    games = random_games(4, games=12, plies=60, start=HANDICAP, capture_rate=0.5)
    twins = [[with_black_hand(sfen, "RB") for sfen in game] for game in games]
    return games, twins


def key_only_edges(sfens: list[str]) -> set[tuple[int, int]]:
    """(source, target) pairs that a lookup by book key alone would give."""
    by_key: dict[int, list[int]] = {}
    for i, sfen in enumerate(sfens):
        by_key.setdefault(book_key(sfen), []).append(i)
    board = cshogi.Board()
    pairs = set()
    for i, sfen in enumerate(sfens):
        board.set_sfen(sfen)
        for move in board.legal_moves:
            board.push(move)
            pairs.update((i, j) for j in by_key.get(int(board.book_key()), ()))
            board.pop()
    return pairs


def test_handicap_and_even_twins_with_both_in_the_set():
    games, twins = handicap_and_twins()
    sfens = unique([s for game in games for s in game] + [s for twin in twins for s in twin])
    keys = [book_key(s) for s in sfens]
    assert len(set(keys)) < len(keys) - 100    # many keys shared by a position and its twin
    edges, *_ = brute_force(sfens)
    assert key_only_edges(sfens) > {(s, t) for s, t, _ in edges}   # keys alone: false edges
    assert_exact(sfens)


def test_handicap_and_even_twins_with_unique_keys():
    """Of each aliasing pair only one position is in the set (handicap positions with
    black to move, twins with white to move), so every key is unique and only the
    other hand tells a handicap parent's child from the twin."""
    games, twins = handicap_and_twins()
    sfens = []
    for game, twin in zip(games, twins):
        for position, twin_position in zip(game, twin):
            sfens.append(position if position.split(" ")[1] == "b" else twin_position)
    sfens = unique(sfens)
    keys = [book_key(s) for s in sfens]
    assert len(set(keys)) == len(keys)
    edges, *_ = brute_force(sfens)
    assert not edges     # a handicap position's child is never an even twin
    assert len(key_only_edges(sfens)) > 100
    assert not len(find_legal_edges(sfens))


def test_handicap_mixed_with_even_games(parallel):
    games, twins = handicap_and_twins()
    even = random_games(5, games=10, plies=80)
    sfens = unique([s for group in (games, twins, even) for game in group for s in game])
    assert_exact(sfens, workers=2)


def test_hands_are_read_from_the_sfens():
    for sfen in [*unique([s for g in random_games(6, games=5, plies=200) for s in g]),
                 "4k4/9/9/9/9/9/9/9/4K4 b 2R2B4G4S4N4L16P2p",
                 "4k4/9/9/9/9/9/9/9/4K4 w 2r2b4g4s4n4l18p",
                 "4k4/9/9/9/9/9/9/9/4K4 w RBGSNLPrbgsnl10p 12",
                 "+R3k4/9/9/9/9/9/9/9/4K4 b -"]:
        board = cshogi.Board()
        board.set_sfen(sfen)
        expected = [sum(count << (8 * kind) for kind, count in enumerate(hand))
                    for hand in board.pieces_in_hand]    # P L N S G B R
        assert hands([sfen]).tolist() == [expected], sfen
    assert hands([]).shape == (0, 2)


# -- (d) forced key collisions --------------------------------------------------------


def colliding_index(shared: set[int], into: int) -> type:
    """A key index under which every key of ``shared`` (positions' and child keys
    alike) becomes ``into``."""
    members = np.array(sorted(shared), dtype=np.uint64)

    def merge(keys: np.ndarray) -> np.ndarray:
        return np.where(np.isin(keys, members), np.uint64(into), keys)

    class Colliding(legal_edges.KeyIndex):
        def __init__(self, keys: np.ndarray) -> None:
            super().__init__(merge(keys))

        def lookup(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return super().lookup(merge(wanted))

    return Colliding


@pytest.mark.parametrize("workers", [1, 2])
def test_forced_key_collisions_give_exact_edges(monkeypatch, parallel, workers):
    games = random_games(7, games=12, plies=80)
    sfens = unique([s for game in games for s in game])
    keys = [book_key(s) for s in sfens]
    shared = set(keys[::3])           # a third of the positions share one key
    monkeypatch.setattr(legal_edges, "KeyIndex", colliding_index(shared, keys[0]))
    moves = assert_exact(sfens, workers)
    edges, *_ = brute_force(sfens)
    assert sum(keys[t] in shared for _, t, _ in edges) > 50
    assert len(moves) == len(edges)


def test_a_duplicate_position_gets_the_edges_of_its_first():
    games = random_games(8, games=2, plies=30)
    sfens = unique([s for game in games for s in game])
    found = find_legal_edges(sfens + [sfens[5]])
    expected = find_legal_edges(sfens)
    for name in ("source", "target", "move16"):
        assert np.array_equal(getattr(found, name)[:len(expected)], getattr(expected, name))
    assert len(found) > len(expected)
    assert (found.source[len(expected):] == len(sfens)).all()   # the duplicate's moves
    assert 5 in found.target.tolist()


# -- (e) the start-up check --------------------------------------------------------


@pytest.fixture
def fresh_check():
    legal_edges.check_book_keys.cache_clear()
    yield
    legal_edges.check_book_keys.cache_clear()


def test_the_check_passes_and_runs_once(fresh_check, monkeypatch):
    legal_edges.check_book_keys()
    calls = []
    monkeypatch.setattr(legal_edges, "_piece_keys", lambda: calls.append(1))
    find_legal_edges([HANDICAP])
    legal_edges.check_book_keys()
    assert calls == []


@pytest.mark.parametrize("corrupt", ["gold", "one square", "layout"])
def test_the_check_raises_when_the_book_key_changed(fresh_check, monkeypatch, corrupt):
    keys = legal_edges._piece_keys()
    if corrupt == "gold":
        keys[7, :81] ^= np.uint64(1)       # every black gold
    elif corrupt == "one square":
        keys[1, 50] ^= np.uint64(1 << 40)  # black pawn on 5f (7g7f-like pushes land there)
    if corrupt == "layout":                # cshogi moves the captured piece's bits
        delta = legal_edges._KeyTables.delta
        monkeypatch.setattr(legal_edges._KeyTables, "delta",
                            lambda self, moves, turn: delta(self, moves & np.uint32(0xFFFFF),
                                                            turn))
    monkeypatch.setattr(legal_edges, "_piece_keys", lambda: keys)
    with pytest.raises(BookgenError) as raised:
        find_legal_edges([normal(f"{HANDICAP} 1")])
    message = str(raised.value)
    assert "\n" not in message
    assert f"cshogi {legal_edges._cshogi_version()}" in message
    assert "book key" in message


def test_no_positions_and_no_moves():
    empty = find_legal_edges([])
    assert len(empty) == 0 and empty.in_check.shape == (0,)
    mated = normal("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1")
    found = find_legal_edges([mated])
    assert len(found) == 0
    assert found.in_check.tolist() == [True] and found.legal_moves.tolist() == [0]
