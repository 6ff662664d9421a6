"""``bookgen report``: one self-contained HTML page (and a Markdown twin) about a match.

:func:`build_report` reads results files (and PGN files), computes what the
other analysis commands print, and lays it out as a :class:`Report`: a list
of sections made of plain-text blocks (paragraphs, tables, lists, figures).
The renderers :func:`write_html` and :func:`write_markdown` escape every text
they write, since player names come from engines and users and may hold
markup. The content:

- provenance: the files read, the number of games, the players, the date;
- the Ordo rating table (:func:`bookgen.analysis.ratings.fit_ratings`, the columns of
  ``bookgen rate``) and plots of the ratings and of W/D/L per player;
- the pairwise matrix: each pair's Elo difference with its margin and LOS
  from :mod:`bookgen.analysis.pairstats` on that pair's games, counted per
  colour-swapped pair (pentanomial) when complete pairs exist;
- the SPRT state of each requested ``(A, B, elo0, elo1)`` and of each SPRT a
  ``bookgen match --sprt`` recorded in a results file (on that match's
  games), from the engine under test's side (its games and Elo estimate only
  when the pairwise section does not show the same);
- with exactly two players, a head-to-head table instead of the pairwise
  matrix, and each ending tested once (one's loss is the other's win): every
  fact is shown once;
- outcomes: the per-player ending table and :func:`bookgen.analysis.outcomes.test_rate`
  for every ending present, with its warnings and the note on paired games;
- score by colour and game lengths;
- with per-move data in a results file: where each engine left its own book,
  per opening, and its score there (:mod:`bookgen.analysis.book_exits`);
- with a book: its size run after run (the ``runs`` table), the ply and
  best-value distributions of its positions and the mistakes of each
  ``refine mistakes`` run.

The layout and rendering live in :mod:`bookgen.analysis.document` (self-contained
HTML, Markdown with its figures in ``<stem>_files/``, atomic writes); the
book part in :mod:`bookgen.analysis.report_book`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

import pandas as pd

from bookgen import __version__
from bookgen.analysis import plots
from bookgen.analysis.book_exits import OpeningExits, exits_by_opening, read_book_exits
from bookgen.analysis.document import (
    Block,
    Bullets,
    Heading,
    Image,
    Paragraph,
    Section,
    Table,
    plural,
    render_html_page,
    render_markdown_page,
)
from bookgen.analysis.outcomes import PAIRED_NOTE, RateTest, outcome_table, test_rate
from bookgen.analysis.pairstats import (
    EloEstimate,
    PairCounts,
    SprtResult,
    SprtSettings,
    SprtTest,
    count_games,
    elo_pentanomial,
    elo_trinomial,
    verdict_sentence,
)
from bookgen.analysis.ratings import RatingSettings, RatingTable, _round_half_up, fit_ratings
from bookgen.analysis.report_book import BookSummary, book_section, openings_section, read_book
from bookgen.analysis.results import load_games
from bookgen.errors import BookgenError, SettingsError
from bookgen.files import atomic_write, check_output
from bookgen.store.results import GameResult, recorded_sprts

__all__ = ["PairResult", "Report", "ReportSettings", "build_report", "parse_sprt", "rating_rows",
           "render_html", "render_markdown", "report_summary", "write_html", "write_markdown"]

RATING_HEADERS = ["#", "PLAYER", "RATING", "ERROR", "POINTS", "PLAYED", "(%)", "CFS(%)",
                  "W", "D", "L", "D(%)"]
DEFAULT_TITLE = "bookgen match report"


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
    sprt_sources: list[str] = field(default_factory=list)  # where each of ``sprts`` comes from
    move_games: int = 0      # games with per-move data (results files of version 2)
    book_exits: list[OpeningExits] = field(default_factory=list)

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


def _margin(value: float | None, digits: int = 1) -> str:
    if value is None:  # the sample has no spread (pairstats.EloEstimate)
        return "n/a"
    return "inf" if math.isinf(value) else f"{value:.{digits}f}"


def _percent(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f} %"


def _p(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.4g}"


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


def parse_sprt(text: str, players: Sequence[str]) -> SprtTest:
    """``A,B,ELO0,ELO1`` -> the test of A against B, H0 ELO0 and H1 ELO1 (normalised
    Elo, alpha = beta = 0.05).

    Names may hold commas: the split between A and B is the one that leaves
    two known players. A bad one is a :class:`bookgen.errors.SettingsError` of
    ``sprt_tests`` (the CLI: ``--sprt``); bounds in the wrong order are
    :class:`SprtSettings`' error, in its words.
    """
    def bad(why: str) -> SettingsError:
        return SettingsError("sprt_tests", f"{SettingsError.FIELD} {text!r}: {why}")

    parts = text.rsplit(",", 2)
    if len(parts) != 3 or "," not in parts[0]:
        raise bad("expected A,B,ELO0,ELO1")
    try:
        elo0, elo1 = float(parts[1]), float(parts[2])
    except ValueError:
        raise bad("ELO0 and ELO1 must be numbers") from None
    names = parts[0]
    known = set(players)
    splits = [(names[:i], names[i + 1:]) for i, c in enumerate(names) if c == ","]
    matches = [(a, b) for a, b in splits if a in known and b in known]
    if len(matches) == 1:
        try:
            settings = SprtSettings(elo0, elo1)
        except SettingsError as error:
            # The text report has always printed: "elo0 (5) must be below elo1 (0)".
            raise BookgenError(str(error)) from None
        return SprtTest(matches[0][0], matches[0][1], settings)
    found = ", ".join(players)
    if len(matches) > 1:
        raise bad(f"ambiguous player names (players: {found})")
    if len(splits) == 1:
        unknown = [repr(n) for n in splits[0] if n not in known]
        raise bad(f"unknown player {', '.join(unknown)}; players found: {found}")
    raise bad(f"no two known players; players found: {found}")


# --------------------------------------------------------------------------
# building


@dataclass(frozen=True)
class ReportSettings:
    """What :func:`build_report` reads and how: ``results`` (results .sqlite and
    PGN files), the ``book`` it describes (None: no book section),
    ``sprt_tests`` (:class:`SprtTest` objects, or ``"A,B,ELO0,ELO1"`` strings:
    :func:`parse_sprt`), the ratings' fit (:class:`RatingSettings`, 1000
    simulations by default) and the ``title`` (None: the default one)."""

    results: tuple[str | Path, ...]
    book: str | Path | None = None
    sprt_tests: tuple[str | SprtTest, ...] = ()
    rating: RatingSettings = field(default_factory=lambda: RatingSettings(simulations=1000))
    title: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", tuple(self.results))
        object.__setattr__(self, "sprt_tests", tuple(self.sprt_tests))


def build_report(settings: ReportSettings, now: datetime | None = None) -> Report:
    """Read the results files and the book of ``settings`` and lay out the report;
    ``now``: the time it says it was generated (default: now)."""
    results, book, sprt_tests = settings.results, settings.book, settings.sprt_tests
    rating, title = settings.rating, settings.title
    white_advantage, draw_rate = rating.fit_white_advantage, rating.fit_draw_rate
    simulations, seed = rating.simulations, rating.seed
    paths = [str(p) for p in results]
    if not paths:
        raise BookgenError("no results files given")
    book_summary = read_book(book) if book is not None else None
    games = load_games(paths)
    if not games:
        raise BookgenError(f"no finished games in {', '.join(paths)}")
    ratings = fit_ratings(games, rating)
    players = [p.name for p in ratings.players]
    requested = [parse_sprt(spec, players) if isinstance(spec, str) else spec
                 for spec in sprt_tests]
    sprts = [test.run(games) for test in requested]
    sprt_sources = ["requested with --sprt"] * len(sprts)
    for recorded in recorded_sprts(paths):
        prefix = f"{recorded['file']}#{recorded['match_id']}:"
        match_games = [g for g in games if g.pair is not None and g.pair.startswith(prefix)]
        try:
            sprts.append(SprtTest.from_json(recorded).run(match_games))
        except BookgenError:
            continue  # no game of that match yet (or bounds no SPRT can have)
        sprt_sources.append(f"recorded by bookgen match --sprt (match {recorded['match_id']} "
                            f"of {recorded['file']}, its games only)")
    pairwise = _pairwise(games, players)
    outcomes = outcome_table(games).reindex(players).fillna(0).astype(int)
    endings = [c for c in outcomes.columns if c != "games" and outcomes[c].sum() > 0]
    rate_tests = [test_rate(games, ending, players=players) for ending in endings]

    move_games, exits = read_book_exits(paths)
    per_file = Counter(g.source for g in games)
    sources = [(p, per_file.get(p, 0)) for p in dict.fromkeys(paths)]
    stamp = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    report = Report(title=title or DEFAULT_TITLE, generated_at=stamp, sources=sources,
                    games=len(games), players=players, ratings=ratings, pairwise=pairwise,
                    sprts=sprts, outcomes=outcomes, rate_tests=rate_tests, book=book_summary,
                    sections=[], sprt_sources=sprt_sources, move_games=move_games,
                    book_exits=exits_by_opening(exits))
    report.sections = [
        _provenance_section(report, book, simulations, seed, white_advantage, draw_rate),
        _ratings_section(ratings),
        _pairwise_section(report),
        _sprt_section(report),
        _outcomes_section(report, any(g.pair is not None for g in games)),
        _colour_section(games, players),
        _length_section(games),
    ]
    if move_games:
        report.sections.append(_book_exits_section(report))
    if book_summary is not None:
        report.sections.append(book_section(book_summary))
        report.sections.append(openings_section(games, book_summary))
    return report


def _pairwise(games: Sequence[GameResult], players: Sequence[str]
              ) -> dict[tuple[str, str], PairResult]:
    by_pair: dict[frozenset[str], list[GameResult]] = defaultdict(list)
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
        f"{plural(report.games, 'game')} between {plural(len(report.players), 'player')}; "
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
    section.blocks.append(Image("ratings", "Ratings with their error bars", plots.png(
        plots.ratings_plot(names, [p.rating for p in table.players],
                           [p.error for p in table.players]))))
    section.blocks.append(Image("wdl", "Wins, draws and losses per player", plots.png(
        plots.wdl_plot(names, [p.w for p in table.players], [p.d for p in table.players],
                       [p.l for p in table.players]))))
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


SAMPLING_NOTE = ("Where the pair played complete colour-swapped pairs, the pair of games is the "
                 "sampling unit (pentanomial [LL, LD, WL+DD, WD, WW]) and games outside a "
                 "complete pair are left out; otherwise every game counts (trinomial).")


def _shown_pair(report: Report, x: str, y: str) -> PairResult:
    """The result of players ``x`` and ``y`` as the pairwise section shows it (the
    higher-rated player's side)."""
    index = {name: i for i, name in enumerate(report.players)}
    return report.pairwise[(x, y) if index[x] < index[y] else (y, x)]


def _pairwise_section(report: Report) -> Section:
    names = report.players
    if len(names) == 2:
        # One pair: its W/D/L are the ratings table's; a matrix would show its Elo twice.
        result = _shown_pair(report, *names)
        c, e = result.counts, result.estimate
        section = Section("pairwise", f"Head to head: {result.a} vs {result.b}")
        section.blocks.append(Paragraph(
            f"{result.a}'s Elo difference against {result.b} with its 95 % margin and the "
            "likelihood of superiority (LOS); the games and W/D/L are in the ratings table. "
            + SAMPLING_NOTE))
        section.blocks.append(Table(["", "value"], [
            ["pentanomial", f"{_penta_text(c)} ({plural(c.pairs, 'complete pair')}, "
                            f"{plural(result.left_out, 'game')} left out)"],
            ["basis", result.basis],
            ["Elo", f"{_signed(e.elo, 2)} ± {_margin(e.elo_error, 2)}"],
            ["nElo", f"{_signed(e.nelo, 2)} ± {_margin(e.nelo_error, 2)}"],
            ["LOS", _percent(e.los, 2)]], id="head-to-head"))
        return section
    section = Section("pairwise", "Pairwise results")
    section.blocks.append(Paragraph(
        "Each cell: the row player's Elo difference against the column player with its 95 % "
        "margin, and the likelihood of superiority (LOS), from the games of that pair only. "
        + SAMPLING_NOTE))
    rows = []
    for a in names:
        row = [a]
        for b in names:
            pair = report.pairwise.get((a, b))
            row.append("—" if a == b else "no games" if pair is None else _elo_cell(pair))
        rows.append(row)
    section.blocks.append(Table(["", *names], rows, id="pairwise-matrix",
                                numeric=[False] + [True] * len(names)))
    index = {name: i for i, name in enumerate(names)}
    details = [_pair_row(r) for (a, b), r in report.pairwise.items() if index[a] < index[b]]
    section.blocks.append(Table(PAIR_HEADERS, details, id="pairwise-details",
                                numeric=PAIR_NUMERIC,
                                caption="Per pair, from the higher-rated player's side"))
    return section


def _sprt_blocks(result: SprtResult, source: str,
                 shown: PairResult | None = None) -> list[Block]:
    """The SPRT's table; ``shown`` is the pair as the pairwise section shows it when
    that holds the same games and estimate, which are then not repeated."""
    c, e, test = result.counts, result.estimate, result.settings
    kind = "normalised Elo" if test.model == "normalized" else "logistic Elo"
    rows = [["engine under test", f"{result.engine} (W, D, L, Elo from its side)"],
            ["test", source]]
    if shown is None:
        rows += [
            ["games", f"{c.games} (W {c.wins}, D {c.draws}, L {c.losses})"],
            ["pentanomial", f"{_penta_text(c)} ({plural(c.pairs, 'complete pair')}, "
                            f"{plural(c.unpaired, 'game')} outside a complete pair)"],
            ["basis", result.basis],
            ["Elo", f"{_signed(e.elo, 2)} ± {_margin(e.elo_error, 2)}"],
            ["nElo", f"{_signed(e.nelo, 2)} ± {_margin(e.nelo_error, 2)}"],
            ["LOS", _percent(e.los, 2)]]
    rows += [["hypotheses", f"{kind}: H0 {test.elo0:g}, H1 {test.elo1:g} "
                            f"(alpha {test.alpha:g}, beta {test.beta:g})"],
             ["LLR", f"{result.llr:.2f} in [{result.lower:.2f}, {result.upper:.2f}]"],
             ["verdict", verdict_sentence(result)]]
    blocks: list[Block] = [Heading(f"SPRT: {result.engine} (engine under test) vs "
                                   f"{result.opponent}"),
                           Table(["", "value"], rows)]
    if shown is not None:
        blocks.append(Paragraph(f"Games, pentanomial and Elo estimate: as shown above for "
                                f"{shown.a} vs {shown.b} (from {shown.a}'s side).", "note"))
    if result.basis == "pentanomial" and result.games_left_out:
        blocks.append(Paragraph(f"{plural(result.games_left_out, 'game')} outside a complete "
                                "pair left out of the estimate and the LLR.", "note"))
    return blocks


def _sprt_section(report: Report) -> Section:
    section = Section("sprt", "SPRT")
    sources = report.sprt_sources or ["requested with --sprt"] * len(report.sprts)
    for result, source in zip(report.sprts, sources):
        same = report.pairwise.get((result.engine, result.opponent))
        repeated = (same is not None and same.basis == result.basis
                    and same.counts == result.counts)
        shown = _shown_pair(report, result.engine, result.opponent) if repeated else None
        section.blocks.extend(_sprt_blocks(result, source, shown))
    if not report.sprts:
        section.blocks.append(Paragraph("No SPRT requested (--sprt A,B,ELO0,ELO1: A is the "
                                        "engine under test, bounds in normalised Elo) or "
                                        "recorded by bookgen match --sprt.", "note"))
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
    tests = report.rate_tests
    if len(report.players) == 2:
        # One player's '<reason> loss' is the other's '<reason> win': the same test.
        won = {t.ending for t in tests if t.ending.endswith(" win")}
        mirrored = [t for t in tests if t.ending.endswith(" loss")
                    and t.ending[:-len(" loss")] + " win" in won]
        if mirrored:
            tests = [t for t in tests if t not in mirrored]
            section.blocks.append(Paragraph(
                "With two players one's loss is the other's win, so only the wins are "
                "tested: " + ", ".join(t.ending for t in mirrored) + " would repeat them.",
                "note"))
    for test in tests:
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
        if len(test.pairwise) > 1:  # one pair: its test is the one above
            section.blocks.append(Table(
                ["player", "player", "test", "p", "Holm p"],
                [[row["player_a"], row["player_b"], row["test"], _p(row["p"]),
                  _p(row["p_holm"])] for row in test.pairwise],
                numeric=[False, False, False, True, True]))
        section.blocks.extend(Paragraph(f"Warning: {text}", "warning") for text in test.warnings)
    return section


def _colour_section(games: Sequence[GameResult], players: Sequence[str]) -> Section:
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
    section.blocks.append(Image("colour", "Score as black and as white", plots.png(
        plots.colour_score_plot(players, [score(p, "black") for p in players],
                                [score(p, "white") for p in players]))))
    return section


def _length_section(games: Sequence[GameResult]) -> Section:
    section = Section("lengths", "Game length")
    known = [g for g in games if g.plies > 0]
    if not known:
        section.blocks.append(Paragraph("No game lengths recorded (PGN files without a "
                                        "PlyCount tag)."))
        return section
    if len(known) < len(games):
        section.blocks.append(Paragraph(f"{plural(len(games) - len(known), 'game')} without "
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
    section.blocks.append(Image("lengths", "Game length (plies)", plots.png(plots.length_histogram(
        {label: values for label, values in data.items() if values}))))
    return section


def _score_text(cp: int | None, mate: int | None) -> str:
    if mate is not None:
        return f"mate {mate:+d}"
    return "?" if cp is None else f"{cp:+d}"


def _book_exits_section(report: Report) -> Section:
    section = Section("book-exits", "Leaving the book")
    games = plural(report.move_games, "game")
    if not any(e.book_moves for row in report.book_exits for e in row.exits):
        section.blocks.append(Paragraph(
            f"No engine answered from its own book in the {games} with per-move data: "
            "each searched from its first move."))
        return section
    section.blocks.append(Paragraph(
        "Where each engine left its own book, per opening: its first move that was not a "
        "book answer (depth 0 or nodes 0, or an info string about its book) and its score "
        f"of the position there, from its own side (centipawns), in the {games} with "
        "per-move data, game by game (the engine's colour in brackets) or summed up over more "
        "than six games. Plies count from the initial position; '-' is a game in which it "
        "never left its book."))
    rows = []
    for row in report.book_exits:
        if row.games <= 6:
            plies = ", ".join(f"{'-' if e.ply is None else e.ply} ({e.colour})"
                              for e in row.exits)
            scores = ", ".join("-" if e.ply is None else _score_text(e.score_cp, e.score_mate)
                               for e in row.exits)
        else:
            left = [e.ply for e in row.left if e.ply is not None]
            plies = (f"median {row.median_ply:g} ({min(left)}-{max(left)})" if left else "-")
            scores = "-" if row.mean_cp is None else f"mean {row.mean_cp:+.0f}"
        rows.append([row.opening, row.engine, str(row.games), f"{row.book_moves:.1f}",
                     plies, scores])
    section.blocks.append(Table(["opening", "engine", "games", "book moves per game",
                                 "left the book at ply", "score there"], rows, id="book-exits",
                                numeric=[False, False, True, True, False, False]))
    return section


# --------------------------------------------------------------------------
# writing


def _inputs(report: Report) -> list[str]:
    return [p for p, _ in report.sources] + ([report.book.path] if report.book else [])


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page."""
    return render_html_page(report.title, report.sections)


def write_html(report: Report, path: str | Path) -> Path:
    """Write the HTML page to ``path`` atomically; returns the path."""
    path = Path(path)
    check_output(path, _inputs(report))
    atomic_write(path, render_html(report).encode("utf-8"))
    return path


def render_markdown(report: Report, image_dir: str) -> str:
    """The report as Markdown, its figures referenced as ``image_dir/<key>.png``."""
    return render_markdown_page(report.title, report.sections, image_dir)


def write_markdown(report: Report, path: str | Path) -> Path:
    """Write the Markdown twin to ``path`` and its figures to ``<stem>_files/``."""
    path = Path(path)
    check_output(path, _inputs(report))
    image_dir = path.parent / f"{path.stem}_files"
    if image_dir.exists() and not image_dir.is_dir():
        raise BookgenError(f"{image_dir}: exists and is not a directory")
    image_dir.mkdir(exist_ok=True)
    for image in report.figures:
        atomic_write(image_dir / f"{image.key}.png", image.png)
    atomic_write(path, render_markdown(report, image_dir.name).encode("utf-8"))
    return path


def report_summary(report: Report) -> dict[str, Any]:
    """A short JSON-ready summary (what the command prints)."""
    return {"games": report.games, "players": report.players,
            "figures": len(report.figures),
            "sprt": [{**s.as_json(), "source": source} for s, source in
                     zip(report.sprts, report.sprt_sources)],
            "ratings": report.ratings.as_json()["players"],
            "book_exits": [row.as_dict() for row in report.book_exits]}

