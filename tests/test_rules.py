"""Game adjudication (bookgen.play.rules): repetition, perpetual check, declaration, mate, limits.

Positions are built by hand; the declaration rule is cross-checked against
cshogi's own ``is_nyugyoku`` / ``nyugyoku_result`` on hand-made and random
positions, and CSA end markers against ``cshogi.Parser``.
"""

from __future__ import annotations

import random

import cshogi
import cshogi.CSA
import pytest

from bookgen.play.rules import (
    GameOver,
    GameState,
    Reason,
    Result,
    csa_endgame,
    declaration_count,
    declaration_result,
    declaration_win,
)
from bookgen.position import InvalidPosition, parse_sfen

KING_SHUFFLE = ["5i5h", "5a5b", "5h5i", "5b5a"]

# Black rook checks from 4e/5e while the white king steps between 4a and 5a.
BLACK_CHECKS = "4k4/9/9/9/5R3/9/9/9/4K4 b - 1"
BLACK_CHECK_CYCLE = ["4e5e", "5a4a", "5e4e", "4a5a"]
# The same with white checking.
WHITE_CHECKS = "4k4/9/9/9/3r5/9/9/9/4K4 w - 1"
WHITE_CHECK_CYCLE = ["6e5e", "5i6i", "5e6e", "6i5i"]

# Declaration positions (counts in the comments: pieces in camp / points).
BLACK_28 = "KGGSS4/+R+BPPPP3/9/9/9/9/9/9/4k4 b RB2g2s4n4l14p 1"       # 10 / 28: wins
BLACK_27 = "KGGSS4/+R+BPPPP3/9/9/9/9/9/9/4k4 b R4Pb2g2s4n4l10p 1"     # 10 / 27: one short
BLACK_9_PIECES = "KGGSS4/+R+BPPP4/9/9/9/9/9/9/4k4 b RBP2g2s4n4l13p 1"  # 9 / 28
BLACK_IN_CHECK = "KgGGSS3/+R+BPPPP3/9/9/9/9/9/9/4k4 b RBg2s4n4l14p 1"  # 10 / 28, in check
BLACK_KING_OUT = "9/+R+BPPPP3/9/KGGSS4/9/9/9/9/4k4 b RB2g2s4n4l14p 1"  # king on rank d
BLACK_KING_RANK_C = "9/+R+BPPPP3/KGGSS4/9/9/9/9/9/4k4 b RB2g2s4n4l14p 1"  # 10 / 28: wins
WHITE_27 = "4K4/9/9/9/9/9/9/3pppp+b+r/4ssggk w 2G2S4N4LB10Pr4p 1"    # 10 / 27: wins
WHITE_26 = "4K4/9/9/9/9/9/9/3pppp+b+r/4ssggk w 2G2S4N4LB11Pr3p 1"    # 10 / 26: one short
WHITE_31 = "4K4/9/9/9/9/9/9/3pppp+b+r/4ssggk w 2G2S4N4L9Prb5p 1"     # 10 / 33


def play(game: GameState, moves: list[str]) -> list[object]:
    return [game.push(move) for move in moves]


# --------------------------------------------------------------------------
# repetition


def test_fourfold_repetition_is_a_draw_at_the_fourth_occurrence():
    game = GameState()
    board = cshogi.Board()
    for cycle in range(3):
        for move in KING_SHUFFLE:
            outcome = game.push(move)
            board.push_usi(move)
            if cycle < 2 or move != KING_SHUFFLE[-1]:
                assert outcome is None
    # cshogi already calls the second occurrence a repetition.
    assert board.is_draw() == cshogi.REPETITION_DRAW
    assert game.outcome is not None
    assert game.outcome.result is Result.DRAW
    assert game.outcome.reason is Reason.REPETITION
    assert game.outcome.ply == 12
    with pytest.raises(GameOver):
        game.push("7g7f")


def test_third_occurrence_does_not_end_the_game():
    game = GameState()
    play(game, KING_SHUFFLE * 2)
    assert game.occurrences() == 3
    assert game.outcome is None


@pytest.mark.parametrize("sfen, cycle, loser", [
    (BLACK_CHECKS, BLACK_CHECK_CYCLE, cshogi.BLACK),
    (WHITE_CHECKS, WHITE_CHECK_CYCLE, cshogi.WHITE),
])
def test_perpetual_check_loses_for_the_checking_side(sfen, cycle, loser):
    game = GameState(sfen)
    results = play(game, cycle * 3)
    assert all(r is None for r in results[:-1])
    outcome = game.outcome
    assert outcome is not None and outcome.reason is Reason.PERPETUAL_CHECK
    assert outcome.result is Result.loss_for(loser)
    assert outcome.loser == loser
    assert all(game.checks[i] for i in range(0, 12, 2))       # the checker's moves
    assert not any(game.checks[i] for i in range(1, 12, 2))   # the escapes


def test_repetition_with_quiet_moves_in_the_cycle_is_a_plain_draw():
    # The rook checks on rank a, then rank b, then makes two quiet moves: black
    # did not check on every move of the cycle, so it is not perpetual check.
    game = GameState("4k4/9/9/9/R8/9/9/9/4K4 b - 1")
    cycle = ["9e9a", "5a4b", "9a9b", "4b5a", "9b9c", "5a4a", "9c9e", "4a5a"]
    results = play(game, cycle * 3)
    assert all(r is None for r in results[:-1])
    assert game.checks[:8] == [True, False, True, False, False, False, False, False]
    assert game.outcome is not None and game.outcome.ply == 24
    assert game.outcome.reason is Reason.REPETITION
    assert game.outcome.result is Result.DRAW


def test_repetition_counts_from_the_game_start_not_the_board_history():
    board = cshogi.Board()
    for move in KING_SHUFFLE * 2:
        board.push_usi(move)  # two occurrences already in the board's own history
    game = GameState(board)
    play(game, KING_SHUFFLE * 2)
    assert game.outcome is None
    play(game, KING_SHUFFLE)
    assert game.outcome is not None and game.outcome.reason is Reason.REPETITION


# --------------------------------------------------------------------------
# checkmate, illegal moves, limits, resignation


def test_checkmate_wins_for_the_mover():
    game = GameState("4k4/9/4P4/9/9/9/9/9/4K4 b G 1")
    outcome = game.push("G*5b")
    assert outcome is not None and outcome.reason is Reason.CHECKMATE
    assert outcome.result is Result.BLACK_WIN and outcome.ply == 1
    assert outcome.detail == ""


def test_a_start_position_without_legal_moves_is_over():
    board = cshogi.Board("4k4/9/4P4/9/9/9/9/9/4K4 b G 1")
    board.push_usi("G*5b")
    game = GameState(board)
    assert game.outcome is not None
    assert game.outcome.result is Result.BLACK_WIN and game.outcome.ply == 0


def test_illegal_move_loses_for_the_mover():
    game = GameState()
    assert game.push("7g7f") is None
    outcome = game.push("7g7f")  # white cannot play black's move
    assert outcome is not None and outcome.reason is Reason.ILLEGAL_MOVE
    assert outcome.result is Result.BLACK_WIN and outcome.detail == "7g7f"
    assert game.moves == ["7g7f"]


def test_pawn_drop_mate_is_an_illegal_move():
    # P*5b would mate (gold on 5c guards it, silvers cover 4a and 6a): forbidden.
    game = GameState("4k4/2S3S2/4G4/9/9/9/9/9/4K4 b P 1")
    assert "P*5b" not in {cshogi.move_to_usi(m) for m in game.board.legal_moves}
    outcome = game.push("P*5b")
    assert outcome is not None and outcome.reason is Reason.ILLEGAL_MOVE
    assert outcome.result is Result.WHITE_WIN
    mate = GameState("4k4/2S3S2/4G4/9/9/9/9/9/4K4 b G 1")  # the same with a gold: mate
    assert mate.push("G*5b") is not None and mate.outcome.reason is Reason.CHECKMATE


def test_max_ply_is_a_draw_but_mate_on_the_last_ply_wins():
    game = GameState(max_ply=6)
    outcomes = play(game, ["7g7f", "3c3d", "2g2f", "4c4d", "2f2e", "8c8d"])
    assert outcomes[:5] == [None] * 5
    assert outcomes[5] is not None and outcomes[5].reason is Reason.MAX_PLY
    assert outcomes[5].result is Result.DRAW and outcomes[5].ply == 6
    mate = GameState("4k4/9/4P4/9/9/9/9/9/4K4 b G 1", max_ply=1)
    outcome = mate.push("G*5b")
    assert outcome is not None and outcome.reason is Reason.CHECKMATE


def test_score_adjudication_needs_consecutive_low_scores_of_the_same_side():
    game = GameState(resign=500, resign_moves=2)
    assert game.adjudicate(-600) is None      # black, 1
    game.push("7g7f")
    assert game.adjudicate(-900) is None      # white, 1
    game.push("3c3d")
    assert game.adjudicate(-400) is None      # black recovers: back to 0
    game.push("2g2f")
    assert game.adjudicate(-900) is not None  # white, 2: resigns
    outcome = game.outcome
    assert outcome is not None and outcome.reason is Reason.RESIGN
    assert outcome.result is Result.BLACK_WIN and outcome.ply == 3


def test_adjudication_is_off_without_a_threshold_and_resign_loses():
    game = GameState()
    assert game.adjudicate(-30000) is None
    outcome = game.resign()
    assert outcome.result is Result.WHITE_WIN and outcome.reason is Reason.RESIGN


# --------------------------------------------------------------------------
# entering-king declaration


@pytest.mark.parametrize("sfen, pieces, points, wins", [
    (BLACK_28, 10, 28, True),
    (BLACK_27, 10, 27, False),
    (BLACK_9_PIECES, 9, 28, False),
    (BLACK_KING_RANK_C, 10, 28, True),
    (WHITE_27, 10, 27, True),
    (WHITE_26, 10, 26, False),
    (WHITE_31, 10, 33, True),
])
def test_declaration_27_point_rule(sfen, pieces, points, wins):
    board = cshogi.Board(sfen)
    count = declaration_count(board, board.turn)
    assert count.king_in_camp
    assert (count.pieces_in_camp, count.points) == (pieces, points)
    assert declaration_win(board, "27") is wins
    assert board.is_nyugyoku(cshogi.LAW_27) is wins


def test_declaration_fails_in_check_and_with_the_king_outside_the_camp():
    for sfen in (BLACK_IN_CHECK, BLACK_KING_OUT):
        board = cshogi.Board(sfen)
        assert not declaration_win(board)
        assert not board.is_nyugyoku(cshogi.LAW_27)
    assert cshogi.Board(BLACK_IN_CHECK).is_check()
    assert not declaration_count(cshogi.Board(BLACK_KING_OUT), cshogi.BLACK).king_in_camp


def test_declaration_only_for_the_side_to_move():
    board = cshogi.Board(BLACK_28.replace(" b ", " w "))
    assert declaration_count(board, cshogi.BLACK).points == 28
    assert not declaration_win(board)
    assert not board.is_nyugyoku(cshogi.LAW_27)


def test_declaration_24_point_rule_draws_from_24_to_30():
    assert declaration_result(cshogi.Board(BLACK_28), "24") is Result.DRAW
    assert declaration_result(cshogi.Board(WHITE_26), "24") is Result.DRAW
    assert declaration_result(cshogi.Board(WHITE_31), "24") is Result.WHITE_WIN
    assert cshogi.Board(WHITE_31).nyugyoku_result(cshogi.LAW_24) == cshogi.NYUGYOKU_WIN
    assert cshogi.Board(BLACK_28).nyugyoku_result(cshogi.LAW_24) == cshogi.NYUGYOKU_DRAW


def test_declare_wins_or_loses_in_a_game():
    game = GameState(BLACK_28)
    assert game.can_declare()
    outcome = game.declare()
    assert outcome.result is Result.BLACK_WIN and outcome.reason is Reason.DECLARATION
    short = GameState(BLACK_27)
    assert not short.can_declare()
    outcome = short.declare()
    assert outcome.result is Result.WHITE_WIN
    assert outcome.reason is Reason.ILLEGAL_DECLARATION and "27 points" in outcome.detail
    assert GameState(WHITE_27).declare().result is Result.WHITE_WIN
    assert GameState(BLACK_28, declaration_rule=None).declare().reason is \
        Reason.ILLEGAL_DECLARATION


_PIECES = "PLNSGBR"
_PROMOTED = {"P": "+P", "L": "+L", "N": "+N", "S": "+S", "B": "+B", "R": "+R"}


def _random_declaration_position(rng: random.Random) -> str | None:
    """A position with the side to move's king in the opponent's camp, random
    pieces there and in hand, and some opponent pieces (which may give check)."""
    turn = rng.choice("bw")
    own_upper = turn == "b"
    camp_rows = [0, 1, 2] if own_upper else [6, 7, 8]
    grid: list[list[str]] = [["" for _ in range(9)] for _ in range(9)]
    stock = {"P": 18, "L": 4, "N": 4, "S": 4, "G": 4, "B": 2, "R": 2}

    def put(row: int, col: int, letter: str, own: bool, promoted: bool) -> None:
        text = _PROMOTED[letter] if promoted and letter in _PROMOTED else letter
        upper = own == own_upper
        grid[row][col] = text if upper else text.lower()

    king_row, king_col = rng.choice(camp_rows), rng.randrange(9)
    grid[king_row][king_col] = "K" if own_upper else "k"
    cells = [(r, c) for r in camp_rows for c in range(9) if (r, c) != (king_row, king_col)]
    rng.shuffle(cells)
    for row, col in cells[:rng.randint(6, 14)]:
        letter = rng.choice([p for p, n in stock.items() if n])
        stock[letter] -= 1
        put(row, col, letter, True, letter != "G" and rng.random() < 0.7)  # mostly promoted
    other_rows = [r for r in range(9) if r not in camp_rows]
    enemy_king = (rng.choice([r for r in other_rows if abs(r - king_row) > 2]), rng.randrange(9))
    grid[enemy_king[0]][enemy_king[1]] = "k" if own_upper else "K"
    for _ in range(rng.randint(0, 3)):  # attackers that may give check
        row, col = rng.randrange(9), rng.randrange(9)
        if grid[row][col]:
            continue
        letter = rng.choice([p for p in "GSBR" if stock[p]] or ["G"])
        if not stock[letter]:
            continue
        stock[letter] -= 1
        put(row, col, letter, False, letter in "BR" and rng.random() < 0.5)
    hand_own = {p: rng.randint(0, stock[p]) for p in "RBGSNLP"}  # USI hand order
    hands = "".join(f"{n if n > 1 else ''}{p if own_upper else p.lower()}"
                    for p, n in hand_own.items() if n)
    rest = "".join(f"{stock[p] - n if stock[p] - n > 1 else ''}"
                   f"{p.lower() if own_upper else p}"
                   for p, n in hand_own.items() if stock[p] - n)
    rows = []
    for row in grid:
        text, empty = "", 0
        for cell in row:
            if cell:
                text += (str(empty) if empty else "") + cell
                empty = 0
            else:
                empty += 1
        rows.append(text + (str(empty) if empty else ""))
    hand_field = (hands + rest) if own_upper else (rest + hands)
    sfen = f"{'/'.join(rows)} {turn} {hand_field or '-'} 1"
    try:
        parse_sfen(sfen)  # rejects impossible positions (nifu, stuck pieces, wrong check)
    except InvalidPosition:
        return None
    return sfen


def test_declaration_agrees_with_cshogi_on_random_positions():
    rng = random.Random(7)
    checked = wins = draws24 = 0
    while checked < 600:
        sfen = _random_declaration_position(rng)
        if sfen is None:
            continue
        board = cshogi.Board(sfen)
        checked += 1
        ours27 = declaration_win(board, "27")
        assert ours27 == board.is_nyugyoku(cshogi.LAW_27), sfen
        theirs24 = board.nyugyoku_result(cshogi.LAW_24)
        ours24 = declaration_result(board, "24")
        expected = {cshogi.NYUGYOKU_NONE: None, cshogi.NYUGYOKU_DRAW: Result.DRAW,
                    cshogi.NYUGYOKU_WIN: Result.win_for(board.turn)}[theirs24]
        assert ours24 is expected, sfen
        wins += ours27
        draws24 += ours24 is Result.DRAW
    assert wins > 50 and draws24 > 20  # both sides of the thresholds were exercised


# --------------------------------------------------------------------------
# CSA end markers


def _csa_win(start: str, moves: list[str], endgame: str, tmp_path) -> int:
    board = cshogi.Board(start)
    path = tmp_path / "game.csa"
    exporter = cshogi.CSA.Exporter(str(path))
    exporter.info(init_board=board, names=["a", "b"])
    for usi in moves:
        move = board.move_from_usi(usi)
        exporter.move(move)
        board.push(move)
    exporter.endgame(endgame)
    exporter.close()
    return cshogi.Parser.parse_file(str(path))[0].win


@pytest.mark.parametrize("start, moves, action", [
    (BLACK_CHECKS, BLACK_CHECK_CYCLE * 3, None),
    (WHITE_CHECKS, WHITE_CHECK_CYCLE * 3, None),
    (BLACK_CHECKS, ["4e4f", "5a6a", "4f4e", "6a5a"] * 3, None),
    ("4k4/9/4P4/9/9/9/9/9/4K4 b G 1", ["G*5b"], None),
    (BLACK_28, [], "declare"),
    (BLACK_27, [], "declare"),
    (cshogi.STARTING_SFEN, ["7g7f"], "resign"),
    (cshogi.STARTING_SFEN, ["7g7f"], "time"),
    (cshogi.STARTING_SFEN, ["7g7f", "7g7f"], None),
])
def test_csa_endgame_gives_cshogi_parser_the_right_winner(start, moves, action, tmp_path):
    game = GameState(start, max_ply=None)
    for move in moves:
        if game.push(move):
            break
    if action == "declare":
        game.declare()
    elif action == "resign":
        game.resign()
    elif action == "time":
        game.forfeit_time()
    assert game.outcome is not None
    marker = csa_endgame(game.outcome, game.turn)
    assert _csa_win(start, game.moves, marker, tmp_path) == int(game.outcome.result), marker


def test_csa_endgame_markers():
    game = GameState(max_ply=2)
    play(game, ["7g7f", "3c3d"])
    assert game.outcome is not None and csa_endgame(game.outcome, game.turn) == "%JISHOGI"
    game = GameState(BLACK_CHECKS)
    play(game, BLACK_CHECK_CYCLE * 3)
    assert game.outcome is not None
    assert csa_endgame(game.outcome, game.turn) == "%+ILLEGAL_ACTION"
    assert csa_endgame(GameState(BLACK_28).declare(), cshogi.BLACK) == "%KACHI"
