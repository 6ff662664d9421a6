"""A small book with every kind of row the explorer shows, and a server for the browser.

:func:`make_explorer_book` grows a book with the built-in evaluator, refines it
(minimax values and transposition rows, engine analyses, mistakes) and plays a
short match from openings cut from it (a results file). :class:`LiveServer` runs
the explorer with uvicorn in a thread of the test process, on 127.0.0.1 and a
port the system picks.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from bookgen.explore.app import create_app, listen, url_of
from bookgen.explore.settings import ServeSettings
from bookgen.explore.view import Explorer, OpeningResult
from conftest import run_cli


@dataclass(frozen=True)
class ExplorerBook:
    book: Path
    results: Path
    suite: Path


def make_explorer_book(directory: Path) -> ExplorerBook:
    book, suite, results = directory / "book.sqlite", directory / "suite.txt", \
        directory / "results.sqlite"
    run_cli("grow", "-b", book, "--playouts", "30", "--positions", "40", "--seed", "1")
    run_cli("refine", "minimax", "-b", book)
    run_cli("refine", "search", "-b", book, "--engine", "builtin", "--depth", "1",
            "--select", "principal")
    run_cli("refine", "mistakes", "-b", book, "--threshold", "0", "--opp-threshold", "0",
            "--diff", "0")
    run_cli("suite", "-b", book, "-o", suite, "--max-value", "1000", "--min-ply", "1",
            "--max-ply", "3", "--limit", "3", "--seed", "1")
    run_cli("match", "--builtin", "a", "--builtin", "b", "--option", "a:depth=1", "--option",
            "b:depth=2", "--openings", suite, "--games", "6", "--nodes", "1", "--max-ply", "24",
            "-o", results, "--quiet")
    return ExplorerBook(book, results, suite)


def book_rows(book: Path, sql: str, *params: object) -> list[tuple]:
    """Rows of ``sql`` read straight from the book file (the tests' own check)."""
    conn = sqlite3.connect(f"file:{book}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


class LiveServer:
    """The explorer served by uvicorn in a thread, on 127.0.0.1:<free port>."""

    def __init__(self, book: Path, openings: list[OpeningResult] | None = None,
                 sources: tuple[str, ...] = ()) -> None:
        self.explorer = Explorer(book)
        app = create_app(self.explorer, openings or [], sources)
        self.socket = listen(ServeSettings(host="127.0.0.1", port=0))
        self.url = url_of(self.socket)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run,
                                       kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        self.socket.close()
        self.explorer.close()

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
