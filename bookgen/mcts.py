"""The leaf search: PUCT Monte-Carlo tree search over a batched evaluator.

AlphaZero's PUCT with its constants as defaults (``c = ln((N + c_base + 1) /
c_base) + c_init``, c_base 19652, c_init 1.25); leaves are evaluated in
batches (virtual loss spreads one batch over different leaves); the search
stops early when the second most visited root move can no longer overtake
the first. Values are win probabilities for the side to move at each node;
edges store them from the mover's side.

:func:`select_book_moves` applies dlshogi's rule for which root moves become
book moves.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cshogi

from bookgen.evaluators.base import Evaluation, Evaluator
from bookgen.values import EVAL_COEF, value_to_cp

C_BASE = 19652.0
C_INIT = 1.25


@dataclass
class SearchSettings:
    playouts: int = 200
    batch_size: int = 1
    c_base: float = C_BASE
    c_init: float = C_INIT
    draw_value_black: float = 0.5   # win probability a repetition is worth to black
    draw_value_white: float = 0.5
    early_stop: bool = True


@dataclass
class MoveStats:
    move: str
    visits: int
    prior: float
    win_rate: float     # mean value for the side that plays the move
    value: int          # win_rate in centipawns


@dataclass
class SearchResult:
    moves: list[MoveStats]   # all root moves, most visited first
    value: float             # the evaluator's value of the root
    playouts: int
    evaluations: int


class _Node:
    # Plain lists, not numpy: nodes have a few dozen moves, where per-call
    # numpy overhead would dominate the selection.
    __slots__ = ("moves", "priors", "visits", "totals", "total_visits", "children", "value",
                 "terminal", "width")

    def __init__(self) -> None:
        self.moves: list[int] = []
        self.priors: list[float] = []
        self.visits: list[int] = []
        self.totals: list[float] = []
        self.total_visits = 0
        self.children: list[_Node | None] = []
        self.value = 0.5
        self.terminal = False
        self.width = 0  # moves 0 .. width-1 (by falling prior) have been tried

    def expand(self, board: cshogi.Board, evaluation: Evaluation) -> None:
        self.value = evaluation.value
        if not evaluation.moves:
            self.terminal = True
            return
        moves = (evaluation.move_ints if evaluation.move_ints is not None
                 else [board.move_from_usi(usi) for usi in evaluation.moves])
        # Sorted by falling prior: all untried moves share the first-play value,
        # so only the untried one with the highest prior can be selected, and
        # the tried moves always form a prefix (see Mcts._select).
        priors = evaluation.priors
        order = sorted(range(len(moves)), key=priors.__getitem__, reverse=True)
        self.moves = [moves[i] for i in order]
        self.priors = [priors[i] for i in order]
        self.visits = [0] * len(self.moves)
        self.totals = [0.0] * len(self.moves)
        self.children = [None] * len(self.moves)


def _terminal_value(board: cshogi.Board, settings: SearchSettings) -> float | None:
    """Value for the side to move if the game is decided here, else None."""
    draw = board.is_draw()
    if draw == cshogi.REPETITION_DRAW:
        return settings.draw_value_black if board.turn == cshogi.BLACK else \
            settings.draw_value_white
    if draw in (cshogi.REPETITION_WIN, cshogi.REPETITION_SUPERIOR):
        return 1.0
    if draw in (cshogi.REPETITION_LOSE, cshogi.REPETITION_INFERIOR):
        return 0.0
    return None  # no legal moves: the evaluator says so (value 0, no moves)


class Mcts:
    """One search tree per call to :meth:`search`."""

    def __init__(self, evaluator: Evaluator, settings: SearchSettings | None = None) -> None:
        self.evaluator = evaluator
        self.settings = settings or SearchSettings()
        self.evaluations = 0

    def _select(self, node: _Node) -> int:
        settings = self.settings
        parent_visits = node.total_visits
        c = math.log((parent_visits + settings.c_base + 1) / settings.c_base) + settings.c_init
        scale = c * math.sqrt(max(parent_visits, 1))
        width = node.width
        priors, visits, totals = node.priors, node.visits, node.totals
        best_index, best_score = 0, -math.inf
        for index in range(width):
            n = visits[index]
            q = totals[index] / n if n else node.value
            score = q + scale * priors[index] / (1 + n)
            if score > best_score:
                best_index, best_score = index, score
        if width < len(priors):  # the best untried move: first-play value, top prior
            if node.value + scale * priors[width] > best_score:
                best_index = width
                node.width = width + 1
        return best_index

    def search(self, board: cshogi.Board, root_evaluation: Evaluation | None = None
               ) -> SearchResult:
        """Search ``board`` (left unchanged) with the playout budget."""
        settings = self.settings
        self.evaluations = 0
        root = _Node()
        if root_evaluation is None:
            root_evaluation = self.evaluator.evaluate([board])[0]
            self.evaluations += 1
        root.expand(board, root_evaluation)
        if root.terminal:
            return SearchResult([], root.value, 0, self.evaluations)
        board = board.copy()
        done = 0
        while done < settings.playouts:
            batch = min(settings.batch_size, settings.playouts - done)
            pending: list[tuple[list[tuple[_Node, int]], _Node, cshogi.Board]] = []
            for _ in range(batch):
                path, leaf, value, leaf_board = self._descend(root, board)
                if value is not None:
                    self._backup(path, value)
                else:
                    assert leaf_board is not None
                    pending.append((path, leaf, leaf_board))
                done += 1
            if pending:
                boards = [leaf_board for _path, _leaf, leaf_board in pending]
                evaluations = self.evaluator.evaluate(boards)
                self.evaluations += len(boards)
                for (path, leaf, leaf_board), evaluation in zip(pending, evaluations):
                    if not leaf.moves and not leaf.terminal:
                        leaf.expand(leaf_board, evaluation)
                    self._remove_virtual_loss(path)
                    self._backup(path, leaf.value)
            if settings.early_stop and self._decided(root, settings.playouts - done):
                break
        return SearchResult(self._root_stats(root), root.value, done, self.evaluations)

    def _descend(self, root: _Node, board: cshogi.Board
                 ) -> tuple[list[tuple[_Node, int]], _Node, float | None, cshogi.Board | None]:
        """Walk down to a leaf. Returns the path, the leaf, and its value when
        known without evaluation (terminal or already expanded in this batch)."""
        path: list[tuple[_Node, int]] = []
        node = root
        pushed = 0
        try:
            while True:
                index = self._select(node)
                path.append((node, index))
                board.push(node.moves[index])
                pushed += 1
                child = node.children[index]
                if child is None:
                    child = node.children[index] = _Node()
                    terminal = _terminal_value(board, self.settings)
                    if terminal is not None:
                        child.terminal = True
                        child.value = terminal
                        return path, child, terminal, None
                    # Virtual loss: count the visit now, with a lost value for the
                    # mover, so the rest of the batch looks elsewhere.
                    for parent, move_index in path:
                        parent.visits[move_index] += 1
                        parent.total_visits += 1
                    return path, child, None, board.copy()
                if child.terminal or not child.moves:  # decided, or pending in this batch
                    return path, child, child.value, None
                node = child
        finally:
            for _ in range(pushed):
                board.pop()

    @staticmethod
    def _remove_virtual_loss(path: list[tuple[_Node, int]]) -> None:
        for node, index in path:
            node.visits[index] -= 1
            node.total_visits -= 1

    @staticmethod
    def _backup(path: list[tuple[_Node, int]], leaf_value: float) -> None:
        """Add the leaf's value along the path; each edge gets the mover's view."""
        value = leaf_value
        for node, index in reversed(path):
            value = 1.0 - value  # from the side to move at the leaf to the mover's side
            node.visits[index] += 1
            node.total_visits += 1
            node.totals[index] += value

    @staticmethod
    def _decided(root: _Node, remaining: int) -> bool:
        if len(root.visits) < 2:
            return len(root.visits) == 1
        if max(root.visits) <= remaining:  # cheap test first: cannot be decided yet
            return False
        first, second = heapq.nlargest(2, root.visits)
        return first - second > remaining

    @staticmethod
    def _root_stats(root: _Node) -> list[MoveStats]:
        stats = []
        order = sorted(range(len(root.moves)), key=lambda i: -root.visits[i])
        for index in order:
            visits = root.visits[index]
            win_rate = root.totals[index] / visits if visits else root.value
            stats.append(MoveStats(cshogi.move_to_usi(root.moves[index]), visits,
                                   root.priors[index], win_rate, value_to_cp(win_rate)))
        return stats


@dataclass
class BookMoveChoice:
    move: str
    count: int
    value: int
    win_rate: float
    visits: int
    prior: float


def select_book_moves(stats: Sequence[MoveStats], visit_threshold: float = 0.005,
                      cutoff: float = 0.015, coef: float = EVAL_COEF,
                      min_visits: int = 1) -> list[BookMoveChoice]:
    """dlshogi's rule: in visit order keep moves whose visit share exceeds
    ``visit_threshold`` and whose win rate is within ``cutoff`` of the most
    visited move's; if none qualifies, the top ``(n + 2) // 3``. ``count`` is
    the visit share x 1000. ``min_visits`` adds an absolute floor, which keeps
    small playout budgets (where one visit is already a large share) from
    admitting every move tried once."""
    total = sum(s.visits for s in stats)
    if not stats or total == 0:
        return []
    ordered = sorted(stats, key=lambda s: -s.visits)
    best = ordered[0].win_rate
    kept = [s for s in ordered
            if s.visits / total > visit_threshold and s.visits >= min_visits
            and s.win_rate >= best - cutoff]
    if not kept:
        kept = ordered[:(len(ordered) + 2) // 3]
    return [BookMoveChoice(s.move, max(1, round(s.visits / total * 1000)),
                           value_to_cp(s.win_rate, coef), s.win_rate, s.visits, s.prior)
            for s in kept]
