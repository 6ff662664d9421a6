"""``bookgen report``: one self-contained HTML page (and a Markdown twin) about a match.

:func:`build_report` reads results files (and PGN files), computes what the
other analysis commands print, and lays it out as a :class:`Report`: a list
of sections made of plain-text blocks (paragraphs, tables, lists, figures).
The renderers :func:`write_html` and :func:`write_markdown` escape every text
they write, since player names come from engines and users and may hold
markup. The content:

- provenance: the files read, the number of games, the players, the date;
- the Ordo rating table (:func:`analysis.ratings.fit_ratings`, the columns of
  ``bookgen rate``) and plots of the ratings and of W/D/L per player;
- the pairwise matrix: each pair's Elo difference with its margin and LOS
  from :mod:`analysis.pairstats` on that pair's games, counted per
  colour-swapped pair (pentanomial) when complete pairs exist;
- the SPRT state of each requested ``(A, B, elo0, elo1)``, and with exactly
  two players an Elo/LOS summary even without one;
- outcomes: the per-player ending table and :func:`analysis.outcomes.test_rate`
  for every ending present, with its warnings and the note on paired games;
- score by colour and game lengths;
- with a book: its size run after run (the ``runs`` table), the ply and
  best-value distributions of its positions and the mistakes of each
  ``refine mistakes`` run.

The HTML embeds its CSS and its figures (base64 PNG) and links nothing
outside the page. The Markdown file writes its figures as PNG files in
``<stem>_files/`` next to it. Both are written atomically (temporary file,
then rename).
"""

from __future__ import annotations

import base64
import html
import math
import os
import sqlite3
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from statistics import median
from typing import Any

import pandas as pd

from analysis import plots
from analysis.outcomes import PAIRED_NOTE, RateTest, outcome_table, test_rate
from analysis.pairstats import (EloEstimate, PairCounts, SprtResult, count_games,
                                elo_pentanomial, elo_trinomial, sprt)
from analysis.ratings import RatingTable, _round_half_up, fit_ratings
from analysis.results import Game, load_games
from bookgen import __version__
from bookgen.errors import BookgenError

__all__ = ["Bullets", "BookSummary", "Heading", "Image", "PairResult", "Paragraph", "Report",
           "Section", "Table", "build_report", "check_output", "markdown_escape", "parse_sprt",
           "rating_rows", "render_html", "render_markdown", "report_summary", "write_html",
           "write_markdown"]

RATING_HEADERS = ["#", "PLAYER", "RATING", "ERROR", "POINTS", "PLAYED", "(%)", "CFS(%)",
                  "W", "D", "L", "D(%)"]
DEFAULT_TITLE = "bookgen match report"


# --------------------------------------------------------------------------
# the document model: plain text everywhere, escaped by the renderers


@dataclass
class Paragraph:
    text: str
    style: str = ""  # "", "note" or "warning"


@dataclass
class Heading:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    id: str | None = None
    numeric: list[bool] | None = None  # right-aligned columns
    caption: str = ""


@dataclass
class Image:
    key: str  # file stem of the Markdown twin's PNG
    title: str
    png: bytes


Block = Paragraph | Heading | Bullets | Table | Image


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


# --------------------------------------------------------------------------
# computed results


@dataclass
class PairResult:
    """Elo of ``a`` against ``b`` from ``a``'s side; ``basis`` 'pentanomial'
    (complete colour-swapped pairs only, ``left_out`` games outside them) or
    'trinomial' (every game)."""

    a: str
    b: str
    counts: PairCounts
    estimate: EloEstimate
    basis: str
    left_out: int


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


@dataclass
class Report:
    """Everything :func:`build_report` found, and its layout (``sections``)."""

    title: str
    generated_at: str
    sources: list[tuple[str, int]]
    games: int
    players: list[str]
    ratings: RatingTable
    pairwise: dict[tuple[str, str], PairResult]
    sprts: list[SprtResult]
    outcomes: pd.DataFrame
    rate_tests: list[RateTest]
    book: BookSummary | None
    sections: list[Section]

    @property
    def figures(self) -> list[Image]:
        return [block for section in self.sections for block in section.blocks
                if isinstance(block, Image)]


# --------------------------------------------------------------------------
# formatting helpers


def _signed(value: float, digits: int = 1) -> str:
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return f"{value:+.{digits}f}"


def _margin(value: float, digits: int = 1) -> str:
    return "inf" if math.isinf(value) else f"{value:.{digits}f}"


def _percent(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}f} %"


def _p(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.4g}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def rating_rows(table: RatingTable) -> list[list[str]]:
    """The cells of ``table.format_text()``'s rows, formatted the same way."""
    rows = []
    last = len(table.players) - 1
    for rank, p in enumerate(table.players, 1):
        if rank - 1 == last:
            cfs = "---"
        else:
            cfs = "----" if p.cfs is None else str(_round_half_up(p.cfs))
        rows.append([str(rank), p.name, f"{p.bound}{p.rating:.1f}",
                     "----" if p.error is None else f"{p.error:.1f}", f"{p.points:.1f}",
                     str(p.played), str(_round_half_up(100 * p.score)), cfs, str(p.w),
                     str(p.d), str(p.l), str(_round_half_up(100 * p.draw_share))])
    return rows


# --------------------------------------------------------------------------
# SPRT requests


def parse_sprt(text: str, players: Sequence[str]) -> tuple[str, str, float, float]:
    """``A,B,ELO0,ELO1`` -> (A, B, elo0, elo1).

    Names may hold commas: the split between A and B is the one that leaves
    two known players.
    """
    parts = text.rsplit(",", 2)
    if len(parts) != 3 or "," not in parts[0]:
        raise BookgenError(f"--sprt {text!r}: expected A,B,ELO0,ELO1")
    try:
        elo0, elo1 = float(parts[1]), float(parts[2])
    except ValueError:
        raise BookgenError(f"--sprt {text!r}: ELO0 and ELO1 must be numbers") from None
    names = parts[0]
    known = set(players)
    splits = [(names[:i], names[i + 1:]) for i, c in enumerate(names) if c == ","]
    matches = [(a, b) for a, b in splits if a in known and b in known]
    if len(matches) == 1:
        return matches[0][0], matches[0][1], elo0, elo1
    found = ", ".join(players)
    if len(matches) > 1:
        raise BookgenError(f"--sprt {text!r}: ambiguous player names (players: {found})")
    if len(splits) == 1:
        unknown = [repr(n) for n in splits[0] if n not in known]
        raise BookgenError(f"--sprt {text!r}: unknown player {', '.join(unknown)}; "
                           f"players found: {found}")
    raise BookgenError(f"--sprt {text!r}: no two known players; players found: {found}")


# --------------------------------------------------------------------------
# building


def build_report(results: Sequence[str | Path], *, book: str | Path | None = None,
                 sprt_tests: Sequence[str | tuple[str, str, float, float]] = (),
                 white_advantage: bool = False, draw_rate: bool = False,
                 simulations: int = 1000, seed: int = 0, title: str | None = None,
                 now: datetime | None = None) -> Report:
    """Read ``results`` (results .sqlite and PGN files) and ``book`` and lay out the report.

    ``sprt_tests`` holds ``"A,B,ELO0,ELO1"`` strings or tuples (normalised Elo
    bounds, alpha = beta = 0.05); ``white_advantage``, ``draw_rate``,
    ``simulations`` and ``seed`` go to :func:`fit_ratings`.
    """
    paths = [str(p) for p in results]
    if not paths:
        raise BookgenError("no results files given")
    book_summary = _read_book(book) if book is not None else None
    games = load_games(paths)
    if not games:
        raise BookgenError(f"no finished games in {', '.join(paths)}")
    ratings = fit_ratings(games, white_advantage=white_advantage, draw_rate=draw_rate,
                          simulations=simulations, seed=seed)
    players = [p.name for p in ratings.players]
    requested = [parse_sprt(spec, players) if isinstance(spec, str) else spec
                 for spec in sprt_tests]
    sprts = [sprt(games, a, b, elo0=float(e0), elo1=float(e1)) for a, b, e0, e1 in requested]
    pairwise = _pairwise(games, players)
    outcomes = outcome_table(games).reindex(players).fillna(0).astype(int)
    endings = [c for c in outcomes.columns if c != "games" and outcomes[c].sum() > 0]
    rate_tests = [test_rate(games, ending, players=players) for ending in endings]

    per_file = Counter(g.source for g in games)
    sources = [(p, per_file.get(p, 0)) for p in dict.fromkeys(paths)]
    stamp = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    report = Report(title=title or DEFAULT_TITLE, generated_at=stamp, sources=sources,
                    games=len(games), players=players, ratings=ratings, pairwise=pairwise,
                    sprts=sprts, outcomes=outcomes, rate_tests=rate_tests, book=book_summary,
                    sections=[])
    report.sections = [
        _provenance_section(report, book, simulations, seed, white_advantage, draw_rate),
        _ratings_section(ratings),
        _pairwise_section(report),
        _sprt_section(report),
        _outcomes_section(report, any(g.pair is not None for g in games)),
        _colour_section(games, players),
        _length_section(games),
    ]
    if book_summary is not None:
        report.sections.append(_book_section(book_summary))
    return report


def _pairwise(games: Sequence[Game], players: Sequence[str]) -> dict[tuple[str, str], PairResult]:
    by_pair: dict[frozenset[str], list[Game]] = defaultdict(list)
    for game in games:
        by_pair[frozenset((game.black, game.white))].append(game)
    found: dict[tuple[str, str], PairResult] = {}
    for a in players:
        for b in players:
            subset = by_pair.get(frozenset((a, b))) if a != b else None
            if not subset:
                continue
            counts = count_games(subset, a, b)
            if counts.penta is not None:
                found[(a, b)] = PairResult(a, b, counts, elo_pentanomial(counts.penta),
                                           "pentanomial", counts.unpaired)
            else:
                found[(a, b)] = PairResult(a, b, counts, elo_trinomial(
                    counts.wins, counts.draws, counts.losses), "trinomial", 0)
    return found


# -- sections ----------------------------------------------------------------


def _provenance_section(report: Report, book: str | Path | None, simulations: int, seed: int,
                        white_advantage: bool, draw_rate: bool) -> Section:
    section = Section("provenance", "Provenance")
    section.blocks.append(Paragraph(
        f"{_plural(report.games, 'game')} between {_plural(len(report.players), 'player')}; "
        f"report generated {report.generated_at} by bookgen {__version__}."))
    section.blocks.append(Table(["file", "games"], [[p, str(n)] for p, n in report.sources],
                                numeric=[False, True], caption="Files read"))
    section.blocks.append(Paragraph("Players: " + ", ".join(report.players) + "."))
    settings = [f"rating simulations: {simulations} (seed {seed})",
                f"white advantage fitted: {'yes' if white_advantage else 'no'}",
                f"draw rate fitted: {'yes' if draw_rate else 'no'}"]
    if book is not None:
        settings.append(f"book: {book}")
    section.blocks.append(Bullets(settings))
    return section


def _ratings_section(table: RatingTable) -> Section:
    section = Section("ratings-section", "Ratings (Ordo)")
    errors = (f"ERROR is the {table.confidence:g} % margin from {table.simulations} "
              "simulations; CFS(%) is the confidence that a player is stronger than the "
              "next one" if table.simulations else
              "no simulations were run, so there are no errors nor CFS")
    section.blocks.append(Paragraph(
        f"Ordo ratings (a difference of {table.scale:g} points means a 76 % expected "
        f"score), pool average 0; {errors}. A rating marked > (<) is a floor (ceiling) "
        "for a player who won (lost) every game."))
    numeric = [True, False] + [True] * (len(RATING_HEADERS) - 2)
    section.blocks.append(Table(RATING_HEADERS, rating_rows(table), id="ratings",
                                numeric=numeric))
    footer = table.format_text().splitlines()[1 + len(table.players):]
    section.blocks.extend(Paragraph(line) for line in footer)
    names = [p.name for p in table.players]
    section.blocks.append(Image("ratings", "Ratings with their error bars", plots.ratings_plot(
        names, [p.rating for p in table.players], [p.error for p in table.players])))
    section.blocks.append(Image("wdl", "Wins, draws and losses per player", plots.wdl_plot(
        names, [p.w for p in table.players], [p.d for p in table.players],
        [p.l for p in table.players])))
    return section


def _elo_cell(result: PairResult) -> str:
    e = result.estimate
    return f"{_signed(e.elo)} ± {_margin(e.elo_error)}, LOS {_percent(e.los)}"


def _penta_text(counts: PairCounts) -> str:
    return "-" if counts.penta is None else "[" + ", ".join(map(str, counts.penta)) + "]"


def _pair_row(result: PairResult) -> list[str]:
    c, e = result.counts, result.estimate
    return [result.a, result.b, str(c.games), str(c.wins), str(c.draws), str(c.losses),
            _penta_text(c), result.basis, str(result.left_out),
            f"{_signed(e.elo, 2)} ± {_margin(e.elo_error, 2)}",
            f"{_signed(e.nelo, 2)} ± {_margin(e.nelo_error, 2)}", _percent(e.los, 2)]


PAIR_HEADERS = ["player", "opponent", "games", "W", "D", "L", "pentanomial", "basis",
                "left out", "Elo", "nElo", "LOS"]
PAIR_NUMERIC = [False, False, True, True, True, True, False, False, True, True, True, True]


def _pairwise_section(report: Report) -> Section:
    section = Section("pairwise", "Pairwise results")
    section.blocks.append(Paragraph(
        "Each cell: the row player's Elo difference against the column player with its 95 % "
        "margin, and the likelihood of superiority (LOS), from the games of that pair only. "
        "Where the pair played complete colour-swapped pairs, the pair of games is the "
        "sampling unit (pentanomial [LL, LD, WL+DD, WD, WW]) and games outside a complete pair "
        "are left out; otherwise every game counts (trinomial)."))
    names = report.players
    rows = []
    for a in names:
        row = [a]
        for b in names:
            result = report.pairwise.get((a, b))
            row.append("—" if a == b else "no games" if result is None else _elo_cell(result))
        rows.append(row)
    section.blocks.append(Table(["", *names], rows, id="pairwise-matrix",
                                numeric=[False] + [True] * len(names)))
    index = {name: i for i, name in enumerate(names)}
    details = [_pair_row(r) for (a, b), r in report.pairwise.items() if index[a] < index[b]]
    section.blocks.append(Table(PAIR_HEADERS, details, id="pairwise-details",
                                numeric=PAIR_NUMERIC,
                                caption="Per pair, from the higher-rated player's side"))
    return section


def _sprt_blocks(result: SprtResult) -> list[Block]:
    c, e = result.counts, result.estimate
    kind = "normalised Elo" if result.model == "normalized" else "logistic Elo"
    verdict = {"H1": "H1 accepted", "H0": "H0 accepted", None: "continue"}[result.verdict]
    rows = [["games", f"{c.games} (W {c.wins}, D {c.draws}, L {c.losses})"],
            ["pentanomial", f"{_penta_text(c)} ({_plural(c.pairs, 'complete pair')}, "
                            f"{_plural(c.unpaired, 'game')} outside a complete pair)"],
            ["basis", result.basis],
            ["Elo", f"{_signed(e.elo, 2)} ± {_margin(e.elo_error, 2)}"],
            ["nElo", f"{_signed(e.nelo, 2)} ± {_margin(e.nelo_error, 2)}"],
            ["LOS", _percent(e.los, 2)],
            ["hypotheses", f"{kind}: H0 {result.elo0:g}, H1 {result.elo1:g} "
                           f"(alpha {result.alpha:g}, beta {result.beta:g})"],
            ["LLR", f"{result.llr:.2f} in [{result.lower:.2f}, {result.upper:.2f}]"],
            ["verdict", verdict]]
    blocks: list[Block] = [Heading(f"SPRT: {result.engine} vs {result.opponent}"),
                           Table(["", "value"], rows)]
    if result.basis == "pentanomial" and result.games_left_out:
        blocks.append(Paragraph(f"{_plural(result.games_left_out, 'game')} outside a complete "
                                "pair left out of the estimate and the LLR.", "note"))
    return blocks


def _sprt_section(report: Report) -> Section:
    section = Section("sprt", "SPRT and head to head")
    for result in report.sprts:
        section.blocks.extend(_sprt_blocks(result))
    if len(report.players) == 2:
        a, b = report.players
        result = report.pairwise[(a, b)]
        c, e = result.counts, result.estimate
        section.blocks.append(Heading(f"Summary: {a} vs {b}"))
        section.blocks.append(Table(["", "value"], [
            ["games", f"{c.games} (W {c.wins}, D {c.draws}, L {c.losses})"],
            ["pentanomial", f"{_penta_text(c)} ({_plural(c.pairs, 'complete pair')})"],
            ["basis", result.basis],
            ["Elo", f"{_signed(e.elo, 2)} ± {_margin(e.elo_error, 2)}"],
            ["nElo", f"{_signed(e.nelo, 2)} ± {_margin(e.nelo_error, 2)}"],
            ["LOS", _percent(e.los, 2)]]))
    if not report.sprts:
        section.blocks.append(Paragraph("No SPRT requested (--sprt A,B,ELO0,ELO1, bounds in "
                                        "normalised Elo).", "note"))
    return section


def _outcomes_section(report: Report, paired: bool) -> Section:
    section = Section("outcomes", "How games ended")
    section.blocks.append(Paragraph(
        "Endings per player: '<reason> win' / '<reason> loss' from the player's side, draws "
        "by their reason. Each ending's rate is compared across players with a contingency "
        "table (chi2_contingency; Fisher's exact test for a small 2x2 table) and pairwise "
        "tests with Holm's correction."))
    if paired:
        section.blocks.append(Paragraph(f"Note: {PAIRED_NOTE}.", "note"))
    table = report.outcomes
    columns = list(table.columns)
    section.blocks.append(Table(["player", *columns],
                                [[str(name), *(str(int(v)) for v in row)]
                                 for name, row in zip(table.index, table.to_numpy())],
                                id="outcome-table", numeric=[False] + [True] * len(columns)))
    for test in report.rate_tests:
        section.blocks.append(Heading(f"Ending: {test.ending}"))
        rates = [[player, str(k), str(n), _percent(100 * k / n if n else 0.0)]
                 for player, (k, n) in test.counts.items()]
        section.blocks.append(Table(["player", "games with it", "games", "rate"], rates,
                                    numeric=[False, True, True, True]))
        if test.test == "none":
            section.blocks.append(Paragraph("No test: the rate is the same for every player."))
        else:
            name = "odds ratio" if test.test == "fisher_exact" else "chi2"
            dof = f", dof {test.dof}" if test.dof is not None else ""
            section.blocks.append(Paragraph(
                f"{test.test}: {name} {test.statistic:.4f}{dof}, p {_p(test.p_value)}"))
        if test.pairwise:
            section.blocks.append(Table(
                ["player", "player", "test", "p", "Holm p"],
                [[row["player_a"], row["player_b"], row["test"], _p(row["p"]),
                  _p(row["p_holm"])] for row in test.pairwise],
                numeric=[False, False, False, True, True]))
        section.blocks.extend(Paragraph(f"Warning: {text}", "warning") for text in test.warnings)
    return section


def _colour_section(games: Sequence[Game], players: Sequence[str]) -> Section:
    section = Section("colour", "Score by colour")
    points: dict[tuple[str, str], list[float]] = defaultdict(list)
    for game in games:
        points[(game.black, "black")].append(game.black_score)
        points[(game.white, "white")].append(1.0 - game.black_score)

    def score(player: str, side: str) -> float | None:
        values = points.get((player, side))
        return sum(values) / len(values) if values else None

    rows = []
    for player in players:
        cells = [player]
        for side in ("black", "white"):
            value = score(player, side)
            cells += [str(len(points.get((player, side), []))),
                      "-" if value is None else _percent(100 * value)]
        rows.append(cells)
    first = sum(g.black_score for g in games) / len(games)
    section.blocks.append(Paragraph(
        f"Black (sente) scored {_percent(100 * first)} over all {len(games)} games."))
    section.blocks.append(Table(["player", "games as black", "score as black",
                                 "games as white", "score as white"], rows,
                                numeric=[False, True, True, True, True]))
    section.blocks.append(Image("colour", "Score as black and as white", plots.colour_score_plot(
        players, [score(p, "black") for p in players], [score(p, "white") for p in players])))
    return section


def _length_section(games: Sequence[Game]) -> Section:
    section = Section("lengths", "Game length")
    known = [g for g in games if g.plies > 0]
    if not known:
        section.blocks.append(Paragraph("No game lengths recorded (PGN files without a "
                                        "PlyCount tag)."))
        return section
    if len(known) < len(games):
        section.blocks.append(Paragraph(f"{_plural(len(games) - len(known), 'game')} without "
                                        "a recorded length left out.", "note"))
    by_reason: dict[str, list[int]] = defaultdict(list)
    for game in known:
        by_reason[game.reason or "unknown"].append(game.plies)
    rows = [[reason, str(len(values)), f"{sum(values) / len(values):.1f}",
             f"{median(values):g}", str(min(values)), str(max(values))]
            for reason, values in sorted(by_reason.items(), key=lambda item: -len(item[1]))]
    everything = [g.plies for g in known]
    rows.append(["all", str(len(everything)), f"{sum(everything) / len(everything):.1f}",
                 f"{median(everything):g}", str(min(everything)), str(max(everything))])
    section.blocks.append(Table(["reason", "games", "mean plies", "median", "min", "max"], rows,
                                numeric=[False] + [True] * 5))
    groups = {"black won": "black", "white won": "white", "draw": "draw"}
    data = {label: [g.plies for g in known if g.result == result]
            for label, result in groups.items()}
    section.blocks.append(Image("lengths", "Game length (plies)", plots.length_histogram(
        {label: values for label, values in data.items() if values})))
    return section


# -- the book ----------------------------------------------------------------


def _open_book(path: Path) -> sqlite3.Connection:
    """A read-only connection to the book at ``path``, after checking it is one.

    The book is opened with ``mode=ro`` rather than through
    :class:`bookgen.store.Book`, whose read-only open still migrates an older
    writable file: a report must never change its inputs (nor turn a results
    file given by mistake into a book).
    """
    from bookgen.schema import SCHEMA_VERSION

    if not path.is_file():
        raise BookgenError(f"{path}: no such book")
    with open(path, "rb") as handle:
        if not handle.read(16).startswith(b"SQLite format 3"):
            raise BookgenError(f"{path}: not a readable SQLite book (not an SQLite file)")
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        kind = None
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'kind'").fetchone()
            kind = row[0] if row else None
        if kind is not None:
            raise BookgenError(f"{path}: a {kind} file, not a book (no bookgen book schema)")
        if version == 0 or not {"runs", "positions", "moves"} <= tables:
            raise BookgenError(f"{path}: not a bookgen book (no bookgen book schema; tables: "
                               f"{', '.join(sorted(tables)) or 'none'})")
        if version > SCHEMA_VERSION:
            raise BookgenError(f"{path}: book schema version {version} is newer than this "
                               f"bookgen supports ({SCHEMA_VERSION}); upgrade bookgen")
    except sqlite3.DatabaseError as error:
        conn.close()
        raise BookgenError(f"{path}: not a readable SQLite book ({error})") from None
    except BookgenError:
        conn.close()
        raise
    return conn


def _read_book(path: str | Path) -> BookSummary:
    from bookgen.store import TRANSPOSITION_ROW_SQL

    own = f"NOT {TRANSPOSITION_ROW_SQL}"
    conn = _open_book(Path(path))
    try:
        runs = [dict(zip(("id", "command", "status", "started_at", "positions_added",
                          "moves_added", "moves_updated", "counts"), row))
                for row in conn.execute(
                    "SELECT id, command, status, started_at, positions_added, moves_added, "
                    "moves_updated, counts FROM runs ORDER BY id")]
        created = dict(conn.execute(
            "SELECT created_run, count(*) FROM positions GROUP BY created_run").fetchall())
        written = dict(conn.execute(
            f"SELECT run_id, count(*) FROM moves m WHERE {own} GROUP BY run_id").fetchall())
        for run in runs:
            run["positions_created"] = int(created.pop(run["id"], 0))
            run["moves_written"] = int(written.pop(run["id"], 0))
        # Rows of no run (or of a run row that is gone) count from the start.
        unattributed = (sum(created.values()), sum(written.values()))
        positions = int(conn.execute("SELECT count(*) FROM positions").fetchone()[0])
        moves = int(conn.execute(f"SELECT count(*) FROM moves m WHERE {own}").fetchone()[0])
        with_moves = int(conn.execute(
            f"SELECT count(DISTINCT position_id) FROM moves m WHERE {own}").fetchone()[0])
        plies = [int(row[0]) for row in conn.execute(
            "SELECT ply FROM positions WHERE ply IS NOT NULL AND id IN "
            "(SELECT position_id FROM moves)")]
        values: dict[str, list[int]] = {"black to move": [], "white to move": []}
        for turn, best in conn.execute(
                "SELECT p.turn, max(m.value) FROM moves m JOIN positions p "
                f"ON p.id = m.position_id WHERE {own} GROUP BY m.position_id"):
            if best is not None:
                values["black to move" if turn == 0 else "white to move"].append(int(best))
        has_mistakes = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = "
                                    "'table' AND name = 'mistakes'").fetchone()[0]
        mistakes = [] if not has_mistakes else [
            dict(zip(("run_id", "iteration", "started_at", "kind", "count"), row))
            for row in conn.execute(
                "SELECT m.run_id, m.iteration, r.started_at, m.kind, count(*) "
                "FROM mistakes m LEFT JOIN runs r ON r.id = m.run_id "
                "GROUP BY m.run_id, m.iteration, m.kind ORDER BY m.run_id, m.iteration, m.kind")]
    except sqlite3.DatabaseError as error:
        raise BookgenError(f"{path}: cannot read the book ({error})") from None
    finally:
        conn.close()
    return BookSummary(str(path), positions, with_moves, moves, runs, plies, values, mistakes,
                       unattributed)


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


def _book_section(book: BookSummary) -> Section:
    section = Section("book", "Book")
    section.blocks.append(Paragraph(
        f"{book.path}: {book.positions} positions ({book.positions_with_moves} with moves), "
        f"{book.moves} moves, {_plural(len(book.runs), 'run')}."))
    if book.runs:
        # What the runs table reports (grow reports its expansions as positions
        # and no moves) next to what the book holds per run.
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
            "The columns +positions, +moves and moves updated are what each run reported in "
            "the runs table, and the next two columns add them up. The last two count the rows "
            "in the book: positions by the run that created them, moves by the run that last "
            "wrote them, added up run after run (they end at the book's size)."))
        section.blocks.append(Table(
            ["run", "command", "status", "started", "+positions", "+moves", "moves updated",
             "positions (reported)", "moves (reported)", "positions (in book)",
             "moves (in book)"], rows, id="book-runs",
            numeric=[True, False, False, False] + [True] * 7))
        section.blocks.append(Image("book_growth", "Book size run after run",
                                    plots.book_growth_plot(
                                        [int(r["id"]) for r in book.runs],
                                        {"positions (in book)": held_positions,
                                         "moves (in book)": held_moves,
                                         "positions (reported)": reported_positions,
                                         "moves (reported)": reported_moves})))
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
                                    plots.ply_histogram(book.plies)))
    if any(book.values.values()):
        section.blocks.append(Image("book_values", "Best move value of the book positions",
                                    plots.value_histogram(book.values)))
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
    for (run, iteration), entry in grouped.items():
        labels.append(str(run) if iteration == 0 else f"{run}/{iteration}")
        total = sum(entry[k] for k in kinds)
        rows.append([str(run), str(iteration), str(entry["started_at"] or "-"),
                     *(str(entry[k]) for k in kinds), str(total)])
    section.blocks.append(Table(["run", "iteration", "started", *kinds, "total"], rows,
                                id="book-mistakes",
                                numeric=[True, True, False] + [True] * (len(kinds) + 1)))
    section.blocks.append(Image("book_mistakes", "Mistakes per refine run (run/iteration)",
                                plots.mistakes_plot(labels, {k: [grouped[key][k] for key in
                                                                 grouped] for k in kinds})))
    return section


# --------------------------------------------------------------------------
# writing


def check_output(path: str | Path, protected: Sequence[str | Path] = ()) -> None:
    """Raise unless ``path`` can be written: its directory exists, it is not a
    directory, and it is none of the ``protected`` input files."""
    path = Path(path)
    if path.is_dir():
        raise BookgenError(f"{path}: is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise BookgenError(f"{path}: directory {parent} does not exist")
    resolved = path.resolve()
    for other in protected:
        if Path(other).resolve() == resolved:
            raise BookgenError(f"{path}: would overwrite an input file")


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file next to ``path``, then rename it over ``path``."""
    handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp", delete=False)
    try:
        with handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(handle.name, 0o666 & ~mask)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def _inputs(report: Report) -> list[str]:
    return [p for p, _ in report.sources] + ([report.book.path] if report.book else [])


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       background: #f6f7f9; color: #1d2330; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { margin-top: 0; border-bottom: 3px solid #3b4a6b; padding-bottom: 8px; }
h2 { margin-top: 36px; border-bottom: 1px solid #d5d9e0; padding-bottom: 4px; color: #3b4a6b; }
h3 { margin-top: 24px; }
nav ul { columns: 2; }
table { border-collapse: collapse; margin: 12px 0; font-size: 14px; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: 4px; }
th, td { border: 1px solid #d5d9e0; padding: 4px 8px; vertical-align: top; }
th { background: #e8ecf3; text-align: center; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #f7f8fb; }
table#ratings td:nth-child(2) { font-weight: 600; }
figure { margin: 16px 0; }
figure img { max-width: 100%; border: 1px solid #e1e4ea; }
figcaption { font-size: 13px; color: #555; }
p.note { background: #eef4ff; border-left: 4px solid #5b7bd5; padding: 6px 10px; }
p.warning { background: #fff4e5; border-left: 4px solid #e09b3d; padding: 6px 10px; }
""".strip()


def _html_block(block: Block) -> str:
    escape = html.escape
    if isinstance(block, Paragraph):
        style = f' class="{block.style}"' if block.style else ""
        return f"<p{style}>{escape(block.text)}</p>"
    if isinstance(block, Heading):
        return f"<h3>{escape(block.text)}</h3>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Image):
        data = base64.b64encode(block.png).decode("ascii")
        return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(block.title)}">'
                f"<figcaption>{escape(block.title)}</figcaption></figure>")
    numeric = block.numeric or [False] * len(block.headers)
    table_id = f' id="{escape(block.id)}"' if block.id else ""
    parts = [f"<table{table_id}>"]
    if block.caption:
        parts.append(f"<caption>{escape(block.caption)}</caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in block.headers)
                 + "</tr></thead><tbody>")
    for row in block.rows:
        cells = "".join(f'<td class="num">{escape(cell)}</td>' if right
                        else f"<td>{escape(cell)}</td>" for cell, right in zip(row, numeric))
        parts.append(f"<tr>{cells}</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page."""
    escape = html.escape
    toc = "".join(f'<li><a href="#{escape(s.id)}">{escape(s.title)}</a></li>'
                  for s in report.sections)
    body = []
    for section in report.sections:
        body.append(f'<section id="{escape(section.id)}"><h2>{escape(section.title)}</h2>')
        body.extend(_html_block(block) for block in section.blocks)
        body.append("</section>")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="bookgen {escape(__version__)}">',
        f"<title>{escape(report.title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body><main>",
        f"<h1>{escape(report.title)}</h1>",
        f"<nav><ul>{toc}</ul></nav>",
        *body,
        "</main></body>",
        "</html>",
        "",
    ])


def write_html(report: Report, path: str | Path) -> Path:
    """Write the HTML page to ``path`` atomically; returns the path."""
    path = Path(path)
    check_output(path, _inputs(report))
    _atomic_write(path, render_html(report).encode("utf-8"))
    return path


_MARKDOWN_INLINE = set("\\`*_[]|~$")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def markdown_escape(text: str, *, block: bool = False) -> str:
    """``text`` as literal Markdown text, safe in a table cell.

    Inline punctuation is backslash-escaped (``|`` included, so a cell cannot
    end early; backticks, so no code span starts), ``<``, ``>`` and ``&``
    become entities (no raw HTML), and line breaks become spaces. With
    ``block=True`` (a paragraph, a list item or a heading) a start that would
    open a heading, a list or a quote is escaped as well.
    """
    text = " ".join(text.splitlines())
    out = "".join("\\" + c if c in _MARKDOWN_INLINE else _ENTITIES.get(c, c) for c in text)
    if block:
        stripped = out.lstrip(" ")
        digits = len(stripped) - len(stripped.lstrip("0123456789"))
        if stripped[:1] in ("#", "+", "-", "="):
            out = "\\" + stripped
        elif digits and stripped[digits:digits + 1] in (".", ")"):
            out = stripped[:digits] + "\\" + stripped[digits:]
    return out


def _markdown_block(block: Block, image_dir: str) -> str:
    if isinstance(block, Paragraph):
        text = markdown_escape(block.text, block=True)
        return f"> {text}" if block.style else text
    if isinstance(block, Heading):
        return f"### {markdown_escape(block.text, block=True)}"
    if isinstance(block, Bullets):
        return "\n".join(f"- {markdown_escape(item, block=True)}" for item in block.items)
    if isinstance(block, Image):
        return f"![{markdown_escape(block.title)}]({image_dir}/{block.key}.png)"
    numeric = block.numeric or [False] * len(block.headers)
    lines = []
    if block.caption:
        lines += [f"*{markdown_escape(block.caption)}*", ""]
    lines.append("| " + " | ".join(markdown_escape(h) for h in block.headers) + " |")
    lines.append("|" + "|".join("---:" if right else ":---" for right in numeric) + "|")
    for row in block.rows:
        lines.append("| " + " | ".join(markdown_escape(c) for c in row) + " |")
    return "\n".join(lines)


def render_markdown(report: Report, image_dir: str) -> str:
    """The report as Markdown, its figures referenced as ``image_dir/<key>.png``."""
    parts = [f"# {markdown_escape(report.title, block=True)}"]
    for section in report.sections:
        parts.append(f"## {markdown_escape(section.title, block=True)}")
        parts.extend(_markdown_block(block, image_dir) for block in section.blocks)
    return "\n\n".join(parts) + "\n"


def write_markdown(report: Report, path: str | Path) -> Path:
    """Write the Markdown twin to ``path`` and its figures to ``<stem>_files/``."""
    path = Path(path)
    check_output(path, _inputs(report))
    image_dir = path.parent / f"{path.stem}_files"
    if image_dir.exists() and not image_dir.is_dir():
        raise BookgenError(f"{image_dir}: exists and is not a directory")
    image_dir.mkdir(exist_ok=True)
    for image in report.figures:
        _atomic_write(image_dir / f"{image.key}.png", image.png)
    _atomic_write(path, render_markdown(report, image_dir.name).encode("utf-8"))
    return path


def report_summary(report: Report) -> dict[str, Any]:
    """A short JSON-ready summary (what the command prints)."""
    return {"games": report.games, "players": report.players,
            "figures": len(report.figures), "sprt": [s.as_json() for s in report.sprts],
            "ratings": report.ratings.as_json()["players"]}

