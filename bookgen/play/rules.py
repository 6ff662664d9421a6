"""Game adjudication: how a shogi game ends, shared by self-play and the match runner.

:class:`GameState` wraps a cshogi board and applies the rules cshogi leaves
to its caller:

- **no legal moves**: the side to move loses (checkmate; in shogi a side
  without legal moves that is not in check loses too);
- **fourfold repetition** (sennichite): the same position (board, pieces in
  hand, side to move) for the fourth time is a draw, unless one side gave
  check with every one of its moves since the position's first occurrence:
  that side loses (perpetual check). cshogi's ``Board.is_draw()`` reports a
  repetition at the *second* occurrence, which is what a search wants but
  not what ends a game;
- **entering-king declaration** (nyugyoku), see :func:`declaration_result`;
- **maximum ply**: a game reaching ``max_ply`` moves (counted from its start
  position) without another result is a draw;
- **resignation**: by the player, or by score adjudication when the side to
  move's own evaluation has been at or below ``-resign`` cp for
  ``resign_moves`` of its consecutive moves;
- illegal moves, illegal declarations and time forfeits lose.

The 27-point declaration rule (CSA tournaments, WCSC) as checked by
:func:`declaration_result`: the declaring side is to move, its king is in the
opponent's camp (the three farthest ranks), at least 10 of its other pieces
are in that camp, it is not in check, and it holds at least 28 points (black)
or 27 points (white), counting rooks and bishops (promoted or not) 5 and
every other piece 1, over its pieces in the camp (king excluded) and in hand.
The 24-point rule (JSA) instead needs 31 points to win, and 24 to 30 points
make the declaration a draw. ``cshogi.Board.is_nyugyoku(LAW_27)`` and
``nyugyoku_result(LAW_24)`` implement the same conditions for the side to
move (checked against each other in the tests).

Results use cshogi's constants (``DRAW`` 0, ``BLACK_WIN`` 1, ``WHITE_WIN``
2), which are also dlshogi's hcpe ``gameResult`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

import cshogi

from bookgen.errors import BookgenError

__all__ = [
    "DECLARATION_RULES", "DeclarationCount", "GameOver", "GameState", "Outcome", "Reason",
    "Result", "csa_endgame", "declaration_count", "declaration_result", "declaration_win",
    "position_key",
]

DECLARATION_RULES = ("27", "24")

_BIG_PIECES = {cshogi.BISHOP, cshogi.ROOK, cshogi.PROM_BISHOP, cshogi.PROM_ROOK}
_WHITE_OFFSET = 16  # cshogi: white piece = black piece + 16
_CAMP_RANKS = {cshogi.BLACK: range(0, 3), cshogi.WHITE: range(6, 9)}  # rank index = sq % 9


class Result(IntEnum):
    """Game results with cshogi's (and dlshogi's hcpe) values."""

    DRAW = cshogi.DRAW
    BLACK_WIN = cshogi.BLACK_WIN
    WHITE_WIN = cshogi.WHITE_WIN

    @staticmethod
    def win_for(color: int) -> Result:
        return Result.BLACK_WIN if color == cshogi.BLACK else Result.WHITE_WIN

    @staticmethod
    def loss_for(color: int) -> Result:
        return Result.WHITE_WIN if color == cshogi.BLACK else Result.BLACK_WIN

    @property
    def winner(self) -> int | None:
        """cshogi colour of the winner, None for a draw."""
        if self is Result.DRAW:
            return None
        return cshogi.BLACK if self is Result.BLACK_WIN else cshogi.WHITE

    @property
    def short(self) -> str:
        return {Result.DRAW: "1/2-1/2", Result.BLACK_WIN: "1-0", Result.WHITE_WIN: "0-1"}[self]


class Reason(StrEnum):
    """Why a game ended (``str()`` and f-strings give the value)."""

    CHECKMATE = "checkmate"
    RESIGN = "resign"
    REPETITION = "repetition draw"
    PERPETUAL_CHECK = "perpetual check"
    DECLARATION = "declaration"
    ILLEGAL_DECLARATION = "illegal declaration"
    MAX_PLY = "max ply"
    ILLEGAL_MOVE = "illegal move"
    TIME_FORFEIT = "time forfeit"
    ENGINE_FAILURE = "engine failure"   # crashed or stopped answering (match runner)


@dataclass(frozen=True)
class Outcome:
    """The end of a game: result, reason, plies played and a free-form detail."""

    result: Result
    reason: Reason
    ply: int
    detail: str = ""

    @property
    def winner(self) -> int | None:
        return self.result.winner

    @property
    def loser(self) -> int | None:
        winner = self.result.winner
        return None if winner is None else 1 - winner

    def __str__(self) -> str:
        text = f"{self.result.short} ({self.reason}, ply {self.ply})"
        return f"{text}: {self.detail}" if self.detail else text


class GameOver(BookgenError):
    """A move or action was attempted after the game had ended."""


def position_key(board: cshogi.Board) -> str:
    """The repetition key: board, side to move and hands (the sfen without its move number)."""
    return board.sfen().rsplit(" ", 1)[0]


# --------------------------------------------------------------------------
# entering-king declaration


@dataclass(frozen=True)
class DeclarationCount:
    """What the declaration rule counts for one side."""

    king_in_camp: bool
    pieces_in_camp: int   # own pieces in the opponent's camp, king excluded
    points: int           # rook/bishop 5, others 1: pieces in the camp and in hand


def declaration_count(board: cshogi.Board, color: int) -> DeclarationCount:
    """Count ``color``'s king position, pieces in the opponent's camp and points."""
    camp = _CAMP_RANKS[color]
    king_in_camp = False
    pieces = points = 0
    for square, piece in enumerate(board.pieces):
        if not piece:
            continue
        piece_color = cshogi.WHITE if piece > _WHITE_OFFSET else cshogi.BLACK
        if piece_color != color or square % 9 not in camp:
            continue
        piece_type = piece - _WHITE_OFFSET if piece_color == cshogi.WHITE else piece
        if piece_type == cshogi.KING:
            king_in_camp = True
            continue
        pieces += 1
        points += 5 if piece_type in _BIG_PIECES else 1
    hand = board.pieces_in_hand[color]  # P, L, N, S, G, B, R
    points += sum(hand[:5]) + 5 * (hand[5] + hand[6])
    return DeclarationCount(king_in_camp, pieces, points)


def declaration_result(board: cshogi.Board, rule: str = "27") -> Result | None:
    """What a declaration by the side to move would give, or None if it would be illegal.

    ``rule`` ``"27"``: a win with 28 points (black) / 27 points (white);
    ``"24"``: a win with 31 points, a draw with 24 to 30. Both need the king
    in the opponent's camp, 10 other pieces there and the king not in check.
    """
    if rule not in DECLARATION_RULES:
        raise ValueError(f"unknown declaration rule {rule!r} (use one of {DECLARATION_RULES})")
    color = board.turn
    if board.is_check():
        return None
    count = declaration_count(board, color)
    if not count.king_in_camp or count.pieces_in_camp < 10:
        return None
    if rule == "27":
        needed = 28 if color == cshogi.BLACK else 27
        return Result.win_for(color) if count.points >= needed else None
    if count.points >= 31:
        return Result.win_for(color)
    return Result.DRAW if count.points >= 24 else None


def declaration_win(board: cshogi.Board, rule: str = "27") -> bool:
    """Whether the side to move wins by declaring now."""
    result = declaration_result(board, rule)
    return result is not None and result is not Result.DRAW


# --------------------------------------------------------------------------
# the game


class GameState:
    """A game in progress: the board, the moves, and the rules that end it.

    ``start`` is a board (copied; its own move history is not used for
    repetitions), a sfen, or a ``startpos [moves ...]`` / ``sfen ... [moves
    ...]`` position string. ``max_ply`` (None: no limit) counts the moves of
    this game. ``declaration_rule`` is ``"27"``, ``"24"`` or None (declaring
    is then always illegal). ``resign`` (cp, None: off) and ``resign_moves``
    set score adjudication, fed by :meth:`adjudicate`.

    After the game ends :attr:`outcome` is set and further actions raise
    :class:`GameOver`. A start position without legal moves is over at once.
    """

    def __init__(self, start: cshogi.Board | str | None = None, *, max_ply: int | None = 320,
                 declaration_rule: str | None = "27", resign: int | None = None,
                 resign_moves: int = 1) -> None:
        if declaration_rule is not None and declaration_rule not in DECLARATION_RULES:
            raise ValueError(f"unknown declaration rule {declaration_rule!r}")
        if max_ply is not None and max_ply < 1:
            raise ValueError("max_ply must be at least 1")
        if resign is not None and resign <= 0:
            raise ValueError("resign must be a positive number of centipawns")
        if resign_moves < 1:
            raise ValueError("resign_moves must be at least 1")
        if isinstance(start, cshogi.Board):
            board = cshogi.Board(start.sfen())
        elif start is None:
            board = cshogi.Board()
        else:
            from bookgen.position import InvalidMove, InvalidPosition, parse_position_spec
            try:
                parsed, _moves = parse_position_spec(start)
            except (InvalidPosition, InvalidMove) as error:
                raise BookgenError(f"bad start position {start!r}: {error}") from None
            board = cshogi.Board(parsed.sfen())
        self.board = board
        self.start_sfen = board.sfen()
        self.start_turn = board.turn
        self.max_ply = max_ply
        self.declaration_rule = declaration_rule
        self.resign_threshold = resign
        self.resign_moves = resign_moves
        self.moves: list[str] = []
        self.checks: list[bool] = []       # checks[i]: move i gave check
        self._occurrences: dict[str, list[int]] = {position_key(board): [0]}
        self._low_scores = [0, 0]          # consecutive own evaluations <= -resign, per colour
        self.outcome: Outcome | None = None
        if not any(True for _ in board.legal_moves):
            self.outcome = self._no_legal_moves()

    # -- state ------------------------------------------------------------

    @property
    def ply(self) -> int:
        """Moves played in this game."""
        return len(self.moves)

    @property
    def turn(self) -> int:
        return self.board.turn

    @property
    def over(self) -> bool:
        return self.outcome is not None

    def occurrences(self) -> int:
        """How many times the current position has occurred in this game."""
        return len(self._occurrences[position_key(self.board)])

    def usi_position(self) -> str:
        """``sfen START moves ...`` for a USI ``position`` command."""
        text = f"sfen {self.start_sfen}"
        return f"{text} moves {' '.join(self.moves)}" if self.moves else text

    def legal_move(self, move: str | int) -> int | None:
        """The cshogi move for a USI string or move int if it is legal here, else None."""
        for legal in self.board.legal_moves:
            if (legal == move if isinstance(move, int) else cshogi.move_to_usi(legal) == move):
                return legal
        return None

    def can_declare(self) -> bool:
        """Whether the side to move would win by declaring now."""
        if self.declaration_rule is None:
            return False
        return declaration_win(self.board, self.declaration_rule)

    def _mover(self, index: int) -> int:
        """Colour that played move ``index`` (0-based)."""
        return self.start_turn if index % 2 == 0 else 1 - self.start_turn

    def _check_open(self) -> None:
        if self.outcome is not None:
            raise GameOver(f"the game is over: {self.outcome}")

    def _end(self, result: Result, reason: Reason, detail: str = "") -> Outcome:
        self.outcome = Outcome(result, reason, self.ply, detail)
        return self.outcome

    def _no_legal_moves(self) -> Outcome:
        detail = "" if self.board.is_check() else "no legal moves"
        return Outcome(Result.loss_for(self.board.turn), Reason.CHECKMATE, self.ply, detail)

    # -- actions ----------------------------------------------------------

    def push(self, move: str | int) -> Outcome | None:
        """Play ``move`` (USI or cshogi int) for the side to move; the outcome if the game ended.

        An illegal move ends the game: the side to move loses.
        """
        self._check_open()
        legal = self.legal_move(move)
        if legal is None:
            text = move if isinstance(move, str) else cshogi.move_to_usi(move)
            return self._end(Result.loss_for(self.turn), Reason.ILLEGAL_MOVE, str(text))
        board = self.board
        board.push(legal)
        self.moves.append(cshogi.move_to_usi(legal))
        self.checks.append(board.is_check())
        seen = self._occurrences.setdefault(position_key(board), [])
        seen.append(self.ply)
        if not any(True for _ in board.legal_moves):
            self.outcome = self._no_legal_moves()
            return self.outcome
        if len(seen) >= 4:
            return self._repetition(seen[0])
        if self.max_ply is not None and self.ply >= self.max_ply:
            return self._end(Result.DRAW, Reason.MAX_PLY)
        return None

    def _repetition(self, first: int) -> Outcome:
        """Fourfold repetition of a position first seen at ply ``first``."""
        span = range(first, self.ply)
        all_checks = {}
        for color in (cshogi.BLACK, cshogi.WHITE):
            own = [self.checks[i] for i in span if self._mover(i) == color]
            all_checks[color] = bool(own) and all(own)
        if all_checks[cshogi.BLACK] != all_checks[cshogi.WHITE]:
            checker = cshogi.BLACK if all_checks[cshogi.BLACK] else cshogi.WHITE
            side = "black" if checker == cshogi.BLACK else "white"
            return self._end(Result.loss_for(checker), Reason.PERPETUAL_CHECK,
                             f"{side} checked on every move since ply {first}")
        return self._end(Result.DRAW, Reason.REPETITION, f"position of ply {first}")

    def declare(self) -> Outcome:
        """The side to move declares an entering-king win (USI ``bestmove win``).

        A declaration that does not meet the rule loses (illegal declaration).
        """
        self._check_open()
        rule = self.declaration_rule
        result = declaration_result(self.board, rule) if rule is not None else None
        if result is None:
            count = declaration_count(self.board, self.turn)
            return self._end(Result.loss_for(self.turn), Reason.ILLEGAL_DECLARATION,
                             f"king in camp {count.king_in_camp}, {count.pieces_in_camp} "
                             f"pieces in camp, {count.points} points, rule {rule}")
        return self._end(result, Reason.DECLARATION, f"rule {rule}")

    def resign(self, detail: str = "") -> Outcome:
        """The side to move resigns."""
        self._check_open()
        return self._end(Result.loss_for(self.turn), Reason.RESIGN, detail)

    def forfeit_time(self, detail: str = "") -> Outcome:
        """The side to move lost on time."""
        self._check_open()
        return self._end(Result.loss_for(self.turn), Reason.TIME_FORFEIT, detail)

    def forfeit_failure(self, detail: str = "") -> Outcome:
        """The side to move lost because its engine failed (crash, broken protocol)."""
        self._check_open()
        return self._end(Result.loss_for(self.turn), Reason.ENGINE_FAILURE, detail)

    def adjudicate(self, score: int | None) -> Outcome | None:
        """Score adjudication: the side to move reports its own evaluation (cp) before moving.

        After ``resign_moves`` consecutive reports of this side at or below
        ``-resign`` the side resigns (the outcome is returned); None otherwise.
        ``score`` None (no evaluation) breaks the run.
        """
        self._check_open()
        if self.resign_threshold is None:
            return None
        color = self.turn
        if score is not None and score <= -self.resign_threshold:
            self._low_scores[color] += 1
        else:
            self._low_scores[color] = 0
        if self._low_scores[color] >= self.resign_moves:
            return self.resign(f"score {score} <= -{self.resign_threshold} for "
                               f"{self._low_scores[color]} moves")
        return None


def csa_endgame(outcome: Outcome, side_to_move: int) -> str:
    """The CSA special move recording ``outcome`` when ``side_to_move`` is to move.

    Chosen so that readers deriving the winner from the side to move (as
    ``cshogi.Parser`` does) get the right result: ``%TORYO`` (checkmate and
    resignation), ``%KACHI``, ``%SENNICHITE``, ``%JISHOGI`` (maximum ply, as
    floodgate writes it, and 24-point declaration draws), ``%TIME_UP``, ``%ILLEGAL_MOVE``, and
    ``%+ILLEGAL_ACTION`` / ``%-ILLEGAL_ACTION`` for the checking side of a
    perpetual check or any loss not by the side to move.
    """
    reason, loser = outcome.reason, outcome.loser
    if loser is None:  # a 24-point declaration draw is jishogi too
        return "%SENNICHITE" if reason is Reason.REPETITION else "%JISHOGI"
    if reason is Reason.DECLARATION and outcome.winner == side_to_move:
        return "%KACHI"
    if loser == side_to_move:
        if reason in (Reason.CHECKMATE, Reason.RESIGN):
            return "%TORYO"
        if reason is Reason.TIME_FORFEIT:
            return "%TIME_UP"
        if reason in (Reason.ILLEGAL_MOVE, Reason.ILLEGAL_DECLARATION):
            return "%ILLEGAL_MOVE"
    return "%+ILLEGAL_ACTION" if loser == cshogi.BLACK else "%-ILLEGAL_ACTION"
