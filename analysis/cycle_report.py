"""``bookgen report --cycle DIR``: a ``bookgen cycle`` across its generations.

For every finished generation (its ``generation.json``, :mod:`bookgen.cycle.generations`):
the Ordo rating of the network it trained against generation 0's network
(``init``, fixed at 0) and of the refine engine, fitted on the games of every
generation's matches at once (:func:`bookgen.analysis.ratings.fit_ratings`,
errors from its parametric bootstrap); the promotion test's W/D/L, Elo and
LOS; the book's size and depth; the mistakes found and their size (mean
|engine - book| in cp); the network's value loss and accuracy on the
generation's mistake positions (labels from the refine engine) before and
after training; and whether it was promoted.

A rating fitted on a perfect score (every game won, or lost: the refine
engine against small networks) has no finite maximum-likelihood value: Ordo
(:mod:`bookgen.analysis.ratings`) gives it a floor (or ceiling), and the
report marks it ``>`` (``<``) with a footnote, and ``rating_is_bound`` in
JSON, instead of printing it as a precise number; so does a rating whose
error is unbounded.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bookgen.cycle.generations import generation_dirs, read_json
from bookgen.errors import BookgenError, at_least

__all__ = ["CycleReport", "CycleReportSettings", "GenerationRow", "build_cycle_report",
           "format_cycle_report"]

INIT_NAME = "init"
REFINE_NAME = "refine"


@dataclass(frozen=True)
class CycleReportSettings:
    """``simulations`` bootstrap runs of the rating errors (0: none) from ``seed``."""

    simulations: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        at_least("simulations", self.simulations, 0)


@dataclass
class GenerationRow:
    """One generation of the report (None: not measured)."""

    name: str
    network: str                    # the network it started from
    promoted: bool
    best: str                       # the network the next generation starts from
    rating: float | None            # of the network it trained, Ordo points, init = 0
    rating_error: float | None
    rating_bound: str               # ">" a floor (100 % score), "<" a ceiling (0 %), "" exact
    rating_is_bound: bool           # a bound, or its error is unbounded: not a precise value
    match: dict[str, Any]           # the promotion test: W/D/L, Elo, LOS, verdict
    book_positions: int
    book_moves: int
    book_max_ply: float | None
    book_mean_ply: float | None
    mistakes: int
    mistake_size_cp: float | None
    held_out_value_loss_before: float | None
    held_out_value_loss_after: float | None
    held_out_value_accuracy_before: float | None
    held_out_value_accuracy_after: float | None
    selfplay_games: int
    training_records: int


@dataclass
class CycleReport:
    directory: str
    generations: list[GenerationRow] = field(default_factory=list)
    ratings: list[dict[str, Any]] = field(default_factory=list)   # every player, best first
    refine_rating: float | None = None
    refine_rating_error: float | None = None
    refine_rating_bound: str = ""
    refine_rating_is_bound: bool = False
    games: int = 0
    unfinished: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _is_bound(player: dict[str, Any]) -> bool:
    """Whether ``player``'s rating is no precise value: a floor or ceiling (a
    100 % or 0 % score) or a rating whose error is unbounded."""
    error = player.get("error")
    return bool(player.get("bound")) or (error is not None and not math.isfinite(error))


def _held_out(train: dict[str, Any], which: str, metric: str) -> float | None:
    values = train.get(f"held_out_{which}")
    return values.get(metric) if values else None


def build_cycle_report(directory: str | Path,
                       settings: CycleReportSettings | None = None) -> CycleReport:
    """The report of the cycle in ``directory``."""
    from bookgen.analysis.ratings import Anchor, RatingSettings, fit_ratings
    from bookgen.analysis.results import load_games

    settings = settings if settings is not None else CycleReportSettings()
    directory = Path(directory)
    folders = generation_dirs(directory)
    if not folders:
        raise BookgenError(f"{directory}: no generations (gen-000, ...): not a bookgen cycle "
                           "directory")
    report = CycleReport(str(directory))
    summaries: list[dict[str, Any]] = []
    results: list[str] = []
    for folder in folders:
        path = folder / "generation.json"
        if not path.exists():
            report.unfinished.append(folder.name)
            continue
        summaries.append(read_json(path))
        if (folder / "match.sqlite").exists():
            results.append(str(folder / "match.sqlite"))
    games = load_games(results) if results else []
    report.games = len(games)
    table = None
    if games:
        names = {g.black for g in games} | {g.white for g in games}
        anchor = Anchor(INIT_NAME) if INIT_NAME in names else None
        table = fit_ratings(games, RatingSettings(simulations=settings.simulations,
                                                  seed=settings.seed, anchor=anchor))
        report.ratings = [asdict(p) for p in table.players]
    by_name = {p["name"]: p for p in report.ratings}
    if REFINE_NAME in by_name:
        report.refine_rating = by_name[REFINE_NAME]["rating"]
        report.refine_rating_error = by_name[REFINE_NAME]["error"]
        report.refine_rating_bound = by_name[REFINE_NAME]["bound"]
        report.refine_rating_is_bound = _is_bound(by_name[REFINE_NAME])
    for summary in summaries:
        stages = summary["stages"]
        train, mistakes, book = stages["train"], stages["mistakes"], summary["book"]
        player = by_name.get(summary["name"], {})
        report.generations.append(GenerationRow(
            name=summary["name"], network=summary["network"], promoted=summary["promoted"],
            best=summary["best"], rating=player.get("rating"),
            rating_error=player.get("error"), rating_bound=player.get("bound", ""),
            rating_is_bound=_is_bound(player),
            match={k: v for k, v in stages["match"].items()
                   if k in ("opponent", "wins", "draws", "losses", "elo", "elo_error", "los",
                            "verdict", "test")},
            book_positions=book["positions"], book_moves=book["moves"],
            book_max_ply=book["ply"].get("max"), book_mean_ply=book["ply"].get("mean"),
            mistakes=mistakes["mistakes"], mistake_size_cp=mistakes["size_mean_cp"],
            held_out_value_loss_before=_held_out(train, "before", "value_loss"),
            held_out_value_loss_after=_held_out(train, "after", "value_loss"),
            held_out_value_accuracy_before=_held_out(train, "before", "value_accuracy"),
            held_out_value_accuracy_after=_held_out(train, "after", "value_accuracy"),
            selfplay_games=stages["selfplay"]["games"],
            training_records=train["train_records"]))
    return report


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _rating(value: float | None, error: float | None, bound: str = "") -> str:
    if value is None:
        return "-"
    return f"{bound}{value:.0f}" + (f" ± {error:.0f}" if error is not None else "")


FOOTNOTES = {">": "> all games won: the rating is a lower bound (Ordo's floor), not an estimate",
             "<": "< all games lost: the rating is an upper bound (Ordo's ceiling), not an "
                  "estimate",
             "inf": "± inf: the rating's error is unbounded"}


def format_cycle_report(report: CycleReport) -> str:
    """The report as a text table (one row per finished generation)."""
    lines = [f"{report.directory}: {len(report.generations)} finished generations, "
             f"{report.games} match games"
             + (f"; unfinished: {', '.join(report.unfinished)}" if report.unfinished else "")]
    if report.refine_rating is not None:
        lines.append("refine engine: " + _rating(report.refine_rating, report.refine_rating_error,
                                                 report.refine_rating_bound)
                     + " Ordo points against generation 0's network (init = 0)")
    header = ("gen", "from", "rating vs init", "match W-D-L", "LOS %", "promoted", "book pos",
              "max ply", "mistakes", "size cp", "held-out vloss", "vacc")
    rows = [header]
    for g in report.generations:
        m = g.match
        rows.append((
            g.name, g.network, _rating(g.rating, g.rating_error, g.rating_bound),
            f"{m.get('wins', 0)}-{m.get('draws', 0)}-{m.get('losses', 0)}",
            _number(m.get("los")), "yes" if g.promoted else "no", str(g.book_positions),
            _number(g.book_max_ply, 0), str(g.mistakes), _number(g.mistake_size_cp, 0),
            f"{_number(g.held_out_value_loss_before, 3)} -> "
            f"{_number(g.held_out_value_loss_after, 3)}",
            f"{_number(g.held_out_value_accuracy_before, 2)} -> "
            f"{_number(g.held_out_value_accuracy_after, 2)}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                     .rstrip())
    marks = [(r.rating_bound, r.rating_error) for r in report.generations]
    if report.refine_rating is not None:
        marks.append((report.refine_rating_bound, report.refine_rating_error))
    used = {bound for bound, _ in marks if bound}
    if any(error is not None and not math.isfinite(error) for _, error in marks):
        used.add("inf")
    lines.extend(text for key, text in FOOTNOTES.items() if key in used)
    return "\n".join(lines) + "\n"
