"""The built-in static evaluation and alpha-beta search on cshogi boards.

Everything here is plain Python over cshogi's C++ board, so the work per node
is kept to a few table look-ups. The evaluation is a sum over per-square
tables indexed by the piece code, one table per king square and colour, which
hold material, piece placement and king safety at once, plus the hands. The
search updates it incrementally from the move's bits (``eval_delta``) and
only sums the whole board again after king moves.

Scores are centipawns for the side to move. A mate found at ``ply`` plies
from the root scores ``MATE - ply`` (``MATE`` is dlshogi's 30000, so
``bookgen.values.cp_to_value`` maps it to a win probability of 1.0).

Move encoding (cshogi / Apery ``Move``): bits 0-6 destination square, 7-13
origin square (``80 + piece type`` for a drop), bit 14 promotion, 16-19 the
moving piece type (0 for a drop), 20-23 the captured piece type. Squares are
file-major: 0 = 1a, 8 = 1i, 9 = 2a; black moves towards rank a.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import getitem

import cshogi

from bookgen.values import MATE_BOUND, MATE_VALUE

MATE = MATE_VALUE
INF = MATE + 1
PLAY_DEPTH = 4  # playing strength of best_move: depth and node budget
PLAY_NODES = 40_000

# Piece types (cshogi): board codes are the type for black, type + 16 for white.
PAWN, LANCE, KNIGHT, SILVER, BISHOP, ROOK, GOLD, KING = 1, 2, 3, 4, 5, 6, 7, 8
PRO_PAWN, PRO_LANCE, PRO_KNIGHT, PRO_SILVER, HORSE, DRAGON = 9, 10, 11, 12, 13, 14
WHITE_OFFSET = 16
N_CODES = 32  # piece codes 0..30, padded so colour flipping stays in range

# Hand order of cshogi's pieces_in_hand lists, as piece types.
HAND_TYPES = (PAWN, LANCE, KNIGHT, SILVER, GOLD, BISHOP, ROOK)

BOARD_VALUE = (0, 90, 300, 370, 500, 820, 960, 560, 0, 550, 520, 520, 540, 1050, 1200)
# One piece of each kind in hand, slightly above its value on the board.
HAND_VALUE = {PAWN: 100, LANCE: 330, KNIGHT: 400, SILVER: 560, GOLD: 620, BISHOP: 900,
              ROOK: 1050}
_UNPROMOTE = {PRO_PAWN: PAWN, PRO_LANCE: LANCE, PRO_KNIGHT: KNIGHT, PRO_SILVER: SILVER,
              HORSE: BISHOP, DRAGON: ROOK}
_PROMOTE = {v: k for k, v in _UNPROMOTE.items()}


def base_type(pt: int) -> int:
    """The unpromoted type of a piece type (what a capture puts in hand)."""
    return _UNPROMOTE.get(pt, pt)


def cheb(a: int, b: int) -> int:
    """Chebyshev (king-move) distance between two squares."""
    return max(abs(a // 9 - b // 9), abs(a % 9 - b % 9))


def _hand_table(pt: int) -> list[int]:
    """Value of 0..18 pieces of one kind in hand (diminishing after a few)."""
    one = HAND_VALUE[pt]
    out, total = [0], 0
    for n in range(1, 19):
        if pt == PAWN:
            total += one if n <= 3 else (85 if n <= 6 else 60)
        else:
            total += one if n == 1 else one * 19 // 20
        out.append(total)
    return out


# Placement bonus of a black piece on file index f, rank index r (0 = rank a, 8 = rank i).
def _placement(pt: int, f: int, r: int) -> int:
    if pt == PAWN:
        return (0, 30, 25, 12, 8, 4, 0, 0, 0)[r]
    if pt == SILVER:
        return (10, 10, 10, 15, 20, 25, 18, 12, 0)[r]
    if pt == GOLD:
        return (-10, -10, -10, -8, -5, 0, 5, 10, 5)[r]
    if pt == KNIGHT:
        return (0, 0, 0, 10, 15, 5, 10, 0, 0)[r]
    if pt == KING:
        rank = (-160, -160, -160, -160, -140, -100, -50, -15, 0)[r]
        return rank + (8, 20, 20, 5, -10, 5, 20, 20, 8)[f]
    if pt in (HORSE, DRAGON):
        return (20, 20, 20, 10, 10, 5, 0, 0, 0)[r]  # active in or near the enemy camp
    return 0


# King safety, for the black king: friendly defenders and enemy attackers by distance.
_DEFEND = {GOLD: (0, 45, 20), SILVER: (0, 30, 18), PRO_PAWN: (0, 20, 10),
           PRO_LANCE: (0, 20, 10), PRO_KNIGHT: (0, 20, 10), PRO_SILVER: (0, 20, 10)}
_ATTACK_BY_DIST = (0, 45, 30, 12)
_ATTACK_WEIGHT = {PAWN: 0.4, LANCE: 0.5, KNIGHT: 0.7, SILVER: 1.0, GOLD: 1.0, BISHOP: 0.7,
                  ROOK: 0.8, PRO_PAWN: 1.0, PRO_LANCE: 1.0, PRO_KNIGHT: 1.0, PRO_SILVER: 1.0,
                  HORSE: 1.3, DRAGON: 1.6}


def _flip_code(p: int) -> int:
    if p == 0:
        return 0
    return p + WHITE_OFFSET if p < WHITE_OFFSET else p - WHITE_OFFSET


def _build_tables() -> tuple[list[list[list[int]]], list[list[list[int]]], list[list[int]]]:
    """Per-king-square tables ``[king sq][sq][piece code]`` for both kings, and hands.

    The black-king table also holds material and placement for all pieces; the
    white-king table is the exact colour-flipped negation of the black-king
    king-safety part, so the evaluation is antisymmetric.
    """
    base = [[0] * N_CODES for _ in range(81)]
    for sq in range(81):
        f, r = divmod(sq, 9)
        for pt in range(1, 15):
            v = BOARD_VALUE[pt] + _placement(pt, f, r)
            base[sq][pt] = v
            base[80 - sq][pt + WHITE_OFFSET] = -v
    king_b = [[[0] * N_CODES for _ in range(81)] for _ in range(82)]
    for k in range(81):
        for sq in range(81):
            d = cheb(k, sq)
            row = king_b[k][sq]
            for pt in range(1, 15):
                if pt in _DEFEND and d <= 2:
                    row[pt] = _DEFEND[pt][d]
                if pt in _ATTACK_WEIGHT and d <= 3:
                    row[pt + WHITE_OFFSET] = -round(_ATTACK_BY_DIST[d] * _ATTACK_WEIGHT[pt])
    table_b = [[[base[sq][p] + king_b[k][sq][p] for p in range(N_CODES)] for sq in range(81)]
               for k in range(82)]
    table_w = [[[-king_b[80 - k][80 - sq][_flip_code(p)] for p in range(N_CODES)]
                for sq in range(81)] for k in range(81)]
    table_w.append([[0] * N_CODES for _ in range(81)])  # index 81: no king on the board
    hands = [_hand_table(pt) for pt in HAND_TYPES]
    return table_b, table_w, hands


_TB, _TW, _HANDS = _build_tables()


def eval_black(board: cshogi.Board) -> int:
    """Material, placement and king safety in centipawns from black's side."""
    pieces = board.pieces
    hb: list[int]  # counts by hand piece type (declared for the type checker only)
    hw: list[int]
    hb, hw = board.pieces_in_hand
    return (sum(map(getitem, _TB[board.king_square(0)], pieces))
            + sum(map(getitem, _TW[board.king_square(1)], pieces))
            + sum(map(getitem, _HANDS, hb)) - sum(map(getitem, _HANDS, hw)))


def static_eval(board: cshogi.Board) -> int:
    """Material, placement and king safety in centipawns for the side to move."""
    e = eval_black(board)
    return -e if board.turn else e


_HAND_IDX = [0] * 16
for _i, _pt in enumerate(HAND_TYPES):
    _HAND_IDX[_pt] = _i
# Value gained by the (n+1)-th piece of a kind in hand, indexed [hand index][n].
_HAND_STEP = [[h[n + 1] - h[n] for n in range(18)] + [0] for h in _HANDS]
_PROMOTED = [_PROMOTE.get(pt, pt) for pt in range(16)]
_BASE = [base_type(pt) for pt in range(16)]


def eval_delta(m: int, side: int, tb: list[list[int]], tw: list[list[int]],
               hand: list[int]) -> int | None:
    """How ``eval_black`` changes when ``side`` plays ``m``; None for king moves.

    ``tb``/``tw`` are ``_TB[black king square]``/``_TW[white king square]``
    and ``hand`` the mover's hand, all before the move.
    """
    to = m & 127
    frm = (m >> 7) & 127
    if frm >= 81:  # drop of piece type frm - 80
        pt = frm - 80
        code = pt + (side << 4)
        h = _HAND_IDX[pt]
        step = _HAND_STEP[h][hand[h] - 1]
        return tb[to][code] + tw[to][code] + (step if side else -step)
    pt = (m >> 16) & 15
    if pt == KING:
        return None  # the king tables change: evaluate afresh
    off = side << 4
    c_from = pt + off
    c_to = (_PROMOTED[pt] if m & 16384 else pt) + off
    d = tb[to][c_to] + tw[to][c_to] - tb[frm][c_from] - tw[frm][c_from]
    cap = (m >> 20) & 15
    if cap:
        cc = cap + 16 - off
        h = _HAND_IDX[_BASE[cap]]
        step = _HAND_STEP[h][hand[h]]
        d += (-step if side else step) - tb[to][cc] - tw[to][cc]
    return d


# Tables indexed by (move >> 14) & 1023: bit 0 promotion, bits 2-5 moving type,
# bits 6-9 captured type.
def _move_tables() -> tuple[list[int], list[int], list[bool]]:
    order = [0] * 1024
    gain = [0] * 1024
    good = [False] * 1024
    lva = {PAWN: 1, LANCE: 2, KNIGHT: 3, SILVER: 4, GOLD: 5, PRO_PAWN: 5, PRO_LANCE: 5,
           PRO_KNIGHT: 5, PRO_SILVER: 5, BISHOP: 6, ROOK: 7, HORSE: 8, DRAGON: 9, KING: 10}
    for idx in range(1024):
        promo, moved, cap = idx & 1, (idx >> 2) & 15, (idx >> 6) & 15
        if moved > 14 or cap > 14:
            continue
        g = 0
        key = 0
        if cap:
            g += BOARD_VALUE[cap] + HAND_VALUE.get(base_type(cap), 0)
            key += 100_000 + 100 * (BOARD_VALUE[cap] + 100) - 10 * lva.get(moved, 0)
        if promo and moved in _PROMOTE:
            pg = BOARD_VALUE[_PROMOTE[moved]] - BOARD_VALUE[moved]
            g += pg
            key += 50_000 + pg if not cap else pg
        gain[idx] = g
        order[idx] = key
        good[idx] = bool(cap) and BOARD_VALUE[cap] >= (0 if moved == KING else BOARD_VALUE[moved])
    return order, gain, good


ORDER_KEY, CAPTURE_GAIN, GOOD_CAPTURE = _move_tables()
CAPTURE_MASK = 15 << 20
TACTICAL_MASK = CAPTURE_MASK | (1 << 14)  # captures and promotions


@dataclass
class RootResult:
    """The outcome of a root search.

    ``moves`` are all legal root moves in generation order, ``scores`` their
    scores (side to move, centipawns) and ``gives_check`` whether they check;
    with a ``margin`` the scores of moves worse than the best by more than it
    are clipped to ``best - margin``. ``pv`` starts with ``best``.
    """

    best: int  # cshogi move, 0 when there is no legal move
    score: int
    pv: list[int] = field(default_factory=list)
    moves: list[int] = field(default_factory=list)
    scores: list[int] = field(default_factory=list)
    gives_check: list[bool] = field(default_factory=list)
    depth: int = 0
    nodes: int = 0

    @property
    def mate(self) -> int | None:
        """Mate distance in plies (positive: the side to move mates), if any."""
        if self.score >= MATE_BOUND:
            return MATE - self.score
        if self.score <= -MATE_BOUND:
            return -(MATE + self.score)
        return None


_TT_EXACT, _TT_LOWER, _TT_UPPER = 0, 1, 2
_MAX_PLY = 64  # main-search plies; deeper nodes go straight to quiescence


class Searcher:
    """Negamax alpha-beta with quiescence, a transposition table, killers and history.

    Deterministic: the tables are cleared for every root search, and the only
    limits are depth and nodes. ``qs_max_ply`` bounds quiescence (check
    evasions with big hands can otherwise run long); after ``qs_full_ply``
    quiescence plies only even-or-better captures and recaptures are tried.
    """

    def __init__(self, qs_max_ply: int = 8, qs_full_ply: int = 3,
                 futility_margin: int = 250) -> None:
        self.qs_max_ply = qs_max_ply
        self.qs_full_ply = max(1, qs_full_ply)  # recaptures need a previous move
        self.futility_margin = futility_margin
        self.nodes = 0
        self.limit = 1 << 62
        self.stopped = False
        self.tt: dict[int, tuple[int, int, int, int]] = {}
        self.killers: list[list[int]] = []
        self.history: dict[int, int] = {}
        self.pv: list[list[int]] = []

    # -- root --------------------------------------------------------------

    def search_root(self, board: cshogi.Board, depth: int = 1, nodes: int | None = None,
                    margin: int | None = None) -> RootResult:
        """Search ``board`` (not modified) by iterative deepening up to ``depth``.

        ``nodes`` is a node budget for the iterations after the first (the
        first always completes, so there is always a move); the best move,
        score and PV of an unfinished iteration replace the previous ones when
        the previous best move was searched in it. Without a
        ``margin`` every root move is searched with a full window and gets an
        exact score.
        """
        b = board.copy()
        depth = max(1, depth)
        self.nodes = 0
        self.stopped = False
        self.tt = {}
        self.killers = [[0, 0] for _ in range(_MAX_PLY)]
        self.history = {}
        self.pv = [[] for _ in range(_MAX_PLY + 2)]
        moves = list(b.legal_moves)
        if not moves:
            return RootResult(0, -MATE, depth=0, nodes=1)
        order = sorted(moves, key=lambda m: -ORDER_KEY[(m >> 14) & 1023])
        checks: dict[int, bool] = {}
        result: RootResult | None = None
        for d in range(1, depth + 1):
            self.limit = (1 << 62) if d == 1 or nodes is None else nodes
            best, score, scores, pv = self._root_iteration(b, d, order, margin, checks)
            if self.stopped:
                # Out of nodes: keep the last full iteration's per-move scores but
                # trust a deeper best move once the previous best is searched too.
                if result is not None and order[0] in scores:
                    result.best, result.score, result.pv = best, score, pv
                break
            # Best first (clipped scores can tie with it), then by score.
            order = [best] + sorted((m for m in order if m != best), key=lambda m: -scores[m])
            result = RootResult(best, score, pv, moves, [scores[m] for m in moves],
                                [checks[m] for m in moves], d, 0)
            if abs(score) >= MATE_BOUND and MATE - abs(score) <= d:
                break  # a mate (either way) within the full-width horizon
        assert result is not None
        result.nodes = self.nodes
        return result

    def _root_iteration(self, b: cshogi.Board, depth: int, order: list[int],
                        margin: int | None, checks: dict[int, bool]
                        ) -> tuple[int, int, dict[int, int], list[int]]:
        """Best move, its score, per-move scores and PV; when the node budget
        runs out (``self.stopped``) only the moves searched completely are in."""
        best, best_score = order[0], -INF
        scores: dict[int, int] = {}
        pv: list[int] = [order[0]]
        turn = b.turn
        ev = eval_black(b)
        tb, tw = _TB[b.king_square(0)], _TW[b.king_square(1)]
        hand = b.pieces_in_hand[turn]
        for m in order:
            alpha = -INF if margin is None or best_score == -INF else best_score - margin
            d = eval_delta(m, turn, tb, tw, hand)
            b.push(m)
            checks[m] = b.is_check()
            rep = b.is_draw(16)
            if rep == 1:
                s = 0
            elif rep == 2:
                s = -(MATE - 1)
            elif rep == 3:
                s = MATE - 1
            else:
                self.pv[1] = []
                s = -self._search(b, depth - 1, -INF, -alpha, 1, None if d is None else ev + d)
            b.pop()
            if self.stopped:
                return best, best_score, scores, pv
            scores[m] = s
            if s > best_score:
                best, best_score = m, s
                pv = [m] + self.pv[1] if rep == 0 else [m]
        if margin is not None:
            floor = best_score - margin
            for m in scores:
                if scores[m] < floor:
                    scores[m] = floor
        return best, best_score, scores, pv

    # -- inner nodes -------------------------------------------------------
    # ``ev`` is the position's eval_black when the parent could update it
    # incrementally, else None.

    def _search(self, b: cshogi.Board, depth: int, alpha: int, beta: int, ply: int,
                ev: int | None) -> int:
        if depth <= 0 or ply >= _MAX_PLY:
            return self._qsearch(b, alpha, beta, ply, 0, ev)
        self.nodes += 1
        if self.nodes >= self.limit:
            self.stopped = True
            return 0
        pvs = self.pv
        pvs[ply] = []
        in_check = b.is_check()
        if not in_check:
            mate_move = b.mate_move_in_1ply()
            if mate_move:
                pvs[ply] = [mate_move]
                return MATE - ply - 1
        key = b.zobrist_hash()
        entry = self.tt.get(key)
        tt_move = 0
        if entry is not None:
            e_depth, e_flag, e_score, tt_move = entry
            if e_depth >= depth:
                if e_score >= MATE_BOUND:
                    e_score -= ply
                elif e_score <= -MATE_BOUND:
                    e_score += ply
                if (e_flag == _TT_EXACT or (e_flag == _TT_LOWER and e_score >= beta)
                        or (e_flag == _TT_UPPER and e_score <= alpha)):
                    return e_score
        moves = list(b.legal_moves)
        if not moves:
            return -(MATE - ply)
        turn = b.turn
        if ev is None:
            ev = eval_black(b)
        futile = False
        futility_bound = -INF
        if depth == 1 and not in_check:
            futility_bound = (-ev if turn else ev) + self.futility_margin
            futile = futility_bound <= alpha
        killers = self.killers[ply]
        history = self.history
        k0, k1 = killers

        def key_of(m: int) -> int:
            if m == tt_move:
                return 1 << 30
            k = ORDER_KEY[(m >> 14) & 1023]
            if k:
                return k
            if m == k0:
                return 40_000
            if m == k1:
                return 39_000
            return history.get(m & 0xFFFF, 0)

        moves.sort(key=key_of, reverse=True)
        tb, tw = _TB[b.king_square(0)], _TW[b.king_square(1)]
        hand = b.pieces_in_hand[turn]
        orig_alpha = alpha
        best_score, best_move = -INF, 0
        pruned = False
        for m in moves:
            tactical = m & TACTICAL_MASK
            d = eval_delta(m, turn, tb, tw, hand)
            b.push(m)
            if futile and not tactical and not b.is_check():
                b.pop()
                pruned = True
                continue
            pvs[ply + 1] = []
            rep = b.is_draw(16)
            if rep == 1:
                s = 0
            elif rep == 2:
                s = -(MATE - ply - 1)
            elif rep == 3:
                s = MATE - ply - 1
            else:
                s = -self._search(b, depth - 1, -beta, -alpha, ply + 1,
                                  None if d is None else ev + d)
            b.pop()
            if self.stopped:
                return 0
            if s > best_score:
                best_score, best_move = s, m
                if s > alpha:
                    alpha = s
                    pvs[ply] = [m] + pvs[ply + 1] if rep == 0 else [m]
                    if s >= beta:
                        if not tactical:
                            if killers[0] != m:
                                killers[1] = killers[0]
                                killers[0] = m
                            h = m & 0xFFFF
                            history[h] = history.get(h, 0) + depth * depth
                        break
        if pruned and best_score < futility_bound:
            best_score = futility_bound  # what the pruned moves were assumed to stay under
        stored = best_score
        if stored >= MATE_BOUND:
            stored += ply
        elif stored <= -MATE_BOUND:
            stored -= ply
        flag = (_TT_LOWER if best_score >= beta
                else _TT_EXACT if best_score > orig_alpha else _TT_UPPER)
        self.tt[key] = (depth, flag, stored, best_move)
        return best_score

    def _qsearch(self, b: cshogi.Board, alpha: int, beta: int, ply: int, qply: int,
                 ev: int | None) -> int:
        self.nodes += 1
        turn = b.turn
        if b.is_check():
            moves = list(b.legal_moves)
            if not moves:
                return -(MATE - ply)
            if ev is None:
                ev = eval_black(b)
            if qply >= self.qs_max_ply:
                return -ev if turn else ev
            moves.sort(key=lambda m: ORDER_KEY[(m >> 14) & 1023], reverse=True)
            tb, tw = _TB[b.king_square(0)], _TW[b.king_square(1)]
            hand = b.pieces_in_hand[turn]
            best = -INF
            for m in moves:
                d = eval_delta(m, turn, tb, tw, hand)
                b.push(m)
                s = -self._qsearch(b, -beta, -alpha, ply + 1, qply + 1,
                                   None if d is None else ev + d)
                b.pop()
                if s > best:
                    best = s
                    if s > alpha:
                        alpha = s
                        if s >= beta:
                            break
            return best
        if b.mate_move_in_1ply():
            return MATE - ply - 1
        if ev is None:
            ev = eval_black(b)
        stand = -ev if turn else ev
        if stand >= beta or qply >= self.qs_max_ply:
            return stand
        if stand > alpha:
            alpha = stand
        if qply < self.qs_full_ply:
            moves = [m for m in b.legal_moves if m & TACTICAL_MASK]
        else:
            # Deeper down, only captures that do not risk more than they take,
            # and recaptures: full capture trees explode in wild positions.
            last_to = b.peek() & 127
            good = GOOD_CAPTURE
            moves = [m for m in b.legal_moves if m & CAPTURE_MASK]
            moves = [m for m in moves if good[(m >> 14) & 1023] or m & 127 == last_to]
        if not moves:
            return stand
        best = stand
        threshold = alpha - stand - 150  # delta pruning: gains that cannot reach alpha
        gain = CAPTURE_GAIN
        moves.sort(key=lambda m: ORDER_KEY[(m >> 14) & 1023], reverse=True)
        tb, tw = _TB[b.king_square(0)], _TW[b.king_square(1)]
        hand = b.pieces_in_hand[turn]
        for m in moves:
            if gain[(m >> 14) & 1023] < threshold:
                continue
            d = eval_delta(m, turn, tb, tw, hand)
            b.push(m)
            s = -self._qsearch(b, -beta, -alpha, ply + 1, qply + 1, None if d is None else ev + d)
            b.pop()
            if s > best:
                best = s
                if s > alpha:
                    alpha = s
                    if s >= beta:
                        break
        return best


# -- move heuristics for priors ----------------------------------------------

# Pawn pushes in the opening by file from the mover's side (index 0 = its file 1).
_PAWN_PUSH = (15, 60, 25, 10, 5, 20, 60, 10, 15)


def move_heuristics(board: cshogi.Board, moves: Sequence[int],
                    gives_check: Sequence[bool]) -> list[float]:
    """A centipawn-like preference score per move from cheap features.

    Rewards captures (by victim), promotions, checks, drops near the enemy
    king and, in the opening, the usual developing moves; penalises early
    king walks, lance and knight adventures and golds leaving the king.
    """
    turn = board.turn
    own_k = board.king_square(turn)
    opp_k = board.king_square(turn ^ 1)
    opening = board.move_number <= 40
    in_check = board.is_check()
    legal = set(moves)
    out: list[float] = []
    for m, chk in zip(moves, gives_check):
        to = m & 127
        frm = (m >> 7) & 127
        cap = (m >> 20) & 15
        h = 0.0
        if cap:
            h += min(0.1 * BOARD_VALUE[cap], 100.0)
        if chk:
            h += 40.0
        if frm >= 81:  # drop
            near_enemy = opp_k < 81 and cheb(to, opp_k) <= 2
            near_own = own_k < 81 and cheb(to, own_k) <= 2
            h += 40.0 if near_enemy else (10.0 if near_own else -40.0)
            out.append(h)
            continue
        pt = (m >> 16) & 15
        if m & 16384:
            h += 120.0 if pt in (BISHOP, ROOK) else 80.0
        elif m | 16384 in legal:  # declines a promotion
            h -= 200.0 if pt in (PAWN, BISHOP, ROOK) else 40.0
        # Ranks and files seen from the mover (rank index 8 = its home rank).
        f_to = to // 9 if turn == 0 else 8 - to // 9
        r_to = to % 9 if turn == 0 else 8 - to % 9
        r_from = frm % 9 if turn == 0 else 8 - frm % 9
        forward = r_to < r_from
        if pt == KING:
            if not in_check:
                h -= 50.0 if opening else 10.0
                if forward:
                    h -= 40.0
        elif opening and not cap:
            if pt == PAWN:
                h += _PAWN_PUSH[f_to]
            elif pt == SILVER:
                h += 35.0 if forward else 5.0
            elif pt == GOLD:
                if own_k < 81:
                    h += 15.0 if cheb(to, own_k) < cheb(frm, own_k) else -20.0
            elif pt == ROOK:
                h += 15.0 if r_to == r_from else -10.0
            elif pt in (KNIGHT, LANCE):
                h -= 30.0
        out.append(h)
    return out


def softmax(logits: Sequence[float]) -> list[float]:
    """Probabilities from logits (numerically safe; sums to 1)."""
    if not logits:
        return []
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


# -- convenience functions ---------------------------------------------------

def best_move(board: cshogi.Board, depth: int = PLAY_DEPTH, nodes: int | None = PLAY_NODES
              ) -> tuple[str | None, int, list[str]]:
    """The best move as (USI, score in centipawns for the side to move, PV in USI).

    ``(None, -MATE, [])`` when the side to move has no legal move.
    """
    r = Searcher().search_root(board, depth=depth, nodes=nodes, margin=0)
    if not r.best:
        return None, r.score, []
    return cshogi.move_to_usi(r.best), r.score, [cshogi.move_to_usi(m) for m in r.pv]


def search_moves(board: cshogi.Board, depth: int = 1, nodes: int | None = None
                 ) -> dict[str, int]:
    """An exact score (centipawns, side to move) for every legal move of ``board``."""
    r = Searcher().search_root(board, depth=depth, nodes=nodes, margin=None)
    return {cshogi.move_to_usi(m): s for m, s in zip(r.moves, r.scores)}
