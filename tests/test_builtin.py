"""The built-in evaluator: legality, priors, values, symmetry, mates, play strength."""

from __future__ import annotations

import math
import random

import cshogi
import pytest

from bookgen.engines.builtin.alphabeta import (
    _TB,
    _TW,
    MATE,
    Searcher,
    best_move,
    eval_black,
    eval_delta,
    search_moves,
    static_eval,
)
from bookgen.engines.builtin.analyser import BuiltinEvaluator
from bookgen.engines.factory import make_evaluator
from bookgen.engines.protocols import Evaluator

STARTPOS = cshogi.STARTING_SFEN
# Black to move, gold drop 5b mates (the pawn on 5c supports it).
MATE_IN_1 = "4k4/9/4P4/9/9/9/9/9/4K4 b G 1"
# White is checkmated (gold on 5b supported by the pawn on 5c).
CHECKMATED = "4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1"
# A white rook hangs on 5f to the pawn on 5g.
HANGING_ROOK = "lnsgkgsnl/7b1/ppppppppp/9/9/4r4/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"
HUGE_HANDS = [
    "8k/9/9/9/9/9/9/9/K8 b 2R2B4G4S4N4L18P 1",
    "8k/9/9/9/9/9/9/9/K8 w 2R2B4G4S4N4L18P 1",
    "4k4/9/9/9/9/9/9/9/4K4 w RBGSNLP2rb3g3s3n3l17p 1",
]
# Black's dragon checks the white king.
IN_CHECK = "lnsg1gsnl/1r2k2b1/pppp1pppp/4+R4/9/9/PPPPPPPPP/1B7/LNSGKGSNL w P 1"


def random_boards(n: int, seed: int, max_plies: int = 100) -> list[cshogi.Board]:
    """Positions from uniformly random games (a fresh board per position, no history)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = cshogi.Board()
        for _ in range(rng.randint(0, max_plies)):
            moves = list(b.legal_moves)
            if not moves:
                break
            b.push(rng.choice(moves))
        out.append(cshogi.Board(b.sfen()))
    return out


def legal_usis(b: cshogi.Board) -> set[str]:
    return {cshogi.move_to_usi(m) for m in b.legal_moves}


def rotate_usi(usi: str) -> str:
    """The same move seen from the other side (board rotated by 180 degrees)."""
    def sq(s: str) -> str:
        return f"{10 - int(s[0])}{chr(ord('a') + ord('i') - ord(s[1]))}"
    if usi[1] == "*":
        return usi[:2] + sq(usi[2:4])
    return sq(usi[0:2]) + sq(usi[2:4]) + usi[4:]


@pytest.fixture(scope="module")
def ev() -> BuiltinEvaluator:
    return BuiltinEvaluator()


@pytest.fixture(scope="module")
def mixed_boards() -> list[cshogi.Board]:
    boards = [cshogi.Board(), cshogi.Board(IN_CHECK), cshogi.Board(HANGING_ROOK)]
    boards += [cshogi.Board(s) for s in HUGE_HANDS]
    return boards + random_boards(30, seed=11)


def test_factory_and_protocol() -> None:
    with make_evaluator("builtin") as e:
        assert isinstance(e, BuiltinEvaluator)
        assert isinstance(e, Evaluator)
        assert e.spec == "builtin"
    with pytest.raises(ValueError):
        BuiltinEvaluator(depth=0)


def test_moves_legal_priors_and_values(ev: BuiltinEvaluator,
                                       mixed_boards: list[cshogi.Board]) -> None:
    evaluations = ev.evaluate(mixed_boards)
    assert len(evaluations) == len(mixed_boards)
    for b, e in zip(mixed_boards, evaluations):
        legal = legal_usis(b)
        assert set(e.moves) == legal and len(e.moves) == len(legal)
        assert len(e.priors) == len(e.moves)
        if legal:
            assert math.isclose(sum(e.priors), 1.0, abs_tol=1e-9)
            assert all(0.0 <= p <= 1.0 for p in e.priors)
        assert 0.0 <= e.value <= 1.0
        assert e.move_values is None
        assert e.depth >= 1 and e.nodes >= 1
        # the principal variation is a legal sequence
        c = cshogi.Board(b.sfen())
        for u in e.pv:
            assert u in legal_usis(c)
            c.push_usi(u)


def test_boards_not_modified(ev: BuiltinEvaluator) -> None:
    b = cshogi.Board()
    b.set_position("startpos moves 7g7f 3c3d 2g2f 4c4d 2f2e 2b3c")
    sfen, history = b.sfen(), b.history
    ev.evaluate([b])
    ev.best_move(b)
    ev.search(b)
    assert b.sfen() == sfen and b.history == history


def test_deterministic(ev: BuiltinEvaluator, mixed_boards: list[cshogi.Board]) -> None:
    first = ev.evaluate(mixed_boards[:12])
    second = [BuiltinEvaluator().evaluate([b])[0] for b in reversed(mixed_boards[:12])][::-1]
    assert first == second
    b = mixed_boards[5]
    assert ev.best_move(b) == ev.best_move(b)


def test_colour_flip_symmetry(ev: BuiltinEvaluator) -> None:
    for b in random_boards(25, seed=3, max_plies=70) + [cshogi.Board(HANGING_ROOK)]:
        r = cshogi.Board(cshogi.rotate_sfen(b.sfen()))
        assert static_eval(b) == static_eval(r)
        e1, e2 = ev.evaluate([b, r])
        assert e1.value == pytest.approx(e2.value, abs=1e-6)
        p2 = dict(zip(e2.moves, e2.priors))
        for m, p in zip(e1.moves, e1.priors):
            assert p == pytest.approx(p2[rotate_usi(m)], abs=1e-6)


def test_incremental_eval_matches_full_eval() -> None:
    rng = random.Random(4)
    checked = 0
    for _ in range(8):
        b = cshogi.Board()
        for _ in range(120):
            moves = list(b.legal_moves)
            if not moves:
                break
            before = eval_black(b)
            tb, tw = _TB[b.king_square(0)], _TW[b.king_square(1)]
            hand = b.pieces_in_hand[b.turn]
            for m in moves:
                d = eval_delta(m, b.turn, tb, tw, hand)
                if d is None:  # king move
                    continue
                b.push(m)
                assert eval_black(b) == before + d, (b.sfen(), cshogi.move_to_usi(m))
                b.pop()
                checked += 1
            b.push(rng.choice(moves))
    assert checked > 10_000


def test_startpos_balanced(ev: BuiltinEvaluator) -> None:
    e = ev.evaluate([cshogi.Board()])[0]
    assert 0.45 < e.value < 0.55
    assert len(e.moves) == 30
    top = sorted(zip(e.priors, e.moves), reverse=True)[:6]
    assert {"7g7f", "2g2f"} & {m for _, m in top}
    assert max(e.priors) < 0.5  # no single opening move dominates


def test_mate_in_one(ev: BuiltinEvaluator) -> None:
    b = cshogi.Board(MATE_IN_1)
    e = ev.evaluate([b])[0]
    assert e.value > 0.999
    assert e.mate == 1
    best = e.moves[e.priors.index(max(e.priors))]
    assert best == "G*5b" and max(e.priors) > 0.9
    assert e.pv[0] == "G*5b"
    usi, score, pv = ev.best_move(b)
    assert usi == "G*5b" and score == MATE - 1 and pv == ["G*5b"]
    # the defending side sees it coming one ply further up
    b2 = cshogi.Board("4k4/9/4P4/9/9/9/9/9/4K4 w G 1")
    assert ev.evaluate([b2])[0].value < 0.5


def test_checkmated(ev: BuiltinEvaluator) -> None:
    b = cshogi.Board(CHECKMATED)
    assert b.is_game_over()
    e = ev.evaluate([b])[0]
    assert e.moves == [] and e.priors == [] and e.value == 0.0 and e.mate == 0
    assert ev.best_move(b) == (None, -MATE, [])
    assert ev.search(b) == {}


def test_hanging_piece_capture_is_top_prior(ev: BuiltinEvaluator) -> None:
    e = ev.evaluate([cshogi.Board(HANGING_ROOK)])[0]
    assert e.moves[e.priors.index(max(e.priors))] == "5g5f"
    assert e.value > 0.7
    assert ev.best_move(cshogi.Board(HANGING_ROOK))[0] == "5g5f"


def test_material_advantage(ev: BuiltinEvaluator) -> None:
    no_white_rook = "lnsgkgsnl/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL"
    black, white = ev.evaluate([cshogi.Board(no_white_rook + " b - 1"),
                                cshogi.Board(no_white_rook + " w - 1")])
    assert black.value > 0.6 and white.value < 0.4
    # a rook in hand is worth at least as much as one on the board
    in_hand = ev.evaluate([cshogi.Board(no_white_rook.replace("1B5R1", "1B7") + " b R 1")])[0]
    assert in_hand.value > 0.6


def test_huge_hands_and_check(ev: BuiltinEvaluator) -> None:
    for s in HUGE_HANDS + [IN_CHECK]:
        b = cshogi.Board(s)
        e = ev.evaluate([b])[0]
        assert set(e.moves) == legal_usis(b)
        usi, _, pv = ev.best_move(b, depth=2)
        assert usi in legal_usis(b) and pv[0] == usi
    strong = ev.evaluate([cshogi.Board(HUGE_HANDS[0])])[0]
    assert strong.value > 0.99


def test_search_scores_and_best_move_agree() -> None:
    for b in random_boards(6, seed=5, max_plies=40) + [cshogi.Board()]:
        scores = search_moves(b, depth=1)
        assert set(scores) == legal_usis(b)
        usi, score, pv = best_move(b, depth=1, nodes=None)
        assert score == max(scores.values())
        assert scores[usi] == score and pv[0] == usi


def test_node_budget_still_gives_a_legal_move() -> None:
    b = random_boards(1, seed=9, max_plies=50)[0]
    r = Searcher().search_root(b, depth=6, nodes=500)
    assert cshogi.move_to_usi(r.best) in legal_usis(b)
    assert 1 <= r.depth < 6 and r.pv[0] == r.best
    assert len(r.scores) == len(r.moves) == len(legal_usis(b))
    usi, _, pv = best_move(b, depth=3, nodes=2000)
    assert usi in legal_usis(b) and pv[0] == usi


def test_evaluator_search_method(ev: BuiltinEvaluator) -> None:
    b = cshogi.Board(HANGING_ROOK)
    scores = ev.search(b, depth=2)
    assert set(scores) == legal_usis(b)
    assert max(scores, key=scores.__getitem__) == "5g5f"
    deeper = BuiltinEvaluator(depth=2, nodes=5000).evaluate([b])[0]
    assert deeper.depth in (1, 2) and set(deeper.moves) == legal_usis(b)


def test_repetition_is_scored_as_a_draw() -> None:
    # Shuffling the kings back and forth repeats the start position.
    b = cshogi.Board()
    b.set_position("startpos moves 5i5h 5a5b 5h5i")
    scores = search_moves(b, depth=1)
    assert scores["5b5a"] == 0


def play_vs_random(games: int, ev: BuiltinEvaluator, max_plies: int = 300) -> dict[str, int]:
    """The built-in player against a uniformly random mover, alternating colours."""
    results = {"win": 0, "draw": 0, "loss": 0}
    for g in range(games):
        rng = random.Random(1000 + g)
        engine = g % 2
        b = cshogi.Board()
        outcome = "draw"
        for _ in range(max_plies):
            if b.is_game_over():  # no legal move: the side to move lost
                outcome = "win" if b.turn != engine else "loss"
                break
            rep = b.is_draw()
            if rep == 1:
                break
            if rep in (2, 3):  # 2: the side to move wins (perpetual check against it)
                outcome = "win" if (b.turn == engine) == (rep == 2) else "loss"
                break
            if b.turn == engine:
                usi, _, _ = ev.best_move(b)
                assert usi in legal_usis(b)
                b.push_usi(usi)
            else:
                b.push(rng.choice(list(b.legal_moves)))
        results[outcome] += 1
    return results


@pytest.mark.timeout(600)  # over 20 s on a loaded 2-core machine, fixtures included
@pytest.mark.slow
def test_beats_random_player(ev: BuiltinEvaluator) -> None:
    results = play_vs_random(10, ev)
    assert results["win"] >= 9 and results["loss"] == 0, results
