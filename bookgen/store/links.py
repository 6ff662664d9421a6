"""Child links of the moves a book does not link: found by playing the move.

Imported books store no ``child_id``; :func:`resolve_children` plays each
unlinked move, looks the child up by its zobrist key and confirms it by its
exact position (HuffmanCodedPos), for :class:`bookgen.store.index.BookIndex`.
Nothing is written to the book. Large books play their moves on forked
worker processes (:func:`bookgen.workers.forked.fork_map`).
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Iterator
from itertools import compress, islice
from typing import Any, Protocol

import cshogi
import numpy as np

from bookgen.arrays import find_rows, ranges
from bookgen.store.columns import sql_int_columns
from bookgen.workers.forked import fork_map

__all__ = ["Edges", "resolve_children"]


class Edges(Protocol):
    """What :func:`resolve_children` reads and fills of a
    :class:`bookgen.store.index.BookIndex`."""

    ids: np.ndarray
    move_names: list[str]
    edge_move: np.ndarray
    edge_child: np.ndarray
    edge_linked: np.ndarray


_RESOLVE_BLOCK = 1 << 14     # positions per block (task) of child resolution
_PARALLEL_MIN_POSITIONS = 50_000  # fewer: not worth starting worker processes


_resolving: dict[str, Any] = {}  # what _resolve_block needs; forked workers inherit it


def _resolve_block(task: tuple[int, list[str]]) -> tuple[bytes, bytes, bytes, bytes]:
    """Play the unlinked moves of the positions ``block:block + len(sfens)`` (of those
    with unlinked moves): their HuffmanCodedPos, and the moves whose child's key may
    be in the book (edge, zobrist key, HuffmanCodedPos of the child)."""
    block, sfens = task
    first, stops = _resolving["first"], _resolving["stops"]
    names, present = _resolving["names"], _resolving["present"]
    lows = first[block:block + len(sfens)].tolist()
    highs = stops[block:block + len(sfens)].tolist()
    base = lows[0]
    moves = [names[m] for m in _resolving["moves"][base:highs[-1]].tolist()]
    own = np.zeros(len(sfens), dtype=cshogi.HuffmanCodedPos)
    hit_edge, hit_key, hit_hcp = array("q"), array("Q"), bytearray()
    scratch = np.zeros(1, dtype=cshogi.HuffmanCodedPos)
    scratch_bytes = scratch.data.cast("B")
    board = cshogi.Board()
    set_sfen, from_usi, is_legal = board.set_sfen, board.move_from_usi, board.is_legal
    push, pop, key, to_hcp = board.push, board.pop, board.zobrist_hash, board.to_hcp
    for i, (sfen, lo, hi) in enumerate(zip(sfens, lows, highs)):
        set_sfen(sfen + " 1")
        to_hcp(own[i:i + 1])
        for e in range(lo - base, hi - base):
            move = from_usi(moves[e])
            if move and is_legal(move):
                push(move)
                z = key()
                if present[z >> 40]:
                    to_hcp(scratch)
                    hit_hcp += scratch_bytes
                    hit_edge.append(base + e)
                    hit_key.append(z)
                pop()
    return own.tobytes(), hit_edge.tobytes(), hit_key.tobytes(), bytes(hit_hcp)


def resolve_children(conn: sqlite3.Connection, index: Edges, edge_rows: np.ndarray,
                      workers: int = 1) -> None:
    """Children of the moves without a stored child link: play the move, look the
    position up by its zobrist key and confirm it by its HuffmanCodedPos (the exact
    position: board, hands and side to move). Large books on ``workers`` processes."""
    ids = index.ids
    n = len(ids)
    unlinked = np.flatnonzero(~index.edge_linked)
    rows, first = np.unique(edge_rows[unlinked], return_index=True)
    stops = np.append(first[1:], len(unlinked))
    pids, zobrist = sql_int_columns(conn, "SELECT id, zobrist FROM positions ORDER BY id",
                                    ["id", "zobrist"])
    if len(pids) != n or np.any(pids != ids):
        raise RuntimeError("the book changed while it was read")
    zobrist = zobrist.view(np.uint64)
    by_key = np.argsort(zobrist, kind="stable")
    keys = zobrist[by_key]
    del zobrist, pids
    # A byte per 2**40 keys: most children outside the book skip the exact check.
    present = bytearray(1 << 24)
    np.frombuffer(present, dtype=np.uint8)[keys >> np.uint64(40)] = 1
    need = np.zeros(n, dtype=bool)
    need[rows] = True
    hcp = np.zeros(n, dtype=cshogi.HuffmanCodedPos)   # the rows' exact positions

    def tasks() -> Iterator[tuple[int, list[str]]]:
        sfens = compress(conn.execute("SELECT sfen FROM positions ORDER BY id"),
                         need.tolist())
        for block in range(0, len(rows), _RESOLVE_BLOCK):
            yield block, [sfen for (sfen,) in islice(sfens, _RESOLVE_BLOCK)]

    _resolving.update(first=first, stops=stops, names=index.move_names, present=present,
                      moves=index.edge_move[unlinked])
    parts: list[tuple[bytes, bytes, bytes]] = []
    try:
        for block, (own, edges, hit_keys, hit_hcp) in zip(
                range(0, len(rows), _RESOLVE_BLOCK),
                fork_map(_resolve_block, tasks(),
                         workers if len(rows) >= _PARALLEL_MIN_POSITIONS else 1)):
            hcp[rows[block:block + _RESOLVE_BLOCK]] = np.frombuffer(
                own, dtype=cshogi.HuffmanCodedPos)
            parts.append((edges, hit_keys, hit_hcp))
    finally:
        _resolving.clear()
    del present
    # The moves into possible book positions: edge, key, HuffmanCodedPos (4 words).
    count = sum(len(p[0]) for p in parts) // 8
    hits = np.empty(count, dtype=np.int64)
    hit_key = np.empty(count, dtype=np.uint64)
    hit_words = np.empty((count, 4), dtype=np.uint64)
    at = 0
    while parts:
        edges, hit_keys, hit_hcp = parts.pop(0)
        size = len(edges) // 8
        hits[at:at + size] = np.frombuffer(edges, dtype=np.int64)
        hit_key[at:at + size] = np.frombuffer(hit_keys, dtype=np.uint64)
        hit_words[at:at + size] = np.frombuffer(hit_hcp, dtype=np.uint64).reshape(-1, 4)
        at += size
    by_hit = np.argsort(hit_key)  # sorted needles: a faster search
    lo = np.empty(len(hits), dtype=np.int64)
    hi = np.empty(len(hits), dtype=np.int64)
    lo[by_hit] = np.searchsorted(keys, hit_key[by_hit], side="left")
    hi[by_hit] = np.searchsorted(keys, hit_key[by_hit], side="right")
    del hit_key, by_hit
    # Candidates: every book position with the child's key.
    candidate_hit = np.repeat(np.arange(len(hits)), hi - lo)
    candidate_row = by_key[ranges(lo, hi)]
    del lo, hi, by_key, keys
    missing = np.unique(candidate_row[~need[candidate_row]])
    board = cshogi.Board()
    for chunk in range(0, len(missing), 500):
        part = ids[missing[chunk:chunk + 500]].tolist()
        for pid, sfen in conn.execute(
                f"SELECT id, sfen FROM positions WHERE id IN ({','.join('?' * len(part))})",
                part):
            row = int(find_rows(ids, np.array([pid]))[0][0])
            board.set_sfen(sfen + " 1")
            board.to_hcp(hcp[row:row + 1])
    words = hcp.view(np.uint8).reshape(-1, 32).view(np.uint64)
    same = np.zeros(len(candidate_row), dtype=bool)
    for start in range(0, len(same), _RESOLVE_BLOCK):
        here = slice(start, start + _RESOLVE_BLOCK)
        same[here] = (words[candidate_row[here]] == hit_words[candidate_hit[here]]).all(axis=1)
    # Distinct positions have distinct codes: at most one candidate matches.
    index.edge_child[unlinked[hits[candidate_hit[same]]]] = candidate_row[same]
