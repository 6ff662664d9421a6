"""The leaf search: PUCT Monte-Carlo tree search over a batched evaluator.

AlphaZero's PUCT with its constants as defaults (``c = ln((N + c_base + 1) /
c_base) + c_init``, c_base 19652, c_init 1.25); leaves are evaluated in
batches (virtual loss spreads one batch over different leaves); the search
stops early when the second most visited root move can no longer overtake
the first. Values are win probabilities for the side to move at each node;
edges store them from the mover's side.

Each root move also reports the depth of the search behind it: the move
itself plus the plies of the principal line below it in the search tree
(from the move's child, the most visited move while the node was evaluated
and has tried moves), and that line's first reply, the move the search
expects after it.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TypeVar

import cshogi

from bookgen.engines.protocols import Evaluation, Evaluator
from bookgen.errors import SettingsError
from bookgen.values import DrawValues, value_to_cp

R = TypeVar("R")

SearchSteps = Generator[list[cshogi.Board], list[Evaluation], R]
"""A resumable search that returns R: it yields batches of boards to evaluate
and is sent their evaluations, in order (see :meth:`Mcts.searching`)."""



def run_search(steps: SearchSteps[R], evaluator: Evaluator) -> R:
    """Drive a resumable search to its end, its leaves evaluated by ``evaluator``."""
    try:
        boards = next(steps)
        while True:
            boards = steps.send(evaluator.evaluate(boards))
    except StopIteration as stop:
        result: R = stop.value
        return result


C_BASE = 19652.0
C_INIT = 1.25


@dataclass(frozen=True)
class MctsSettings:
    playouts: int = 200
    batch_size: int = 1
    c_base: float = C_BASE
    c_init: float = C_INIT
    draws: DrawValues = field(default_factory=DrawValues)  # what a repetition is worth
    early_stop: bool = True

    def __post_init__(self) -> None:
        for name in ("playouts", "batch_size"):
            if getattr(self, name) < 1:
                raise SettingsError(f"mcts.{name}", "must be at least 1")


@dataclass
class MoveStats:
    move: str
    visits: int
    prior: float
    win_rate: float     # mean value for the side that plays the move
    value: int          # win_rate in centipawns
    depth: int = 0      # plies of the search's principal line through the move (0: unvisited)
    reply: str | None = None  # the expected reply: first move of that line after this one


@dataclass
class MctsResult:
    moves: list[MoveStats]   # all root moves, most visited first
    value: float             # the evaluator's value of the root
    playouts: int
    evaluations: int


class _Node:
    # Plain lists, not numpy: nodes have a few dozen moves, where per-call
    # numpy overhead would dominate the selection.
    #
    # Moves are tried in order of falling prior: all untried moves share the
    # first-play value, so only the untried one with the highest prior can be
    # selected and the tried moves always form a prefix (see Mcts._select).
    # ``moves``, ``priors``, ``visits``, ``totals``, ``qs`` and ``children``
    # hold that prefix only and grow by one when a move is first tried; the
    # evaluator's moves are sorted by prior when the node is first selected
    # from. Most leaves never are, and skip the sort and the per-move lists.
    # ``qs[i]`` is the move's mean value, ``totals[i] / visits[i]``, or the
    # first-play value while it has no visits; the backups keep it in step.
    __slots__ = ("moves", "priors", "visits", "totals", "qs", "total_visits", "children",
                 "value", "terminal", "expanded", "all_moves", "all_priors", "order")

    def __init__(self) -> None:
        self.total_visits = 0
        self.value = 0.5
        self.terminal = False
        self.expanded = False  # evaluated (a pending leaf of the batch is not)
        self.order: list[int] | None = None  # all_moves indices by falling prior

    def expand(self, board: cshogi.Board, evaluation: Evaluation) -> None:
        self.value = evaluation.value
        self.expanded = True
        if not evaluation.moves:
            self.terminal = True
            return
        self.all_moves = (evaluation.move_ints if evaluation.move_ints is not None
                          else [board.move_from_usi(usi) for usi in evaluation.moves])
        self.all_priors = evaluation.priors

    def sort(self) -> list[int]:
        """Order the moves by falling prior (stable: ties keep the evaluator's order)."""
        priors = self.all_priors
        order = self.order = sorted(range(len(priors)), key=priors.__getitem__, reverse=True)
        self.moves: list[int] = []
        self.priors: list[float] = []
        self.visits: list[int] = []
        self.totals: list[float] = []
        self.qs: list[float] = []
        self.children: list[_Node | None] = []
        return order

    def sorted_stats(self) -> tuple[list[int], list[float], list[int], list[float]]:
        """Moves, priors, visits and value totals of all moves, by falling prior."""
        order = self.order if self.order is not None else self.sort()
        width = len(self.visits)
        rest = order[width:]
        return (self.moves + [self.all_moves[i] for i in rest],
                self.priors + [self.all_priors[i] for i in rest],
                self.visits + [0] * len(rest), self.totals + [0.0] * len(rest))


def _terminal_value(board: cshogi.Board, settings: MctsSettings) -> float | None:
    """Value for the side to move if the game is decided here, else None."""
    draw = board.is_draw()
    if draw == cshogi.REPETITION_DRAW:
        return settings.draws.probability(board.turn)
    if draw in (cshogi.REPETITION_WIN, cshogi.REPETITION_SUPERIOR):
        return 1.0
    if draw in (cshogi.REPETITION_LOSE, cshogi.REPETITION_INFERIOR):
        return 0.0
    return None  # no legal moves: the evaluator says so (value 0, no moves)


def _exploration_scale(parent_visits: int, c_base: float, c_init: float) -> float:
    """PUCT's ``c(N) * sqrt(max(N, 1))`` for a node visited N times."""
    c = math.log((parent_visits + c_base + 1) / c_base) + c_init
    return c * math.sqrt(max(parent_visits, 1))


_SCALE_TABLE_MAX = 1 << 16
_scale_tables: dict[tuple[float, float], list[float]] = {}
_scale_tables_lock = threading.Lock()


def _scale_table(c_base: float, c_init: float, playouts: int) -> list[float]:
    """:func:`_exploration_scale` by N, for N up to ``playouts`` (no node gets
    more visits) or a cap; shared by all searches with these constants."""
    size = min(playouts, _SCALE_TABLE_MAX) + 1
    table = _scale_tables.get((c_base, c_init))
    if table is None or len(table) < size:
        with _scale_tables_lock:  # appended only under the lock; readers never see a gap
            table = _scale_tables.setdefault((c_base, c_init), [])
            while len(table) < size:
                table.append(_exploration_scale(len(table), c_base, c_init))
    return table


class Mcts:
    """One search tree per call to :meth:`search`."""

    def __init__(self, evaluator: Evaluator, settings: MctsSettings | None = None) -> None:
        self.evaluator = evaluator
        self.settings = settings or MctsSettings()
        self.evaluations = 0
        self._scales: list[float] = []

    def _select(self, node: _Node) -> int:
        """The index (into the tried prefix, or the next untried move) to play;
        trying a move appends it to the node's prefix lists."""
        order = node.order
        if order is None:
            order = node.sort()
        parent_visits = node.total_visits
        scales = self._scales
        if parent_visits < len(scales):
            scale = scales[parent_visits]
        else:
            scale = _exploration_scale(parent_visits, self.settings.c_base, self.settings.c_init)
        fpu = node.value
        visits = node.visits
        best_index, best_score = 0, -math.inf
        index = 0
        for q, n, prior in zip(node.qs, visits, node.priors):
            score = q + scale * prior / (1 + n)
            if score > best_score:
                best_index, best_score = index, score
            index += 1
        width = len(visits)
        if width < len(order):  # the best untried move: first-play value, top prior
            move = order[width]
            prior = node.all_priors[move]
            if fpu + scale * prior > best_score:
                node.moves.append(node.all_moves[move])
                node.priors.append(prior)
                visits.append(0)
                node.totals.append(0.0)
                node.qs.append(fpu)
                node.children.append(None)
                return width
        return best_index

    def search(self, board: cshogi.Board, root_evaluation: Evaluation | None = None
               ) -> MctsResult:
        """Search ``board`` (left unchanged) with the playout budget."""
        return run_search(self.searching(board, root_evaluation), self.evaluator)

    def searching(self, board: cshogi.Board, root_evaluation: Evaluation | None = None
                  ) -> SearchSteps[MctsResult]:
        """:meth:`search` as a resumable search: it yields each batch of leaves
        (boards not to be changed until it is resumed), is sent their
        evaluations, and returns the result. Whoever drives it may evaluate
        the leaves of many searches together
        (:class:`bookgen.engines.batching.SearchBatcher`); the result is the
        same as :meth:`search`'s with the same evaluations. ``self.evaluator``
        is not used."""
        settings = self.settings
        self.evaluations = evaluations_done = 0
        self._scales = _scale_table(settings.c_base, settings.c_init, settings.playouts)
        root = _Node()
        if root_evaluation is None:
            root_evaluation = (yield [board])[0]
            evaluations_done += 1
        root.expand(board, root_evaluation)
        if root.terminal:
            self.evaluations = evaluations_done
            return MctsResult([], root.value, 0, evaluations_done)
        board = board.copy()
        done = 0
        while done < settings.playouts:
            batch = min(settings.batch_size, settings.playouts - done)
            pending: list[tuple[list[tuple[_Node, int]], _Node, cshogi.Board]] = []
            in_place = 0  # plies to pop after evaluating the batch's last leaf on ``board``
            for i in range(batch):
                path, leaf, value = self._descend(root, board)
                done += 1
                if value is not None:
                    self._backup(path, value)
                elif i == batch - 1:
                    # The last leaf of the batch is evaluated where it stands
                    # (no descent follows before the evaluation), not copied.
                    pending.append((path, leaf, board))
                    in_place = len(path)
                    continue
                else:
                    pending.append((path, leaf, board.copy()))
                for _ in path:
                    board.pop()
            if pending:
                boards = [leaf_board for _path, _leaf, leaf_board in pending]
                evaluations = yield boards
                evaluations_done += len(boards)
                for (path, leaf, leaf_board), evaluation in zip(pending, evaluations):
                    if not leaf.expanded and not leaf.terminal:
                        leaf.expand(leaf_board, evaluation)
                    self._backup_pending(path, leaf.value)
                for _ in range(in_place):
                    board.pop()
            if settings.early_stop and self._decided(root, settings.playouts - done):
                break
        self.evaluations = evaluations_done
        return MctsResult(self._root_stats(root), root.value, done, evaluations_done)

    def _descend(self, root: _Node, board: cshogi.Board
                 ) -> tuple[list[tuple[_Node, int]], _Node, float | None]:
        """Walk down to a leaf, pushing the moves on ``board`` (the caller pops
        them: one per path entry). Returns the path, the leaf, and its value
        when known without evaluation (terminal or already expanded in this batch)."""
        path: list[tuple[_Node, int]] = []
        node = root
        select = self._select
        while True:
            index = select(node)
            path.append((node, index))
            board.push(node.moves[index])
            child = node.children[index]
            if child is None:
                child = node.children[index] = _Node()
                if board.is_draw():  # cshogi.NOT_REPETITION is 0
                    terminal = _terminal_value(board, self.settings)
                    if terminal is not None:
                        child.terminal = True
                        child.value = terminal
                        return path, child, terminal
                # Virtual loss: count the visit now, with a lost value for the
                # mover, so the rest of the batch looks elsewhere.
                for parent, move_index in path:
                    n = parent.visits[move_index] = parent.visits[move_index] + 1
                    parent.total_visits += 1
                    parent.qs[move_index] = parent.totals[move_index] / n
                return path, child, None
            if child.terminal or not child.expanded:  # decided, or pending in this batch
                return path, child, child.value
            node = child

    @staticmethod
    def _backup(path: list[tuple[_Node, int]], leaf_value: float) -> None:
        """Add the leaf's value along the path; each edge gets the mover's view."""
        value = leaf_value
        for node, index in reversed(path):
            value = 1.0 - value  # from the side to move at the leaf to the mover's side
            n = node.visits[index] = node.visits[index] + 1
            node.total_visits += 1
            total = node.totals[index] = node.totals[index] + value
            node.qs[index] = total / n

    @staticmethod
    def _backup_pending(path: list[tuple[_Node, int]], leaf_value: float) -> None:
        """:meth:`_backup` for a path under virtual loss: the visits are already
        counted (removing the virtual loss and adding the visit cancel out)."""
        value = leaf_value
        for node, index in reversed(path):
            value = 1.0 - value
            total = node.totals[index] = node.totals[index] + value
            node.qs[index] = total / node.visits[index]

    @staticmethod
    def _decided(root: _Node, remaining: int) -> bool:
        moves = len(root.all_moves)
        if moves < 2:
            return moves == 1
        # Cheap tests first (untried moves have no visits): cannot be decided yet.
        if root.total_visits <= remaining:
            return False
        visits = root.visits
        if max(visits) <= remaining:
            return False
        first, second = heapq.nlargest(2, visits) if len(visits) > 1 else (visits[0], 0)
        return first - second > remaining

    @staticmethod
    def _principal_line(node: _Node | None) -> list[int]:
        """The most visited moves from ``node`` down the tree, while nodes are
        evaluated (not terminal) and have tried moves."""
        line: list[int] = []
        while (node is not None and node.expanded and not node.terminal
               and node.order is not None and node.visits):
            visits = node.visits
            index = max(range(len(visits)), key=visits.__getitem__)
            if not visits[index]:
                break
            line.append(node.moves[index])
            node = node.children[index]
        return line

    @classmethod
    def _root_stats(cls, root: _Node) -> list[MoveStats]:
        stats = []
        moves, priors, visits, totals = root.sorted_stats()
        tried = len(root.visits)  # the first ``tried`` entries have child nodes
        order = sorted(range(len(moves)), key=lambda i: -visits[i])
        for index in order:
            count = visits[index]
            win_rate = totals[index] / count if count else root.value
            depth, reply = 0, None
            if count:
                line = cls._principal_line(root.children[index] if index < tried else None)
                depth = 1 + len(line)
                reply = cshogi.move_to_usi(line[0]) if line else None
            stats.append(MoveStats(cshogi.move_to_usi(moves[index]), count,
                                   priors[index], win_rate, value_to_cp(win_rate),
                                   depth, reply))
        return stats
