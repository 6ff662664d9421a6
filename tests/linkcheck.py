"""Stored child links, checked with cshogi and the plain sqlite3 module.

:func:`missing_links` lists the legal moves between positions with moves rows
that the book does not store as a linked row (empty: the links are complete),
:func:`marked` says whether the book claims they are, and :func:`forget_links`
makes a book as an import before stored links left it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import cshogi


def marked(book: str | Path) -> bool:
    conn = sqlite3.connect(book)
    try:
        return conn.execute("SELECT 1 FROM meta WHERE key = 'links' AND value = 'complete'"
                            ).fetchone() is not None
    finally:
        conn.close()


def missing_links(book: str | Path) -> list[tuple[str, str]]:
    """(sfen, move) of each legal move from a position with moves into one that the
    book does not store with ``child_id`` pointing at that child."""
    conn = sqlite3.connect(book)
    try:
        nodes = dict(conn.execute("SELECT p.sfen, p.id FROM positions p WHERE EXISTS "
                                  "(SELECT 1 FROM moves m WHERE m.position_id = p.id)"))
        stored = {(pid, move): child for pid, move, child in conn.execute(
            "SELECT position_id, move, child_id FROM moves")}
    finally:
        conn.close()
    missing = []
    board = cshogi.Board()
    for sfen, pid in nodes.items():
        board.set_sfen(sfen + " 1")
        for move in board.legal_moves:
            usi = cshogi.move_to_usi(move)
            board.push(move)
            child = nodes.get(board.sfen().rsplit(" ", 1)[0])
            board.pop()
            if child is not None and stored.get((pid, usi)) != child:
                missing.append((sfen, usi))
    return missing


def forget_links(book: str | Path) -> None:
    """No link rows, no links on book moves, no marker (a book imported before
    stored links)."""
    conn = sqlite3.connect(book)
    with conn:
        conn.execute("DELETE FROM moves WHERE run_id IN (SELECT id FROM runs "
                     "WHERE command = 'link')")
        conn.execute("DELETE FROM runs WHERE command = 'link'")
        conn.execute("UPDATE moves SET child_id = NULL")
        conn.execute("DELETE FROM meta WHERE key = 'links'")
    conn.close()


def wrong_links(book: str | Path) -> list[tuple[int, str]]:
    """(position id, move) of each row whose ``child_id`` is not the position after
    the move."""
    conn = sqlite3.connect(book)
    try:
        sfens = dict(conn.execute("SELECT id, sfen FROM positions"))
        rows = conn.execute("SELECT position_id, move, child_id FROM moves "
                            "WHERE child_id IS NOT NULL").fetchall()
    finally:
        conn.close()
    board = cshogi.Board()
    wrong = []
    for pid, move, child in rows:
        board.set_sfen(sfens[pid] + " 1")
        board.push_usi(move)
        if board.sfen().rsplit(" ", 1)[0] != sfens.get(child):
            wrong.append((pid, move))
    return wrong
