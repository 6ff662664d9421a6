"""The book part of ``bookgen report``: size run after run, ply and value
distributions, mistakes per refine run, and the results by opening of the
openings that are book positions (read-only; the book is never changed)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bookgen.analysis import plots
from bookgen.analysis.document import Heading, Image, Paragraph, Section, Table, plural
from bookgen.analysis.openings import results_by_opening
from bookgen.bookfiles.stats import read_distributions
from bookgen.errors import BookgenError
from bookgen.store import MoveRows, browse, open_book_snapshot, queries
from bookgen.store.results import GameResult

__all__ = ["BookSummary", "book_positions", "book_section", "openings_section", "read_book"]


@dataclass
class BookSummary:
    """What the report shows of a book.

    Each run (a dict of its ``runs`` row) also holds ``positions_created``
    (positions whose ``created_run`` it is) and ``moves_written`` (moves whose
    ``run_id`` it is: the last run that wrote them; transposition rows left
    out).
    """

    path: str
    positions: int
    positions_with_moves: int
    moves: int
    runs: list[dict[str, Any]]
    plies: list[int]
    values: dict[str, list[int]]
    mistakes: list[dict[str, Any]]
    unattributed: tuple[int, int] = (0, 0)  # positions and moves of no known run


def read_book(path: str | Path) -> BookSummary:
    conn = open_book_snapshot(Path(path))
    try:
        runs = [dict(zip(("id", "command", "status", "started_at", "positions_added",
                          "moves_added", "moves_updated", "counts"), row))
                for row in queries.runs_table(conn)]
        created = queries.positions_by_created_run(conn)
        written = queries.moves_by_run(conn, MoveRows.OWN)
        for run in runs:
            run["positions_created"] = int(created.pop(run["id"], 0))
            run["moves_written"] = int(written.pop(run["id"], 0))
        # Rows of no run (or of a run row that is gone) count from the start.
        unattributed = (sum(created.values()), sum(written.values()))
        found = read_distributions(conn)
        mistakes = [dict(zip(("run_id", "iteration", "started_at", "kind", "count"), row))
                    for row in queries.mistake_counts(conn)]
    except sqlite3.DatabaseError as error:
        raise BookgenError(f"{path}: cannot read the book ({error})") from None
    finally:
        conn.close()
    black, white = found.values
    return BookSummary(str(path), found.positions, found.positions_with_moves, found.moves, runs,
                       found.plies, {"black to move": black, "white to move": white}, mistakes,
                       unattributed)


def book_positions(path: str | Path, sfens: Sequence[str]) -> frozenset[str]:
    """Those of ``sfens`` (normalised, no move number) that the book at ``path`` holds."""
    conn = open_book_snapshot(Path(path))
    try:
        return frozenset(browse.positions_of(conn, sfens))
    except sqlite3.DatabaseError as error:
        raise BookgenError(f"{path}: cannot read the book ({error})") from None
    finally:
        conn.close()


def _describe_rows(series: dict[str, list[int]]) -> tuple[list[str], list[list[str]]]:
    described = {name: pd.Series(values, dtype=float).describe() for name, values in
                 series.items()}
    keys = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]
    rows = []
    for key in keys:
        row = [key]
        for stats in described.values():
            value = stats.get(key, math.nan)
            row.append("-" if value is None or not math.isfinite(value) else
                       str(int(value)) if key == "count" else f"{value:.2f}")
        rows.append(row)
    return ["", *series], rows


def book_section(book: BookSummary) -> Section:
    section = Section("book", "Book")
    section.blocks.append(Paragraph(
        f"{book.path}: {book.positions} positions ({book.positions_with_moves} with moves), "
        f"{book.moves} moves, {plural(len(book.runs), 'run')}."))
    if book.runs:
        # What the runs table reports next to what the book holds per run.
        reported_positions, reported_moves, held_positions, held_moves = [], [], [], []
        total_reported = [0, 0]
        total_held = list(book.unattributed)
        rows = []
        for run in book.runs:
            total_reported[0] += int(run["positions_added"] or 0)
            total_reported[1] += int(run["moves_added"] or 0)
            total_held[0] += run["positions_created"]
            total_held[1] += run["moves_written"]
            reported_positions.append(total_reported[0])
            reported_moves.append(total_reported[1])
            held_positions.append(total_held[0])
            held_moves.append(total_held[1])
            rows.append([str(run["id"]), str(run["command"]), str(run["status"]),
                         str(run["started_at"]), str(run["positions_added"]),
                         str(run["moves_added"]), str(run["moves_updated"]),
                         str(total_reported[0]), str(total_reported[1]),
                         str(total_held[0]), str(total_held[1])])
        section.blocks.append(Heading("Size run after run"))
        section.blocks.append(Paragraph(
            "The columns +positions, +moves and moves updated are the rows each run inserted "
            "and changed (the runs table), and the next two columns add them up. The last two "
            "count the rows in the book: positions by the run that created them, moves by the "
            "run that last wrote them, added up run after run (they end at the book's size). "
            "The position totals agree; the move totals differ where a later run rewrote a "
            "move (counted in the book under the later run) and by the transposition rows of "
            "refine minimax (rows it added, but not book moves)."))
        section.blocks.append(Table(
            ["run", "command", "status", "started", "+positions", "+moves", "moves updated",
             "positions (reported)", "moves (reported)", "positions (in book)",
             "moves (in book)"], rows, id="book-runs",
            numeric=[True, False, False, False] + [True] * 7))
        section.blocks.append(Image("book_growth", "Book size run after run",
                                    plots.png(plots.book_growth_plot(
                                        [int(r["id"]) for r in book.runs],
                                        {"positions (in book)": held_positions,
                                         "moves (in book)": held_moves,
                                         "positions (reported)": reported_positions,
                                         "moves (reported)": reported_moves}))))
    else:
        section.blocks.append(Paragraph("The book has no runs."))
    if book.plies or any(book.values.values()):
        section.blocks.append(Heading("Ply and best value of the book positions"))
        headers, rows = _describe_rows({"ply": book.plies, **{
            f"value, {side}": values for side, values in book.values.items()}})
        section.blocks.append(Table(headers, rows, numeric=[False] + [True] * (len(headers) - 1),
                                    caption="Positions with moves; the value is that of the "
                                            "best move (cp for the side to move)"))
    if book.plies:
        section.blocks.append(Image("book_ply", "Ply of the book positions",
                                    plots.png(plots.ply_histogram(book.plies))))
    if any(book.values.values()):
        section.blocks.append(Image("book_values", "Best move value of the book positions",
                                    plots.png(plots.value_histogram(book.values))))
    section.blocks.append(Heading("Mistakes found by refine"))
    if not book.mistakes:
        section.blocks.append(Paragraph("No mistakes recorded (no 'refine mistakes' run found "
                                        "any)."))
        return section
    kinds = sorted({m["kind"] for m in book.mistakes})
    grouped: dict[tuple[int, int], dict[str, Any]] = {}
    for m in book.mistakes:
        entry = grouped.setdefault((m["run_id"], m["iteration"]),
                                   {"started_at": m["started_at"], **{k: 0 for k in kinds}})
        entry[m["kind"]] += int(m["count"])
    rows = []
    labels = []
    for (run_id, iteration), entry in grouped.items():
        labels.append(str(run_id) if iteration == 0 else f"{run_id}/{iteration}")
        total = sum(entry[k] for k in kinds)
        rows.append([str(run_id), str(iteration), str(entry["started_at"] or "-"),
                     *(str(entry[k]) for k in kinds), str(total)])
    section.blocks.append(Table(["run", "iteration", "started", *kinds, "total"], rows,
                                id="book-mistakes",
                                numeric=[True, True, False] + [True] * (len(kinds) + 1)))
    series = {k: [grouped[key][k] for key in grouped] for k in kinds}
    section.blocks.append(Image("book_mistakes", "Mistakes per refine run (run/iteration)",
                                plots.png(plots.mistakes_plot(labels, series))))
    return section


def openings_section(games: Sequence[GameResult], book: BookSummary) -> Section:
    """Results by opening (:func:`bookgen.analysis.openings.results_by_opening`) for the
    openings that are positions of the book (:func:`book_positions`): the table
    ``bookgen serve --results`` shows."""
    section = Section("openings", "Results by opening")
    every = results_by_opening(games)
    in_book = book_positions(book.path, [o.sfen for o in every])
    openings = [o for o in every if o.sfen in in_book]
    if not openings:
        section.blocks.append(Paragraph("No opening of these games is a position of the "
                                        "book."))
        return section
    players = list(dict.fromkeys(s.player for o in openings for s in o.scores))
    rows = []
    for opening in openings:
        scores = {s.player: s for s in opening.scores}
        rows.append([opening.opening, str(opening.games)] + [
            "-" if p not in scores else
            f"{scores[p].points:g}/{scores[p].games} "
            f"({100 * scores[p].points / scores[p].games:.0f} %)" for p in players])
    others = len(every) - len(openings)
    section.blocks.append(Paragraph(
        f"{plural(len(openings), 'opening')} of the games are positions of the book"
        + (f" ({plural(others, 'other')} are not)" if others else "")
        + "; each player's points and games from there."))
    section.blocks.append(Table(["opening", "games", *players], rows,
                                numeric=[False, True] + [True] * len(players)))
    return section
