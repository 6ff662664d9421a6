"""``refine minimax --method negascout``: dlshogi's NegaScout over the book.

Every book position is the root of a NegaScout search over the book graph
(dlshogi's ``book_search`` / ``select_best_book_entry``), with the rules of
:mod:`bookgen.refine.retrograde` for repetitions, perpetual checks, draw values and
depths, and these of dlshogi's:

* a position's entries are its book moves in count order (then value, then
  move), followed by its transposition edges;
* **trusted score**: walking the entries in count order, a book move whose
  child is not in the book is worth ``min(s_0 .. s_i)`` of the stored values
  so far, so a less visited move never looks better than a more visited one
  (dlshogi passes that score down and the child, not being in the book,
  returns it); a child in the book is searched;
* the first entry is searched with the full window, later ones with a null
  window and re-searched when they may be better (or, to break ties by depth,
  as good);
* a transposition table holds the results of positions outside cycles, which
  do not depend on the moves that led to them. Positions are searched
  children first, so most searches find their children in the table.

Inside a cycle component values depend on the path (a repetition ends the
game), so its positions are searched without the table. When that exceeds a
budget the component is searched again with the table used inside it too, as
dlshogi does (values there may then depend on the order of the searches);
such components are counted in ``negascout_components_approximated``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from bookgen.refine.minimax_graph import KIND_TRANSPOSITION, MinimaxGraph
from bookgen.refine.retrograde import (
    BLACK,
    DEPTH_INF,
    Propagation,
    Structure,
    analyse,
    better,
    combine,
    deeper,
    owners,
    repetition_value,
)
from bookgen.values import MATE_VALUE, DrawValues

_EXACT, _LOWER, _UPPER = 0, 1, 2
_WINDOW = MATE_VALUE + 1
_COMPONENT_BUDGET = 200_000      # search calls per cycle component before approximating


class _BudgetExceeded(Exception):
    pass


def trusted_values(graph: MinimaxGraph, order: np.ndarray) -> np.ndarray:
    """int32 [E]: per option, the minimum stored value of the node's book moves up to
    it in ``order`` (the search order)."""
    ordered_source = graph.source[order]
    book = graph.kind[order] != KIND_TRANSPOSITION
    values = np.where(book, graph.value[order], MATE_VALUE).astype(np.int64)
    # A segmented running minimum: later nodes are shifted below every earlier value.
    shift = ordered_source.astype(np.int64) * (4 * MATE_VALUE + 4)
    running = np.minimum.accumulate(values - shift) + shift
    trusted = np.zeros(len(order), dtype=np.int32)
    trusted[order] = running
    return trusted


def search_order(graph: MinimaxGraph) -> np.ndarray:
    """Option indices grouped by node: book moves by count (desc), value (desc), move;
    then transposition edges by move."""
    return np.lexsort((graph.move, -graph.value.astype(np.int64), -graph.count,
                       graph.kind == KIND_TRANSPOSITION, graph.source))


class _Search:
    """NegaScout for one game (one draw value, see :func:`bookgen.refine.retrograde.owners`)."""

    def __init__(self, graph: MinimaxGraph, structure: Structure, order: np.ndarray,
                 trusted: np.ndarray, draw: int, budget: int) -> None:
        self.black = (graph.turn == BLACK).tolist()
        self.in_check = graph.in_check.tolist()
        self.draw = draw
        self.draw_of = [draw if b else -draw for b in self.black]
        self.starts = graph.indptr.tolist()
        self.targets = graph.target[order].tolist()
        self.leaf_values = trusted[order].tolist()
        self.outside_cycles = (structure.sizes[structure.labels] == 1).tolist()
        self.labels = structure.labels.tolist()
        self.table: dict[int, tuple[int, int, int]] = {}
        self.roots: dict[int, tuple[int, int]] = {}   # exact values of cycle positions
        self.in_component: dict[int, int] = {}        # path positions per cycle component
        self.approximate = False
        self.limited = False        # the budget applies (exact search of a cycle component)
        self.calls = 0
        self.total_calls = 0
        self.budget = budget
        self.path: list[int] = []
        self.on_path: dict[int, int] = {}

    def search(self, node: int, alpha: int, beta: int) -> tuple[int, int]:
        """(value, depth) for the side to move at ``node``: exact when strictly inside
        (alpha, beta), else a bound (the depth then means nothing)."""
        self.calls += 1
        if self.calls > self.budget and self.limited:
            raise _BudgetExceeded
        outside = self.outside_cycles[node]
        label = self.labels[node]
        if not outside and not self.in_component.get(label):
            # Entered from outside its component: the value does not depend on the path.
            known = self.roots.get(node)
            if known is not None:
                return known
        cacheable = outside or self.approximate
        if cacheable:
            entry = self.table.get(node)
            if entry is not None:
                flag, value, depth = entry
                if flag == _EXACT or (flag == _LOWER and value >= beta) or \
                        (flag == _UPPER and value <= alpha):
                    return value, depth
        path, on_path = self.path, self.on_path
        on_path[node] = len(path)
        path.append(node)
        if not outside:
            self.in_component[label] = self.in_component.get(label, 0) + 1
        mine = self.draw_of[node]
        best: tuple[int, int] | None = None
        searched = False
        for i in range(self.starts[node], self.starts[node + 1]):
            child = self.targets[i]
            if child < 0:
                option = (self.leaf_values[i], 0)
            elif child in on_path:
                outcome = repetition_value(path[on_path[child]:], self.black, self.in_check,
                                           self.draw)
                option = (outcome if self.black[node] else -outcome, DEPTH_INF)
            else:
                # Below the window: alpha, or just below the best so far, so that a
                # move as good as the best comes back exact and ties go by depth.
                floor = alpha if best is None or best[0] <= alpha else best[0] - 1
                if not searched:
                    value, depth = self.search(child, -beta, -floor)
                    option = (-value, deeper(depth))
                    searched = True
                else:
                    value, depth = self.search(child, -(floor + 1), -floor)
                    option = (-value, deeper(depth))
                    if floor < option[0] < beta:
                        value, depth = self.search(child, -beta, -floor)
                        option = (-value, deeper(depth))
            if better(option, best, mine):
                best = option
            assert best is not None
            if best[0] >= beta:
                break
        path.pop()
        del on_path[node]
        if not outside:
            self.in_component[label] -= 1
        assert best is not None
        if cacheable:
            flag = _LOWER if best[0] >= beta else _UPPER if best[0] <= alpha else _EXACT
            self.table[node] = (flag, best[0], best[1])
        return best

    def root(self, node: int) -> tuple[int, int]:
        return self.search(node, -_WINDOW, _WINDOW)


def _solve_game(graph: MinimaxGraph, structure: Structure, order: np.ndarray,
                trusted: np.ndarray, draw: int, budget: int, counts: dict[str, int]
                ) -> tuple[np.ndarray, np.ndarray]:
    value = np.zeros(graph.nodes, dtype=np.int32)
    depth = np.zeros(graph.nodes, dtype=np.int32)
    searcher = _Search(graph, structure, order, trusted, draw, budget)
    for singles, cyclic in structure.levels:
        for node in singles.tolist():
            value[node], depth[node] = searcher.root(node)
        for component in cyclic.tolist():
            nodes = structure.nodes_of(component).tolist()
            searcher.total_calls += searcher.calls
            searcher.calls = 0
            searcher.limited = True
            try:
                results = [searcher.root(node) for node in nodes]
            except _BudgetExceeded:
                searcher.path.clear()
                searcher.on_path.clear()
                searcher.in_component.clear()
                searcher.limited = False
                searcher.approximate = True
                try:
                    results = [searcher.root(node) for node in nodes]
                finally:
                    searcher.approximate = False
                    for node in nodes:
                        searcher.table.pop(node, None)
                counts["negascout_components_approximated"] += 1
            finally:
                searcher.limited = False
            searcher.roots.update(zip(nodes, results))
            value[nodes] = [r[0] for r in results]
            depth[nodes] = [r[1] for r in results]
    counts["negascout_searches"] += searcher.total_calls + searcher.calls
    return value, depth


def negascout(graph: MinimaxGraph, draws: DrawValues = DrawValues(),
              structure: Structure | None = None, budget: int = _COMPONENT_BUDGET
              ) -> Propagation:
    """Values and depths of every node and option by NegaScout from every position."""
    started = time.perf_counter()
    structure = structure or analyse(graph)
    order = search_order(graph)
    trusted = trusted_values(graph, order)
    counts: dict[str, Any] = {"negascout_components_approximated": 0, "negascout_searches": 0}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * int(structure.sizes.max(initial=1)) + 10_000))
    try:
        passes: list[tuple[int | None, np.ndarray, np.ndarray]] = []
        for colour, draw in owners(draws):
            value, depth = _solve_game(graph, structure, order, trusted, draw, budget,
                                       counts if not passes else dict.fromkeys(counts, 0))
            passes.append((colour, value, depth))
    finally:
        sys.setrecursionlimit(limit)
    node_value, node_depth, option_value, option_depth = combine(graph, passes, trusted)
    counts.update(structure.counts())
    counts["games"] = len(passes)
    return Propagation(node_value, node_depth, option_value, option_depth, counts,
                       time.perf_counter() - started)
