"""Which position to expand next: dlshogi's trial walk, book MCTS and drop-out.

A strategy walks the in-memory :class:`~bookgen.grow.book_graph.GrowGraph` from a root
and returns the first position worth expanding (not yet expanded, not being
expanded by a worker), or None when its walks find nothing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import cshogi

from bookgen.engines.mcts import C_BASE, C_INIT
from bookgen.grow.book_graph import Edge, GrowGraph, Node
from bookgen.grow.settings import WalkSettings
from bookgen.position import board_key
from bookgen.values import EVAL_COEF, cp_to_value


@dataclass
class Leaf:
    board: cshogi.Board
    sfen: str        # normalised, no move number
    ply: int


class Strategy:
    name = "base"
    attempts = 16  # walks tried before concluding there is nothing to expand

    def __init__(self, graph: GrowGraph, roots: Sequence[cshogi.Board], limits: WalkSettings,
                 rng: random.Random) -> None:
        self.graph = graph
        self.roots = list(roots)
        self.limits = limits
        self.rng = rng

    def next_leaf(self, pending: set[str]) -> Leaf | None:
        for _ in range(self.attempts):
            leaf = self.walk(pending)
            if leaf is not None:
                return leaf
        return None

    def walk(self, pending: set[str]) -> Leaf | None:
        raise NotImplementedError

    def _stop_at(self, node: Node, ply: int) -> bool:
        return (not node.edges or ply >= self.limits.max_ply
                or (node.value is not None and abs(node.value) > self.limits.eval_threshold_cp))


class DlshogiStrategy(Strategy):
    """dlshogi ``make_book``: the own side follows the minimax-best book move,
    the opponent samples book moves with probability proportional to
    ``count ** (1 / T)``; expand the first position not yet in the book. With
    ``color`` both, trials alternate between black and white as the own side."""

    name = "dlshogi"

    def __init__(self, graph: GrowGraph, roots: Sequence[cshogi.Board], limits: WalkSettings,
                 rng: random.Random) -> None:
        super().__init__(graph, roots, limits, rng)
        self.trial = 0

    def own_color(self) -> int:
        color = self.limits.color
        if color == "black":
            return cshogi.BLACK
        if color == "white":
            return cshogi.WHITE
        self.trial += 1
        return cshogi.BLACK if self.trial % 2 else cshogi.WHITE

    def walk(self, pending: set[str]) -> Leaf | None:
        own = self.own_color()
        root = self.rng.choice(self.roots)
        board = root.copy()
        ply = root.move_number
        path: set[str] = set()
        while True:
            sfen = board_key(board)
            node = self.graph.get(sfen)
            if node is None or not node.expanded:
                return None if sfen in pending else Leaf(board, sfen, ply)
            if sfen in path or self._stop_at(node, ply - root.move_number):
                return None
            path.add(sfen)
            edge = node.best_edge() if board.turn == own else self._sample(node.edges)
            assert edge is not None
            self.graph.child_of(node, edge, board)
            board.push_usi(edge.move)
            ply += 1

    def _sample(self, edges: list[Edge]) -> Edge:
        power = 1.0 / max(self.limits.opponent_temperature, 1e-6)
        weights = [max(edge.count, 0) ** power for edge in edges]
        if sum(weights) <= 0:
            return self.rng.choice(edges)
        return self.rng.choices(edges, weights)[0]


class BookMctsStrategy(Strategy):
    """dlshogi ``make_mcts_book``: PUCT over the book graph itself.

    Priors are ``softmax(value / (T * 756))`` over a node's book moves, q is
    the child's value for the mover, unvisited children take the parent's
    value; visit counts live for the run. The leaf reached is expanded."""

    name = "book-mcts"

    def __init__(self, graph: GrowGraph, roots: Sequence[cshogi.Board], limits: WalkSettings,
                 rng: random.Random) -> None:
        super().__init__(graph, roots, limits, rng)
        self.edge_visits: dict[tuple[str, str], int] = {}
        self.node_visits: dict[str, int] = {}

    def walk(self, pending: set[str]) -> Leaf | None:
        root = self.rng.choice(self.roots)
        board = root.copy()
        ply = root.move_number
        path: list[tuple[str, str]] = []
        seen: set[str] = set()
        leaf: Leaf | None = None
        while True:
            sfen = board_key(board)
            node = self.graph.get(sfen)
            if node is None or not node.expanded:
                leaf = None if sfen in pending else Leaf(board, sfen, ply)
                break
            if sfen in seen or self._stop_at(node, ply - root.move_number):
                break
            seen.add(sfen)
            edge = self._select(node)
            path.append((sfen, edge.move))
            self.graph.child_of(node, edge, board)
            board.push_usi(edge.move)
            ply += 1
        for sfen, move in path:  # count the visit whatever the walk found
            self.node_visits[sfen] = self.node_visits.get(sfen, 0) + 1
            self.edge_visits[(sfen, move)] = self.edge_visits.get((sfen, move), 0) + 1
        return leaf

    def _select(self, node: Node) -> Edge:
        scale = max(self.limits.opponent_temperature, 1e-6) * EVAL_COEF
        top = max(edge.value for edge in node.edges)
        exps = [math.exp((edge.value - top) / scale) for edge in node.edges]
        total = sum(exps)
        parent_visits = self.node_visits.get(node.sfen, 0)
        c = math.log((parent_visits + C_BASE + 1) / C_BASE) + C_INIT
        parent_q = cp_to_value(node.value or 0)
        best, best_score = node.edges[0], -math.inf
        for edge, weight in zip(node.edges, exps):
            visits = self.edge_visits.get((node.sfen, edge.move), 0)
            q = cp_to_value(edge.value) if visits else parent_q
            score = q + c * (weight / total) * math.sqrt(parent_visits + 1) / (1 + visits)
            if score > best_score:
                best, best_score = edge, score
        return best


class DropoutStrategy(Strategy):
    """Lincke's drop-out expansion: expand the leaf whose line deviates least
    from the minimax-best line. A move's priority is ``alpha * (best - value)
    / 100 + priority(child) + 1`` (values in cp, so alpha is plies per pawn);
    an unexpanded position has priority 0; descend along the lowest."""

    name = "dropout"
    attempts = 1  # deterministic: one walk says it all

    def walk(self, pending: set[str]) -> Leaf | None:
        root = self.rng.choice(self.roots)
        memo: dict[str, float] = {}
        board = root.copy()
        ply = root.move_number
        while True:
            sfen = board_key(board)
            node = self.graph.get(sfen)
            if node is None or not node.expanded:
                return None if sfen in pending else Leaf(board, sfen, ply)
            scored = self._scored_edges(node, board, ply - root.move_number, memo, pending,
                                        {sfen})
            if not scored or math.isinf(scored[0][0]):
                return None
            edge = scored[0][1]
            board.push_usi(edge.move)
            ply += 1

    def _scored_edges(self, node: Node, board: cshogi.Board, depth: int,
                      memo: dict[str, float], pending: set[str], stack: set[str]
                      ) -> list[tuple[float, Edge]]:
        if self._stop_at(node, depth):
            return []
        best = max(edge.value for edge in node.edges)
        scored = []
        for edge in node.edges:
            child = self.graph.child_of(node, edge, board)
            board.push_usi(edge.move)
            priority = self._priority(child, board, depth + 1, memo, pending, stack)
            board.pop()
            alpha = self.limits.dropout_alpha_plies_per_pawn
            scored.append((alpha * (best - edge.value) / 100.0 + priority + 1.0, edge))
        scored.sort(key=lambda item: item[0])
        return scored

    def _priority(self, sfen: str, board: cshogi.Board, depth: int, memo: dict[str, float],
                  pending: set[str], stack: set[str]) -> float:
        if sfen in memo:
            return memo[sfen]
        node = self.graph.get(sfen)
        if node is None or not node.expanded:
            value = math.inf if sfen in pending else 0.0
        elif sfen in stack:
            return math.inf
        else:
            stack.add(sfen)
            scored = self._scored_edges(node, board, depth, memo, pending, stack)
            stack.discard(sfen)
            value = scored[0][0] if scored else math.inf
        memo[sfen] = value
        return value


def make_strategy(name: str, graph: GrowGraph, roots: Sequence[cshogi.Board],
                  limits: WalkSettings, rng: random.Random) -> Strategy:
    classes = {cls.name: cls for cls in (DlshogiStrategy, BookMctsStrategy, DropoutStrategy)}
    return classes[name](graph, roots, limits, rng)
