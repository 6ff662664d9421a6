"""The minimax solver of ``refine minimax``: exact values over the whole book graph.

The graph (:mod:`bookgen.refine.minimax_graph`) has every book position with moves as a node
and every legal move into a node as an edge (transpositions included). The
value of a position is that of the game played from it over the book:

* a **leaf move** (a book move whose child is not a node) ends the game with
  its stored value (clamped to +-30000, ``none`` read as 0) at depth 0;
* a move into a node is worth ``(-v, d + 1)`` of the child's ``(v, d)``;
* a move that **repeats** a position of the game ends it: worth the mover's
  draw value (:class:`bookgen.values.DrawValues`, per mille of a win, 500 = 0 cp,
  converted with :meth:`bookgen.values.DrawValues.cp`) at depth "infinite"
  (stored as NULL), except that when every move of one side in the repeated
  stretch gave check, that side loses (-30000), as in shogi's rule on
  perpetual check. When both sides checked on every move it is a draw;
* the side to move picks the best move: higher value first; on equal value
  the shorter line if the value is better than the mover's draw value (0 cp
  by default: "winning"), the longer line if it is worse ("losing"), the
  shorter line on a draw-valued tie. A line that ends in a repetition counts
  as infinitely long: a winning side never prefers it, a losing side does.
  Measuring "winning" against the draw value rather than against 0 keeps
  the depths well defined when draws are not worth 0.

With draw values whose sum is 1000 (the default 500/500) a repetition is
worth the same to both sides and every position is valued in one game.
Otherwise (say both sides value a draw below an even game) the value of a
repetition would depend on which side completes it, which makes values
depend on the moves that led to a position and exact values intractable;
following YaneuraOu's remark on peta_shock, each position is then valued in
the game where a repetition is worth its *side to move's* draw value (and the
complement to the other side): the side choosing among the stored moves sees
draws as it asked. Two games are solved, one per colour.

The **retrograde** method computes this exactly, with these steps:

1. strongly connected components of the graph (scipy), and the levels of
   their condensation (in-degree counting in numpy);
2. level by level from the leaves, positions outside cycles take their best
   option in vectorised passes (segment maxima of encoded (value, depth) keys);
3. each cycle component (a strongly connected set of positions) is solved
   as a game whose exits are already known, by value levels: the best
   remaining exit value above the draw value is forced by the side it
   favours wherever it can (an attractor, walked in order of line length so
   that depths come out right), then the worst below the draw value likewise
   for the other side; what remains is a draw. This gives the value of the
   game in which a repetition ends it, for every position as the start, and
   needs no capped fixed-point iteration. The components of one level are
   gathered in one numpy step and solved one after the other. Components where
   one side can check on every move of a cycle are solved by searching all
   lines instead (:func:`solve_by_search`). Its cost is the number of simple
   lines, which explodes when such a component is large: a budget of
   :data:`_EXHAUSTIVE_BUDGET` positions visited per component guards against
   that, and :func:`search_exceeds` tells beforehand, by counting lines, the
   searches that would exceed it. A component over budget
   is solved by value levels as if its repetitions were all draws (counted in
   ``checking_components_approximated``): exact unless a perpetual check
   changes the outcome there.

Per-move minimax values are ``(-v, d + 1)`` of the child's values (leaf
moves: their value, depth 0). :func:`retrograde` returns them as a
:class:`Propagation`; :mod:`bookgen.refine.negascout` is the other method,
built on the same pieces; :mod:`bookgen.refine.minimax` stores the result.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from bookgen.arrays import ranges
from bookgen.refine.minimax_graph import MinimaxGraph
from bookgen.values import MATE_VALUE, DrawValues

DEPTH_INF = (1 << 20) - 1       # "infinite" depth: a line that ends in a repetition
_VALUE_OFFSET = 1 << 15
_TIE_OFFSET = 1 << 20
_TIE_BITS = 21
_EXHAUSTIVE_BUDGET = 2_000_000  # search calls per component with checking cycles
_TOGETHER_POSITIONS = 1 << 15   # positions of the cycle components solved together at most

BLACK, WHITE = 0, 1


# -- values, depths and their order -------------------------------------------------


def owners(draws: DrawValues) -> list[tuple[int | None, int]]:
    """The games to solve: (colour valued by it or None for all, draw value R in cp
    from black's point of view)."""
    black, white = draws.cp(BLACK), draws.cp(WHITE)
    if black == -white:
        return [(None, black)]
    return [(BLACK, black), (WHITE, -white)]


def deeper(depth: int) -> int:
    """Depth of a line one move longer."""
    return depth if depth >= DEPTH_INF else depth + 1


def preference(value: int, depth: int, draw: int) -> tuple[int, int]:
    """Sort key of a (value, depth) for a mover whose draw value is ``draw``: larger is better."""
    return (value, -depth) if value >= draw else (value, depth)


def better(a: tuple[int, int], b: tuple[int, int] | None, draw: int) -> bool:
    """Whether line ``a`` is strictly better than ``b`` for a mover with draw value ``draw``."""
    return b is None or preference(*a, draw) > preference(*b, draw)


def _encode(value: np.ndarray, depth: np.ndarray, draw: np.ndarray) -> np.ndarray:
    """One int64 per (value, depth) that orders like :func:`preference`."""
    value = value.astype(np.int64)
    depth = depth.astype(np.int64)
    tie = np.where(value >= draw, -depth, depth)
    return ((value + _VALUE_OFFSET) << _TIE_BITS) + (tie + _TIE_OFFSET)


def _decode(key: np.ndarray, draw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    value = (key >> _TIE_BITS) - _VALUE_OFFSET
    tie = (key & ((1 << _TIE_BITS) - 1)) - _TIE_OFFSET
    depth = np.where(value >= draw, -tie, tie)
    return value.astype(np.int32), depth.astype(np.int32)


def _deeper(depth: np.ndarray) -> np.ndarray:
    return np.where(depth >= DEPTH_INF, DEPTH_INF, depth + 1).astype(np.int32)


# -- structure: cycle components and the order to solve them -------------------------


@dataclass
class Structure:
    """Strongly connected components of the graph and the levels of their condensation."""

    labels: np.ndarray          # int32 [N] component of each node
    sizes: np.ndarray           # int64 [C]
    checking: np.ndarray        # bool [C] a cycle of it has one side checking throughout
    members: np.ndarray         # int32 nodes ordered by component
    member_ptr: np.ndarray      # int64 [C + 1]
    levels: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    # per level: (nodes outside cycles, components with cycles), children before parents

    def nodes_of(self, component: int) -> np.ndarray:
        return self.members[self.member_ptr[component]:self.member_ptr[component + 1]]

    def counts(self) -> dict[str, int]:
        cyclic = self.sizes > 1
        return {"cycle_components": int(cyclic.sum()),
                "positions_in_cycles": int(self.sizes[cyclic].sum()),
                "largest_cycle_component": int(self.sizes[cyclic].max()) if cyclic.any() else 0,
                "checking_components": int(self.checking.sum()),
                "passes": len(self.levels)}


def _strong_components(count: int, source: np.ndarray, target: np.ndarray
                       ) -> tuple[int, np.ndarray]:
    matrix = csr_matrix((np.ones(len(source), dtype=np.int8), (source, target)),
                        shape=(count, count))
    components, labels = connected_components(matrix, directed=True, connection="strong")
    return int(components), labels.astype(np.int32)


def analyse(graph: MinimaxGraph) -> Structure:
    """Components, which of them can hold a perpetual check, and their solving order."""
    count = graph.nodes
    edges = graph.target >= 0
    source, target = graph.source[edges], graph.target[edges]
    components, labels = _strong_components(count, source, target)
    sizes = np.bincount(labels, minlength=components).astype(np.int64)

    # A cycle on which black checks with every move runs through white-to-move
    # positions that are all in check: look for cycles among black positions and
    # white positions in check (and the same with colours swapped).
    checking = np.zeros(components, dtype=bool)
    for checker in (BLACK, WHITE):
        keep = (graph.turn == checker) | graph.in_check
        sub = keep[source] & keep[target]
        if not sub.any():
            continue
        _, sub_labels = _strong_components(count, source[sub], target[sub])
        sub_sizes = np.bincount(sub_labels)
        on_cycle = keep & (sub_sizes[sub_labels] > 1)
        checking[labels[on_cycle]] = True

    members = np.argsort(labels, kind="stable").astype(np.int32)
    member_ptr = np.zeros(components + 1, dtype=np.int64)
    np.cumsum(sizes, out=member_ptr[1:])
    structure = Structure(labels, sizes, checking, members, member_ptr)

    # Kahn's algorithm on the condensation, one numpy step per level.
    from_c, to_c = labels[source], labels[target]
    cross = from_c != to_c
    from_c, to_c = from_c[cross], to_c[cross]
    out_degree = np.bincount(from_c, minlength=components)
    order = np.argsort(to_c, kind="stable")
    preds = from_c[order]
    pred_ptr = np.zeros(components + 1, dtype=np.int64)
    np.cumsum(np.bincount(to_c, minlength=components), out=pred_ptr[1:])
    ready = np.nonzero(out_degree == 0)[0]
    while ready.size:
        single = sizes[ready] == 1
        structure.levels.append((members[member_ptr[ready[single]]], ready[~single]))
        touched = preds[ranges(pred_ptr[ready], pred_ptr[ready + 1])]
        if not touched.size:
            break
        unique, times = np.unique(touched, return_counts=True)
        out_degree[unique] -= times
        ready = unique[out_degree[unique] == 0]
    return structure


# -- solving components with cycles ---------------------------------------------------


class BudgetExceeded(Exception):
    pass


def solve_by_levels(black: Sequence[bool], exits: Sequence[tuple[int, int, int]],
                    links: Sequence[tuple[int, int]], draw: int
                    ) -> tuple[list[int], list[int], int]:
    """Solve a component without perpetual checks as a game with the given exits.

    ``black[i]``: node ``i`` has black to move; ``exits``: (node, value from
    black's view, depth) of the moves leaving the component (leaf moves and
    moves into solved positions); ``links``: (from, to) moves inside it;
    ``draw``: the draw value R from black's view. Returns values from black's
    view, depths, and the number of value levels processed.
    """
    n = len(black)
    preds: list[list[int]] = [[] for _ in range(n)]
    live_options = [0] * n
    for node, _value, _depth in exits:
        live_options[node] += 1
    for origin, destination in links:
        preds[destination].append(origin)
        live_options[origin] += 1
    terminals = sorted(exits, key=lambda e: e[1])
    value: list[int | None] = [None] * n
    depth = [DEPTH_INF] * n
    longest = [-1] * n
    unsolved = n
    low, high = 0, len(terminals) - 1
    levels = 0

    def settle(node: int, level_value: int, line: int, heap: list[tuple[int, int]]) -> None:
        nonlocal unsolved
        value[node], depth[node] = level_value, line
        unsolved -= 1
        longer = deeper(line)
        for origin in preds[node]:
            if value[origin] is None:
                heapq.heappush(heap, (longer, origin))

    def attract(heap: list[tuple[int, int]], level_value: int, by_black: bool | None) -> None:
        """Nodes of the attracting side take the shortest arriving line; the other
        side is settled when all its options arrived, with the longest. With
        ``by_black`` None (draw level) everyone takes the shortest."""
        heapq.heapify(heap)
        waiting: list[int] = []
        while heap:
            line, node = heapq.heappop(heap)
            if value[node] is not None:
                continue
            if by_black is None or black[node] == by_black:
                settle(node, level_value, line, heap)
                continue
            live_options[node] -= 1
            if longest[node] < 0:
                waiting.append(node)
            longest[node] = max(longest[node], line)
            if live_options[node] == 0:
                settle(node, level_value, longest[node], heap)
        for node in waiting:       # options of this level are dominated for the rest
            longest[node] = -1

    while unsolved:
        while low <= high and value[terminals[high][0]] is not None:
            high -= 1
        while low <= high and value[terminals[low][0]] is not None:
            low += 1
        levels += 1
        if low <= high and terminals[high][1] > draw:
            level_value = terminals[high][1]
            heap = []
            while high >= low and terminals[high][1] == level_value:
                node, _v, line = terminals[high]
                if value[node] is None:
                    heap.append((line, node))
                high -= 1
            attract(heap, level_value, True)
        elif low <= high and terminals[low][1] < draw:
            level_value = terminals[low][1]
            heap = []
            while low <= high and terminals[low][1] == level_value:
                node, _v, line = terminals[low]
                if value[node] is None:
                    heap.append((line, node))
                low += 1
            attract(heap, level_value, False)
        else:
            # Only draw-valued exits are left: everything left is a draw, reached
            # by the shortest line to such an exit, or by repetition (infinite).
            heap = [(terminals[i][2], terminals[i][0]) for i in range(low, high + 1)
                    if value[terminals[i][0]] is None]
            attract(heap, draw, None)
            for node in range(n):
                if value[node] is None:
                    value[node], depth[node] = draw, DEPTH_INF
            unsolved = 0
    solved = [int(v) for v in value if v is not None]
    assert len(solved) == n  # every node has its value now
    return solved, depth, levels


def repetition_value(cycle: Sequence[int], black: Sequence[bool], in_check: Sequence[bool],
                     draw: int) -> int:
    """Value from black's view of a game ended by repeating ``cycle[0]``; ``cycle``
    lists the positions from its first occurrence to the last one before it."""
    black_checked_all = all(in_check[p] for p in cycle if not black[p])
    white_checked_all = all(in_check[p] for p in cycle if black[p])
    if black_checked_all and not white_checked_all:
        return -MATE_VALUE
    if white_checked_all and not black_checked_all:
        return MATE_VALUE
    return draw


_NO_LINE = -1     # below every line's key


def _line_key(value: int, depth: int, draw: int) -> int:
    """:func:`preference` as one int (as :func:`_encode`): larger is better."""
    tie = -depth if value >= draw else depth
    return ((value + _VALUE_OFFSET) << _TIE_BITS) + tie + _TIE_OFFSET


def _line_of(key: int, draw: int) -> tuple[int, int]:
    """The (value, depth) of a :func:`_line_key`."""
    value = (key >> _TIE_BITS) - _VALUE_OFFSET
    tie = (key & ((1 << _TIE_BITS) - 1)) - _TIE_OFFSET
    return value, (-tie if value >= draw else tie)


def _reverse_postorder(successors: Sequence[Sequence[int]], roots: Sequence[int]
                       ) -> tuple[list[int], list[int]]:
    """Nodes reached from ``roots`` in postorder of a depth-first walk, and each
    node's rank in the reverse order (-1: not reached). Every move from a lower to a
    higher rank is a tree, forward or cross move: those moves form a graph without
    cycles."""
    rank = [-1] * len(successors)
    post: list[int] = []
    for root in roots:
        if rank[root] != -1:
            continue
        rank[root] = 0
        stack = [(root, 0)]
        while stack:
            node, at = stack[-1]
            children = successors[node]
            if at < len(children):
                stack[-1] = (node, at + 1)
                child = children[at]
                if rank[child] == -1:
                    rank[child] = 0
                    stack.append((child, 0))
            else:
                stack.pop()
                post.append(node)
    for i, node in enumerate(reversed(post)):
        rank[node] = i
    return post, rank


def _lines_without_cycles(successors: Sequence[Sequence[int]], post: list[int],
                          rank: list[int], cap: int) -> list[int]:
    """Per node of ``post``: the number of lines from it (itself included) that only
    move to higher ranks, counted up to ``cap + 1``."""
    lines = [0] * len(successors)
    for node in post:          # higher ranks first
        count = 1
        mine = rank[node]
        for child in successors[node]:
            if rank[child] > mine:
                count += lines[child]
        lines[node] = min(count, cap + 1)
    return lines


def _simple_lines(successors: Sequence[Sequence[int]], limit: int) -> int:
    """The number of simple lines (no position twice) from every node, counted up to
    ``limit + 1``: the positions :func:`solve_by_search` visits, without valuing them."""
    on_path = [False] * len(successors)
    total = 0
    for root in range(len(successors)):
        total += 1
        if total > limit:
            return total
        on_path[root] = True
        path = [root]
        moves = [iter(successors[root])]
        while moves:
            for child in moves[-1]:
                if not on_path[child]:
                    total += 1
                    if total > limit:
                        return total
                    on_path[child] = True
                    path.append(child)
                    moves.append(iter(successors[child]))
                    break
            else:
                moves.pop()
                on_path[path.pop()] = False
    return total


def search_exceeds(successors: Sequence[Sequence[int]], limit: int) -> bool:
    """Whether searching every line from every node (:func:`solve_by_search`) would
    visit more than ``limit`` positions, found without valuing them.

    The search visits one position per simple line (a line without a repeated
    position) from its root. Lines that only move forward in the order of a
    depth-first walk are simple: counted in one pass over the moves, they prove
    most large components over the limit at once. Otherwise the simple lines are
    counted one by one, up to the limit (several times faster than the search).
    """
    n = len(successors)
    post, rank = _reverse_postorder(successors, range(n))
    if sum(_lines_without_cycles(successors, post, rank, limit)) > limit:
        return True
    return _simple_lines(successors, limit) > limit


def solve_by_search(black: Sequence[bool], in_check: Sequence[bool],
                    exits: Sequence[Sequence[tuple[int, int]]],
                    successors: Sequence[Sequence[int]], draw: int,
                    budget: int | None = None) -> tuple[list[int], list[int]]:
    """Solve a component by searching every line from every position.

    ``exits[i]``: (value from the mover's view, depth) of node ``i``'s moves out
    of the component; ``successors[i]``: nodes reached inside it. Returns values
    from each node's mover's view and depths; raises BudgetExceeded when the
    search would visit more than ``budget`` positions (all roots together), found
    before searching (:func:`search_exceeds`).

    The search is iterative (no recursion limit) and finds the value of a
    repetition from counts along the line: the side that gave check with every
    move since the repeated position is the one whose opponent was in check at
    each of its turns there, which two prefix counts tell in O(1).
    """
    n = len(black)
    limit = _EXHAUSTIVE_BUDGET if budget is None else budget
    if search_exceeds(successors, limit):
        raise BudgetExceeded
    # Lines as sort keys of the mover (see _line_key): larger is better.
    mine = [draw if black[i] else -draw for i in range(n)]
    best_exit = [max((_line_key(v, d, mine[i]) for v, d in exits[i]), default=_NO_LINE)
                 for i in range(n)]
    # A white-to-move position not in check breaks a stretch of black checks, and
    # the other way round.
    breaks_black = [not black[i] and not in_check[i] for i in range(n)]
    breaks_white = [black[i] and not in_check[i] for i in range(n)]
    on_path = [-1] * n
    calls = 0
    values, depths = [0] * n, [0] * n
    path: list[int] = []
    black_breaks = [0]     # prefix counts along the path
    white_breaks = [0]
    frames: list[list[int]] = []   # [node, next successor, best key]

    def enter(node: int) -> None:
        nonlocal calls
        calls += 1
        if calls > limit:
            raise BudgetExceeded
        on_path[node] = len(path)
        path.append(node)
        black_breaks.append(black_breaks[-1] + breaks_black[node])
        white_breaks.append(white_breaks[-1] + breaks_white[node])
        frames.append([node, 0, best_exit[node]])

    for root in range(n):
        try:
            enter(root)
            result = (0, 0)
            while frames:
                frame = frames[-1]
                node, at, best = frame
                children = successors[node]
                descended = False
                while at < len(children):
                    child = children[at]
                    at += 1
                    start = on_path[child]
                    if start >= 0:
                        black_checked_all = black_breaks[-1] == black_breaks[start]
                        white_checked_all = white_breaks[-1] == white_breaks[start]
                        outcome = draw
                        if black_checked_all and not white_checked_all:
                            outcome = -MATE_VALUE
                        elif white_checked_all and not black_checked_all:
                            outcome = MATE_VALUE
                        key = _line_key(outcome if black[node] else -outcome, DEPTH_INF,
                                        mine[node])
                        if key > best:
                            best = key
                    else:
                        frame[1], frame[2] = at, best
                        enter(child)
                        descended = True
                        break
                if descended:
                    continue
                # Every option of ``node`` seen: return its best line to the parent.
                frames.pop()
                path.pop()
                black_breaks.pop()
                white_breaks.pop()
                on_path[node] = -1
                result = _line_of(best, mine[node])
                if frames:
                    parent = frames[-1]
                    key = _line_key(-result[0], deeper(result[1]), mine[parent[0]])
                    if key > parent[2]:
                        parent[2] = key
            values[root], depths[root] = result
        finally:
            for node in path:
                on_path[node] = -1
    return values, depths


# -- the retrograde propagation --------------------------------------------------------


@dataclass
class Propagation:
    """Minimax values and depths of every node and option (from the mover's view)."""

    node_value: np.ndarray
    node_depth: np.ndarray
    option_value: np.ndarray
    option_depth: np.ndarray
    counts: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def _option_lines(graph: MinimaxGraph, value: np.ndarray, depth: np.ndarray,
                  options: np.ndarray, leaf_value: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(value, depth) of ``options`` from the mover's view, given node values; leaf
    moves are worth ``leaf_value`` (default: their stored value)."""
    target = graph.target[options]
    edge = target >= 0
    safe = np.where(edge, target, 0)
    leaves = (graph.value if leaf_value is None else leaf_value)[options]
    option_value = np.where(edge, -value[safe], leaves).astype(np.int32)
    option_depth = np.where(edge, _deeper(depth[safe]), 0).astype(np.int32)
    return option_value, option_depth


def _solve_pass(graph: MinimaxGraph, structure: Structure, draw: int,
                counts: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Values (mover's view) and depths of all nodes for draw value ``draw`` (black's view)."""
    count = graph.nodes
    value = np.zeros(count, dtype=np.int32)
    depth = np.zeros(count, dtype=np.int32)
    draw_of = np.where(graph.turn == BLACK, draw, -draw).astype(np.int64)
    indptr = graph.indptr
    place = np.empty(count, dtype=np.int64)    # scratch of _solve_by_levels_together
    for singles, cyclic in structure.levels:
        if singles.size:
            starts = indptr[singles]
            lengths = indptr[singles + 1] - starts
            options = ranges(starts, indptr[singles + 1])
            option_value, option_depth = _option_lines(graph, value, depth, options)
            keys = _encode(option_value, option_depth, np.repeat(draw_of[singles], lengths))
            best = np.maximum.reduceat(keys, np.cumsum(lengths) - lengths)
            value[singles], depth[singles] = _decode(best, draw_of[singles])
        if cyclic.size:
            checking = structure.checking[cyclic]
            for component in cyclic[checking].tolist():
                _solve_component(graph, structure, component, draw, value, depth, counts)
            together = cyclic[~checking]
            # In groups of a bounded number of positions: the lists of a whole level
            # would cost as much memory as the rest of the solve.
            group = np.cumsum(structure.sizes[together]) // _TOGETHER_POSITIONS
            for first, stop in zip(*_runs(group)):
                _solve_by_levels_together(graph, structure, together[first:stop], draw, value,
                                          depth, counts, place)
    return value, depth


def _runs(keys: np.ndarray) -> tuple[list[int], list[int]]:
    """(starts, stops) of the runs of equal values in ``keys``."""
    if not len(keys):
        return [], []
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return starts.tolist(), np.append(starts[1:], len(keys)).tolist()


def _solve_by_levels_together(graph: MinimaxGraph, structure: Structure,
                              components: np.ndarray, draw: int, value: np.ndarray,
                              depth: np.ndarray, counts: dict[str, int], place: np.ndarray
                              ) -> None:
    """:func:`solve_by_levels` on each of ``components`` (of one level: none reaches
    another), with their exits and moves gathered for all of them in one numpy step.
    ``place``: int64 [N] scratch."""
    if not components.size:
        return
    sizes = structure.sizes[components]
    node_ptr = np.zeros(len(components) + 1, dtype=np.int64)
    np.cumsum(sizes, out=node_ptr[1:])
    nodes = structure.members[ranges(structure.member_ptr[components],
                                     structure.member_ptr[components + 1])]
    component_of = np.repeat(np.arange(len(components)), sizes)
    local = np.arange(len(nodes)) - node_ptr[component_of]     # index inside its component
    starts, stops = graph.indptr[nodes], graph.indptr[nodes + 1]
    options = ranges(starts, stops)
    owner = np.repeat(np.arange(len(nodes)), stops - starts)   # index into nodes
    target = graph.target[options]
    edge = target >= 0
    safe = np.where(edge, target, 0)
    inside = edge & (structure.labels[safe] == structure.labels[nodes][owner])
    option_value, option_depth = _option_lines(graph, value, depth, options)
    black = graph.turn[nodes] == BLACK
    # Local indices of the targets inside: nodes of one component are consecutive in
    # ``nodes``, so a target's local index is its place there minus its component's start.
    place[nodes] = local
    exits, links = np.flatnonzero(~inside), np.flatnonzero(inside)
    option_component = component_of[owner]
    exit_ptr = np.searchsorted(option_component[exits], np.arange(len(components) + 1))
    link_ptr = np.searchsorted(option_component[links], np.arange(len(components) + 1))
    exit_owner = local[owner[exits]].tolist()
    exit_value = np.where(black[owner[exits]], option_value[exits],
                          -option_value[exits]).tolist()     # black's view
    exit_depth = option_depth[exits].tolist()
    link_from = local[owner[links]].tolist()
    link_to = place[target[links]].tolist()
    black_list = black.tolist()
    solved_value = np.zeros(len(nodes), dtype=np.int32)
    solved_depth = np.zeros(len(nodes), dtype=np.int32)
    bounds = node_ptr.tolist()
    exit_bounds, link_bounds = exit_ptr.tolist(), link_ptr.tolist()
    for c in range(len(components)):
        a, b = exit_bounds[c], exit_bounds[c + 1]
        e, f = link_bounds[c], link_bounds[c + 1]
        values, depths, levels = solve_by_levels(
            black_list[bounds[c]:bounds[c + 1]],
            list(zip(exit_owner[a:b], exit_value[a:b], exit_depth[a:b])),
            list(zip(link_from[e:f], link_to[e:f])), draw)
        counts["value_levels"] += levels
        solved_value[bounds[c]:bounds[c + 1]] = values
        solved_depth[bounds[c]:bounds[c + 1]] = depths
    value[nodes] = np.where(black, solved_value, -solved_value)
    depth[nodes] = solved_depth


def _solve_component(graph: MinimaxGraph, structure: Structure, component: int, draw: int,
                     value: np.ndarray, depth: np.ndarray, counts: dict[str, int]) -> None:
    nodes = structure.nodes_of(component)
    local = {int(node): i for i, node in enumerate(nodes.tolist())}
    starts = graph.indptr[nodes]
    lengths = graph.indptr[nodes + 1] - starts
    options = ranges(starts, graph.indptr[nodes + 1])
    owner = np.repeat(np.arange(len(nodes)), lengths)
    target = graph.target[options]
    inside = (target >= 0) & (structure.labels[np.where(target >= 0, target, 0)] == component)
    option_value, option_depth = _option_lines(graph, value, depth, options)
    black = (graph.turn[nodes] == BLACK).tolist()
    exit_owner = owner[~inside].tolist()
    exit_value = option_value[~inside].tolist()
    exit_depth = option_depth[~inside].tolist()
    link_from = owner[inside].tolist()
    link_to = [local[t] for t in target[inside].tolist()]

    if structure.checking[component]:
        exits: list[list[tuple[int, int]]] = [[] for _ in nodes]
        for node, v, d in zip(exit_owner, exit_value, exit_depth):
            exits[node].append((v, d))
        successors: list[list[int]] = [[] for _ in nodes]
        for origin, destination in zip(link_from, link_to):
            successors[origin].append(destination)
        try:
            values, depths = solve_by_search(black, graph.in_check[nodes].tolist(), exits,
                                             successors, draw)
        except BudgetExceeded:
            counts["checking_components_approximated"] += 1
        else:
            counts["checking_components_searched"] += 1
            value[nodes], depth[nodes] = values, depths
            return
    exits_black = [(node, v if black[node] else -v, d)
                   for node, v, d in zip(exit_owner, exit_value, exit_depth)]
    values, depths, levels = solve_by_levels(black, exits_black, list(zip(link_from, link_to)),
                                             draw)
    counts["value_levels"] += levels
    value[nodes] = [v if black[i] else -v for i, v in enumerate(values)]
    depth[nodes] = depths


def combine(graph: MinimaxGraph, passes: list[tuple[int | None, np.ndarray, np.ndarray]],
            leaf_value: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Node and option values from one pass per owner colour (see :func:`owners`)."""
    every = np.arange(len(graph.target), dtype=np.int64)
    if len(passes) == 1:
        _, value, depth = passes[0]
        option_value, option_depth = _option_lines(graph, value, depth, every, leaf_value)
        return value, depth, option_value, option_depth
    node_value = np.zeros(graph.nodes, dtype=np.int32)
    node_depth = np.zeros(graph.nodes, dtype=np.int32)
    option_value = np.zeros(len(every), dtype=np.int32)
    option_depth = np.zeros(len(every), dtype=np.int32)
    source_turn = graph.turn[graph.source]
    for colour, value, depth in passes:
        mine = graph.turn == colour
        node_value[mine], node_depth[mine] = value[mine], depth[mine]
        options = every[source_turn == colour]
        option_value[options], option_depth[options] = _option_lines(graph, value, depth,
                                                                     options, leaf_value)
    return node_value, node_depth, option_value, option_depth


def retrograde(graph: MinimaxGraph, draws: DrawValues = DrawValues(),
               structure: Structure | None = None) -> Propagation:
    """Exact minimax values of every node and option (see the module docstring)."""
    started = time.perf_counter()
    structure = structure or analyse(graph)
    counts = {"value_levels": 0, "checking_components_searched": 0,
              "checking_components_approximated": 0}
    passes: list[tuple[int | None, np.ndarray, np.ndarray]] = []
    for colour, draw in owners(draws):
        # Counters describe the first game; a second one repeats the same work.
        value, depth = _solve_pass(graph, structure, draw, counts if not passes else
                                   dict.fromkeys(counts, 0))
        passes.append((colour, value, depth))
    node_value, node_depth, option_value, option_depth = combine(graph, passes)
    counts.update(structure.counts())
    counts["games"] = len(passes)
    return Propagation(node_value, node_depth, option_value, option_depth, counts,
                       time.perf_counter() - started)
